"""The agent events (LANGUAGE.md §13) against a real model: SmolLM2-135M-Instruct served by
llama.cpp on loopback (conftest.py) as the light and fast tiers ([models.*]), through the CLI.

The model is far too small to write good chains or decide well; what is asserted is the
plumbing: `agent.decide` gives a decision valid against its result schema or fails cleanly;
every request is a `model_call` record, and a resume gives the recorded answers back without
asking again; `agent.chain` sends the checker's diagnostics back at most `max_repairs` times,
then runs the chain or refuses it with the diagnostics; the budgets bound the requests that
reach the server; timeouts, fallbacks, borrowed tiers and an endpoint that is down.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from llm_util import Proxy, cli, closed_port, records, run, write_project

MODEL = "smollm2-135m-instruct"


def tier(name: str, url: str, timeout: str = "120s", max_tokens: int = 256) -> str:
    return (f'[models.{name}]\nbase_url = "{url}"\nmodel = "{MODEL}"\ntimeout = "{timeout}"\n'
            f"max_tokens = {max_tokens}\n\n")


def result_schema(project: Path, event: str) -> dict[str, Any]:
    described = cli(project, "describe", event, "--json")
    assert described.returncode == 0, described.stderr
    return dict(json.loads(described.stdout)["result"])


def model_calls(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == "model_call"]


def finished(recs: list[dict[str, Any]], step: str) -> dict[str, Any]:
    ends = [r for r in recs if r["type"] == "step_finished" and r["step"] == step]
    assert ends, f"step {step} did not finish"
    return ends[-1]


def resume_after_last_model_call(project: Path, model: Proxy) -> list[dict[str, Any]]:
    """Cut the transcript just after its last model_call (a crash before the step that asked
    ended), resume, and check that no request reached the server; the records after."""
    from tests.journal_util import cut_after

    transcript = project / "run.jsonl"
    last = model_calls(records(transcript))[-1]["seq"]
    cut_after(transcript, lambda r: r["seq"] == last)
    asked = len(model.chat_calls(model.test))
    resumed = cli(project, "resume", "run.jsonl", "--json", "--progress", "plain")
    assert len(model.chat_calls(model.test)) == asked, "the resume asked the model again"
    recs = records(transcript)
    assert recs[-1]["type"] == "run_finished", resumed.stderr
    assert resumed.returncode == (0 if recs[-1]["status"] in ("ok", "broken") else 1), resumed.stderr
    return recs


def assert_recorded_as_sent(model: Proxy, recs: list[dict[str, Any]], tier_name: str) -> None:
    """Each request that reached the server is a model_call record, in order: its tier, its
    answer as the server gave it, the server's token counts."""
    calls = [c for c in model.chat_calls(model.test) if not c.client_gone]
    recorded = model_calls(recs)
    assert len(recorded) == len(calls), (recorded, calls)
    for call, rec in zip(calls, recorded):
        assert rec["tier"] == tier_name and rec["model"] == MODEL and rec.get("error") is None, rec
        assert rec["answer"] == call.content
        assert (rec["usage"]["prompt_tokens"], rec["usage"]["completion_tokens"]) == call.tokens
        assert rec["duration_ms"] > 0
        assert call.request["max_tokens"] == 256  # the tier's max_tokens, sent as asked


# -- agent.decide ---------------------------------------------------------------------------


def test_agent_decide_answers_a_decision_recorded_and_given_back_on_resume(model: Proxy, project: Path) -> None:
    write_project(project, tier("light", model.url), """
steps:
  - agent.decide:
      event: room.book
      params: {room: Blue, people: "a dozen"}
outputs: {decision: "{agent.decide}"}
""")
    proc, recs, seconds = run(project)
    calls = model.chat_calls(model.test)
    assert len(calls) == 1 and calls[0].kind == "decision"
    assert "people: 'a dozen' is not of type 'integer'" in json.dumps(calls[0].request)
    assert_recorded_as_sent(model, recs, "light")
    assert model_calls(recs)[0]["task"] == "decide" and model_calls(recs)[0]["step"] == "1"
    end = finished(recs, "1")
    if end["status"] == "ok":  # a decision, valid against agent.decide's result schema
        jsonschema.validate(end["result"], result_schema(project, "agent.decide"))
        assert json.loads(proc.stdout)["decision"] == end["result"] and proc.returncode == 0
    else:  # the answer was no decision, or a continue whose params are still invalid: the step says so
        message = end["error"]["message"]
        assert end["status"] == "failed" and ("the decide model" in message or
                                              "the decision's params for room.book are still invalid" in message), end
        assert proc.returncode == 1
    after = resume_after_last_model_call(project, model)
    again = finished(after, "1")
    assert (again["status"], again["result"]) == (end["status"], end["result"])
    assert len(model_calls(after)) == 1  # given back, not asked and recorded again
    print(f"\n[run] {model.test}: {end['status']} {json.dumps(end['result'])[:120]}; run {seconds:.2f}s")


