"""What the Temporal workflows and activities send each other (chainlang/engine/temporal/
messages.py): dataclasses through Temporal's own data converter, user values in their key
order, messages of older and newer workers read, and a step's failure made on a worker
recorded as the embedded engine records it (type and message, nothing added)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.helpers import cli, show
from tests.temporal_util import Workers, dev_server, temporal_toml

pytest.importorskip("temporalio", reason="the Temporal SDK is not installed (pip install 'chainlang[temporal]')")

from temporalio.converter import DataConverter  # noqa: E402 - after the skip

from chainlang.engine.temporal.messages import (  # noqa: E402
    LimitHit, ModelAnswered, ModelAsked, ModelBudget, ModelUse, ProgressReport, ThreadEvent, ThreadEventAdded,
    ThreadRead, ThreadReads, ToolCall, ToolOutcome, received, to_json)

NOW = "2026-11-19T09:00:00+00:00"
# a user's value whose keys are not in sorted order, at every depth
ORDERED = {"zeta": 1, "alpha": {"b": 2, "a": [{"y": 1, "x": 2}]}, "mid": None}


def through_temporal(message: Any, kind: Any) -> Any:
    """`message` written and read back by Temporal's default converter, as the type `kind`
    (the activity's type hint)."""
    converter = DataConverter.default.payload_converter
    return converter.from_payloads(converter.to_payloads([message]), [kind])[0]


def keys_in_order(value: Any) -> list[Any]:
    """The keys of every object in `value`, depth first, in their order."""
    if isinstance(value, dict):
        return [[key, keys_in_order(item)] for key, item in value.items()]
    if isinstance(value, list):
        return [keys_in_order(item) for item in value]
    return []


def test_temporal_s_converter_sorts_the_keys_of_a_mapping() -> None:
    """Why user values travel as JSON text: a plain dict comes back with its keys sorted."""
    back = through_temporal(ORDERED, dict)
    assert back == ORDERED and keys_in_order(back) != keys_in_order(ORDERED)


MESSAGES = [
    ToolCall("run-1", "main", "s1/a[0]", "test.echo", 2, to_json(ORDERED), NOW, to_json(ORDERED), [["test.*"]],
             ModelBudget(3, None), {'["plan-1", [["n", "summary"]]]': ["plan-1", [["k", "plan-1"], ["n", "summary"]]]}),
    ToolOutcome(to_json(ORDERED), None, LimitHit("max_tokens", "over"), ["note"], [ProgressReport("half", 0.5)],
                [NOW], to_json([{"type": "model_call", "tier": "fast", "usage": {"prompt_tokens": 1}}]),
                ModelUse(1, 20), {"k": ThreadRead(to_json(ORDERED)), "e": ThreadRead(error="no such thread")},
                "result"),
    ThreadEvent("plan-1", "test.echo", to_json(ORDERED), "run-1", "s1", None, NOW, None),
    ThreadEventAdded("the store is read-only", {"k": ThreadRead(to_json(ORDERED))}),
    ThreadReads({"k": ["plan-1", [["n", "plan-1"]]]}, {"k": ThreadRead(to_json(ORDERED))}),
    ModelAsked("fast", "think", to_json([{"role": "user", "content": "hi"}]), to_json(ORDERED), "plan"),
    ModelAnswered("an answer", {"prompt_tokens": 3, "completion_tokens": 4}),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_round_trips_with_the_user_s_key_order(message: Any) -> None:
    kind = type(message)
    back = received(kind, through_temporal(message, kind | str))  # the activity's / workflow's type hint
    assert back == message
    for name in ("params_json", "captured_json", "result_json", "schema_json"):
        text = getattr(back, name, None)
        if text is not None:
            assert keys_in_order(json.loads(text)) == keys_in_order(ORDERED), name
    for read in (getattr(back, "reads", None) or getattr(back, "values", None) or {}).values():
        if isinstance(read, ThreadRead) and read.error is None:
            assert keys_in_order(json.loads(read.value_json)) == keys_in_order(ORDERED)


def test_a_message_with_members_added_or_unknown_is_read() -> None:
    """Compatible additions: a member this side does not know is ignored, one the other side
    did not send takes its default (so workers of two versions can share a run)."""
    converter = DataConverter.default.payload_converter
    older = {"result_json": "[1, 2]", "error": "boom", "notes": [], "progress": [], "clock": [],
             "model_calls_json": "[]", "used": {"calls": 0, "tokens": 0}}  # from before error_type
    out = converter.from_payloads(converter.to_payloads([older]), [ToolOutcome])[0]
    assert out.error_type == "tool_error" and out.result == [1, 2] and out.reads is None
    newer = {**older, "error_type": "result", "a_member_from_later": {"x": 1}}
    assert converter.from_payloads(converter.to_payloads([newer]), [ToolOutcome])[0].error_type == "result"


def test_the_json_text_of_a_run_from_before_the_dataclasses_is_read() -> None:
    """A run recorded when the activities sent JSON text (tests/fixtures/temporal/*history.json)."""
    legacy = json.dumps({"result": ORDERED, "error": None, "notes": ["hi"], "progress": [["half", 0.5]],
                         "clock": [NOW], "models": [], "used": [1, 7], "limit": ["max_steps", "too many"],
                         "reads": {"k": {"value": ORDERED}, "e": {"error": "gone"}}})
    out = received(ToolOutcome, through_temporal(legacy, ToolOutcome | str))
    assert keys_in_order(out.result) == keys_in_order(ORDERED)
    assert (out.notes, out.progress, out.used, out.limit) == (
        ["hi"], [ProgressReport("half", 0.5)], ModelUse(1, 7), LimitHit("max_steps", "too many"))
    assert out.reads == {"k": ThreadRead(to_json(ORDERED)), "e": ThreadRead(error="gone")}
    call = received(ToolCall, json.dumps({"event": "test.echo", "params": ORDERED, "run_id": "r", "chain": None,
                                          "step": "s1", "attempt": 1, "now": None, "captured": {}, "allow": [],
                                          "budget": [None, 5], "reads": None}))
    assert keys_in_order(call.params) == keys_in_order(ORDERED) and call.budget == ModelBudget(None, 5)


def test_a_failure_made_on_a_worker_is_recorded_as_it_is() -> None:
    """The workflow raises ToolFailed with the activity's message and type; the step records
    both unchanged, whatever the message looks like (no ValueError convention)."""
    from chainlang.runtime.invoke import tool_message
    from chainlang.runtime.outcomes import ToolFailed

    for message in ("KeyError: 'x'", "spaced  out\nover lines", "ValueError", ""):
        assert tool_message(ToolFailed(message)) == message
    failed = ToolFailed("run.fetch returned a value that is not JSON: result['when'] is an object", "result")
    assert (failed.kind, failed.message) == ("result", str(failed))


# -- on a Temporal server, against the embedded engine

TOOLS = '''
import sys
from typing import Any

from chainlang import event


class Oops(Exception):
    pass


@event("t.value_error", description="raise ValueError", idempotent=True)
def value_error() -> None:
    raise ValueError("  spaced   out: a value  ")


@event("t.key_error", description="raise KeyError", idempotent=True)
def key_error() -> None:
    raise KeyError("missing")


@event("t.custom", description="raise an exception of its own", idempotent=True)
async def custom() -> None:
    raise Oops("with: a colon")


@event("t.bare", description="raise an exception without a message", idempotent=True)
def bare() -> None:
    raise RuntimeError()


@event("t.exit", description="call sys.exit", idempotent=True)
def exit_() -> None:
    sys.exit(3)


@event("t.not_json", description="return a value that is not JSON", idempotent=True)
def not_json() -> Any:
    return {"when": object()}


@event("t.ordered", description="return its params as they came", idempotent=True)
def ordered(value: Any) -> Any:
    return {"zeta": 1, "alpha": {"b": 2, "a": 1}, "value": value}


@event("t.progress", description="report progress as tools do, well and badly", idempotent=True)
def progress(ctx: Any = None) -> str:
    ctx.progress("beyond the end", 2.0)
    ctx.progress("x" * 1500, 0.5)
    ctx.progress("by keyword", fraction=0.25)
    return "ok"
'''

CHAIN = """
steps:
  - {id: value_error, event: t.value_error, on_error: continue}
  - {id: key_error, event: t.key_error, on_error: continue}
  - {id: custom, event: t.custom, on_error: continue}
  - {id: bare, event: t.bare, on_error: continue}
  - {id: exit, event: t.exit, on_error: continue}
  - {id: not_json, event: t.not_json, on_error: continue}
  - {id: ordered, event: t.ordered, params: {value: {"zeta": 1, "alpha": {"b": 2, "a": 1}}}}
  - {id: progress, event: t.progress}
outputs: {ordered: "{ordered.result}"}
"""

# event → the error its step ends with, on both engines
EXPECTED_ERRORS = {
    "t.value_error": {"type": "tool_error", "message": "spaced out: a value"},
    "t.key_error": {"type": "tool_error", "message": "KeyError: 'missing'"},
    "t.custom": {"type": "tool_error", "message": "Oops: with: a colon"},
    "t.bare": {"type": "tool_error", "message": "RuntimeError"},
    "t.exit": {"type": "tool_error", "message": "SystemExit: the tool called sys.exit(3); a tool must not end the process"},
    "t.not_json": {"type": "result", "message": "t.not_json returned a value that is not JSON: result['when'] "},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


def run_on(project: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    proc = cli(project, "run", "failures.chain.yaml", "--now", NOW, "--json", "--transcript", "failures.jsonl",
               timeout=180)
    assert proc.returncode == 0, f"{project.name}: {show(proc)}"
    assert "Traceback" not in proc.stderr, show(proc)
    lines = (project / "failures.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(proc.stdout), [json.loads(line) for line in lines]


@pytest.mark.slow
def test_a_step_failure_from_a_worker_is_the_embedded_engine_s(server: str, tmp_path: Path) -> None:
    seen = {}
    for engine in ("embedded", "temporal"):
        project = tmp_path / engine
        project.mkdir()
        (project / "tools.py").write_text(TOOLS, encoding="utf-8")
        (project / "failures.chain.yaml").write_text(CHAIN, encoding="utf-8")
        toml = 'tools = ["tools.py"]\n' if engine == "embedded" else temporal_toml(server, "messages")
        (project / "chainlang.toml").write_text(toml, encoding="utf-8")
        workers = Workers(project)
        if engine == "temporal":
            workers.start()
        try:
            seen[engine] = run_on(project)
            if engine == "temporal":  # a tool's sys.exit failed its step, not the worker
                assert all(proc.poll() is None for proc in workers.procs)
        finally:
            workers.close()
        shutil.rmtree(project / ".chainlang", ignore_errors=True)

    for engine, (result, recs) in seen.items():
        finished = {rec["event"]: rec for rec in recs if rec["type"] == "step_finished"}
        for step, expected in EXPECTED_ERRORS.items():
            error = {k: (finished[step]["error"] or {}).get(k) for k in ("type", "message")}
            if step == "t.not_json":  # the rest names the object's type, as the embedded engine words it
                assert error["type"] == "result" and error["message"].startswith(expected["message"]), engine
            else:
                assert error == expected, f"{engine}: {step}"
        # the user's values keep their key order: params, result, outputs
        started = next(rec for rec in recs if rec["type"] == "step_started" and rec["event"] == "t.ordered")
        assert list(started["params"]["value"]) == ["zeta", "alpha"], engine
        assert list(finished["t.ordered"]["result"]) == ["zeta", "alpha", "value"], engine
        assert list(finished["t.ordered"]["result"]["alpha"]) == ["b", "a"], engine
        assert list(result["ordered"]["alpha"]) == ["b", "a"], engine  # --json: the outputs
        # progress reports cleaned up the same way: a fraction outside 0..1 unknown, the text cut
        reports = [(rec["message"], rec.get("fraction")) for rec in recs if rec["type"] == "step_progress"]
        assert reports == [("beyond the end", None), ("x" * 1000, 0.5), ("by keyword", 0.25)], engine

    def errors(recs: list[dict[str, Any]]) -> list[Any]:
        return [(rec["step"], rec.get("error")) for rec in recs if rec["type"] == "step_finished"]

    assert errors(seen["temporal"][1]) == errors(seen["embedded"][1])
