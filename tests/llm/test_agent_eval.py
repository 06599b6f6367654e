"""The agent evaluation (benchmarks/agent_eval.py) in a quick version: 6 plans and 4 labelled
decisions against SmolLM2-135M-Instruct, through the CLI of this checkout.

Only plumbing is asserted, never the rates (they are what the full evaluation measures, and a
135M model's answers are not ours to fix here): every run ended with its transcript closed and
without a traceback, every plan and every decision asked the model and recorded what it asked,
each request that reached the server is a model_call record, and the rates are computed from
the per-case results they summarize. The full evaluation is `python benchmarks/agent_eval.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from llm_util import Proxy

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import agent_eval  # noqa: E402

PLANS = 6
DECISIONS = 4


def check_rate(figure: dict[str, Any], hits: int, total: int) -> None:
    assert (figure["hits"], figure["total"]) == (hits, total), figure
    assert figure["rate"] == round(hits / total, 3)


def test_the_quick_evaluation_runs_every_case_and_computes_its_rates(model: Proxy, tmp_path: Path) -> None:
    plans = agent_eval.load_plans()[:PLANS]
    decisions = [d for d in agent_eval.load_decisions() if d["kind"] == "condition"][:DECISIONS - 1]
    decisions += [d for d in agent_eval.load_decisions() if d["kind"] == "repair"][:1]
    result = agent_eval.evaluate(model, tmp_path / "project", REPO, plans, decisions, max_repairs=0)

    assert [p["id"] for p in result["plans"]] == [p["id"] for p in plans]
    assert [d["id"] for d in result["decisions"]] == [d["id"] for d in decisions]
    for case in result["plans"] + result["decisions"]:
        assert case["finished"] and not case["traceback"], case
        assert case["asked"] >= 1, case  # the model was asked
    for plan in result["plans"]:
        # max_repairs 0: one request of the step, never a repair; every request (with those of a
        # nested agent.chain the model wrote) is a model_call record of the run
        assert plan["requests"] == 1 and plan["asked"] == plan["recorded"], plan
        assert plan["outcome"] != "no-model-call", plan
        assert plan["exact"] <= plan["valid"] and plan["valid_first_try"] == plan["valid"]
    for decision in result["decisions"]:
        assert decision["action"] and decision["source"], decision  # the decide record says what was decided
    asked = len(model.chat_calls(model.test))
    assert asked == sum(case["asked"] for case in result["plans"] + result["decisions"])
    assert asked == result["requests"]["all"]["count"] + result["requests"]["failed_requests"]

    rates = result["rates"]
    check_rate(rates["valid_first_try"], sum(p["valid_first_try"] for p in result["plans"]), PLANS)
    check_rate(rates["valid_after_repairs"], sum(p["valid"] for p in result["plans"]), PLANS)
    check_rate(rates["exact"], sum(p["exact"] for p in result["plans"]), PLANS)
    check_rate(rates["decisions_right"], sum(d["right"] for d in result["decisions"]), DECISIONS)
    assert rates["correct_turned_failure"] == sum(d["correct_turned_failure"] for d in result["decisions"])
    assert rates["tracebacks"] == 0
    json.dumps(result)  # what --out writes
    print(f"\n[eval] {json.dumps(rates)}")


def test_a_chain_is_flattened_to_its_events_in_order() -> None:
    """What `exact` compares: the steps in the forms a chain allows, blocks opened in order."""
    chain = ["tools.now",
             {"contacts.find": {"name": "Sarah"}},
             {"event": "weather.get", "params": {"city": "Paris"}},
             {"parallel": [{"notes.add": {"text": "a"}}, "email.send"]},
             {"foreach": "{contacts.find.list}", "as": "x", "steps": [{"task.create": {"title": "t", "due": "d"}}]},
             {"id": "second", "event": "weather.get", "params": {"city": "Rome"}, "decide": "only if rain"}]
    assert agent_eval.flatten(chain) == ["tools.now", "contacts.find", "weather.get", "notes.add", "email.send",
                                         "task.create", "weather.get"]
    assert agent_eval.flatten({"chain": "not steps"}) == [] and agent_eval.flatten([]) == []