def test_agent_decide_falls_back_when_the_light_tier_times_out(model: Proxy, project: Path) -> None:
    write_project(project, tier("light", model.url, timeout="50ms") + '[decide]\nfallback = "skip"\n', """
steps:
  - agent.decide:
      event: note.keep
      params: {text: "Sarah asks about the Q1 budget"}
      condition: only if the message is about money
outputs: {decision: "{agent.decide}"}
""")
    proc, recs, seconds = run(project)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"decision": {"action": "skip"}}
    failed = model_calls(recs)
    assert len(failed) == 1 and failed[0]["answer"] is None and failed[0]["tier"] == "light"
    assert "did not answer within 0.05s" in failed[0]["error"]["message"], failed[0]
    assert seconds < 15
    print(f"\n[run] {model.test}: skip from the fallback after 50ms; run {seconds:.2f}s")


# -- agent.chain ----------------------------------------------------------------------------


PLAN_CHAIN = """
allow: [tools.now, note.keep, agent.chain]
steps:
  - agent.chain:
      plan: "1. Get today's date\\n2. Keep a note that says which day it is"
      max_repairs: MAX_REPAIRS
outputs: {made: "{agent.chain}"}
"""


@pytest.mark.parametrize("max_repairs", [0, 2])
def test_agent_chain_checks_repairs_within_the_bound_and_replays(model: Proxy, project: Path,
                                                                 max_repairs: int) -> None:
    write_project(project, tier("fast", model.url), PLAN_CHAIN.replace("MAX_REPAIRS", str(max_repairs)))
    proc, recs, seconds = run(project)
    calls = model.chat_calls(model.test)
    assert 1 <= len(calls) <= 1 + max_repairs  # the bound: the first request and at most max_repairs more
    assert all(c.kind == "chain" for c in calls)
    assert_recorded_as_sent(model, recs, "fast")
    assert [r["task"] for r in model_calls(recs)] == ["chain"] + ["repair"] * (len(calls) - 1)
    for before, repair in zip(calls, calls[1:]):
        # a repair is the conversation so far, the refused answer, and the checker's diagnostics
        sent = repair.request["messages"]
        assert sent[:len(before.request["messages"])] == before.request["messages"]
        assert sent[-2] == {"role": "assistant", "content": before.content}
        assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("The checker refused that chain:\n- ")
    end = finished(recs, "1")
    sub_steps = [r for r in recs if r["type"] == "step_started" and r["step"].startswith("1/")]
    if end["status"] == "ok":  # a chain the checker accepted ran, within the allow list
        made = end["result"]
        jsonschema.validate(made, result_schema(project, "agent.chain"))
        assert made["repairs"] == len(calls) - 1 and sub_steps
        assert {r["event"] for r in sub_steps} <= {"tools.now", "note.keep", "agent.chain"}
        outcome = f"ran after {made['repairs']} repairs: {json.dumps(made['chain'])[:160]}"
    else:
        message = end["error"]["message"]
        assert end["status"] == "failed" and proc.returncode == 1, end
        if "was refused by the checker" in message:  # refused: after exactly max_repairs repairs, nothing ran
            assert len(calls) == 1 + max_repairs and f"(max_repairs = {max_repairs})" in message
            assert (f"after {max_repairs} repairs" in message) is (max_repairs > 0)
            assert not sub_steps
            outcome = f"refused after {max_repairs} repairs: {message[:200]}"
        else:  # accepted, and the chain it wrote failed as it ran
            assert message.startswith("the chain agent.chain wrote failed") and sub_steps, message
            outcome = f"ran and failed: {message[:200]}"
    after = resume_after_last_model_call(project, model)
    again = finished(after, "1")
    assert again["status"] == end["status"] and again["error"] == end["error"]
    if end["status"] == "ok":
        assert (again["result"]["chain"], again["result"]["repairs"]) == (end["result"]["chain"], end["result"]["repairs"])
    assert len(model_calls(after)) == len(calls)
    print(f"\n[run] {model.test}: {len(calls)} requests, {outcome}; run {seconds:.2f}s")


def test_the_budget_bounds_the_requests_agent_chain_makes(model: Proxy, project: Path) -> None:
    """limits.max_model_calls = 1: a chain the checker refuses cannot be repaired (the repair
    would be call 2): the run stops with exit 3 naming the budget, and one request was made."""
    write_project(project, tier("fast", model.url),
                  "limits: {max_model_calls: 1}\n" + PLAN_CHAIN.replace("MAX_REPAIRS", "2"))
    proc, recs, seconds = run(project)
    calls = model.chat_calls(model.test)
    assert len(calls) == 1
    if proc.returncode == 3:
        assert "max_model_calls" in proc.stderr and recs[-1]["status"] != "ok", proc.stderr
        outcome = "stopped by the budget before a repair"
    else:
        assert finished(recs, "1")["status"] in ("ok", "failed")
        outcome = f"status {finished(recs, '1')['status']} without a repair"
    print(f"\n[run] {model.test}: {outcome}; run {seconds:.2f}s")


def test_agent_chain_timeout_fails_the_step_and_resume_asks_again(model: Proxy, project: Path) -> None:
    """A request that timed out is recorded with its error; a resume asks it again (only
    answers are given back)."""
    write_project(project, tier("fast", model.url, timeout="50ms"), PLAN_CHAIN.replace("MAX_REPAIRS", "2"))
    proc, recs, seconds = run(project)
    assert proc.returncode == 1
    end = finished(recs, "1")
    assert end["error"]["type"] == "model", end
    assert "the fast model" in end["error"]["message"] and "did not answer within 0.05s" in end["error"]["message"]
    failed = model_calls(recs)
    assert len(failed) == 1 and failed[0]["answer"] is None and failed[0]["error"]["type"] == "model"
    assert seconds < 15
    from tests.journal_util import cut_after

    cut_after(project / "run.jsonl", lambda r: r["type"] == "model_call")
    resumed = cli(project, "resume", "run.jsonl", "--progress", "plain")
    assert resumed.returncode == 1 and "did not answer within 0.05s" in resumed.stderr
    again = model_calls(records(project / "run.jsonl"))
    # asked again: a second record, failed in turn (whether the request got as far as the
    # server within 50 ms on a busy machine is not asserted)
    assert len(again) == 2 and again[0] == failed[0] and again[1]["error"]["type"] == "model"


def test_a_tier_that_is_not_configured_borrows_one_and_a_down_endpoint_is_a_clear_error(project: Path) -> None:
    """Only the light tier is configured: agent.chain (fast) asks it; its endpoint is down."""
    port = closed_port()
    write_project(project, tier("light", f"http://127.0.0.1:{port}/v1"), PLAN_CHAIN.replace("MAX_REPAIRS", "2"))
    proc, recs, seconds = run(project)
    assert proc.returncode == 1
    end = finished(recs, "1")
    assert end["error"]["type"] == "model"
    assert f"cannot reach the light model at http://127.0.0.1:{port}/v1/chat/completions" in end["error"]["message"]
    assert [r["tier"] for r in model_calls(recs)] == ["light"]
    assert proc.stderr.strip().splitlines()[-1].startswith("run failed: agent.chain: cannot reach the light model")
    assert seconds < 15


# the project's prompts (prompts/ replaces chainlang's own) have the model copy a chain: one the
# checker refuses (note.keep has no param `txt`), then, in the repair, the corrected one
COPY_PROMPTS = {
    "chain.system.j2": "Answer with JSON only.\n",
    "chain.user.j2": 'Say exactly: {"chain": ["tools.now", {"note.keep": {"txt": "today is {tools.now.weekday}"}}]}\n',
    "chain.repair.j2": ("The checker refused that chain:\n{% for problem in problems %}- {{ problem }}\n{% endfor %}"
                        'Say exactly: {"chain": ["tools.now", {"note.keep": {"text": "today is {tools.now.weekday}"}}]}\n'),
}


def test_a_chain_the_checker_refuses_goes_back_with_its_diagnostics_and_the_repair_runs(model: Proxy,
                                                                                      project: Path) -> None:
    """The real model and server, with prompts that make its answers known: greedy decoding
    copies a short JSON text exactly (the repeat penalty off: it penalises copying), so the
    path is the same every time: refused by the checker, sent back, repaired, run."""
    (project / "prompts").mkdir()
    for name, text in COPY_PROMPTS.items():
        (project / "prompts" / name).write_text(text, encoding="utf-8")
    model.sampling = {"repeat_penalty": 1.0}
    write_project(project, tier("fast", model.url), PLAN_CHAIN.replace("MAX_REPAIRS", "1"))
    proc, recs, seconds = run(project, "--now", "2026-01-07T09:00:00+00:00")
    calls = model.chat_calls(model.test)
    assert [r["task"] for r in model_calls(recs)] == ["chain", "repair"], [c.content for c in calls]
    assert json.loads(calls[0].content) == {"chain": ["tools.now", {"note.keep": {"txt": "today is {tools.now.weekday}"}}]}
    diagnostics = calls[1].request["messages"][-1]["content"]
    assert diagnostics.startswith("The checker refused that chain:\n- line ") and "txt" in diagnostics, diagnostics
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)["made"]
    assert made["repairs"] == 1 and made["result"] == {"kept": "today is Wednesday"}
    assert made["chain"] == ["tools.now", {"note.keep": {"text": "today is {tools.now.weekday}"}}]
    ran = [(r["step"], r["event"], r["status"]) for r in recs if r["type"] == "step_finished"]
    assert ran == [("1/1", "tools.now", "ok"), ("1/2", "note.keep", "ok"), ("1", "agent.chain", "ok")]
    after = resume_after_last_model_call(project, model)
    assert finished(after, "1")["result"] == finished(recs, "1")["result"]
    print(f"\n[run] {model.test}: refused ({diagnostics.splitlines()[1][:120]}), repaired, ran; run {seconds:.2f}s")
