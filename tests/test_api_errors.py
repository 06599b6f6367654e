"""Typed errors of the Python API (issue 26, deliverable 3): `result.raise_for_status()`
raises the chainlang.errors class of how a run or an emit ended, with its fields; a tool's
exception is the `__cause__` of RunFailed, with its traceback; bad inputs are an InputError
in the words of the API, while the CLI keeps its `--input` words.

Everything goes through `chainlang.run` / `chainlang.emit` / `chainlang.resume` on chain
files and a tools module written in tmp_path.
"""

from __future__ import annotations

import json
import pickle
import textwrap
import traceback
from pathlib import Path

import pytest

import chainlang
from chainlang import errors
from chainlang.errors import (ChainInvalid, ChainlangError, ConfigError, InputError, LimitExceeded, ModelError,
                              RegistryError, RunFailed, RunInterrupted, RunWaiting, UsageError)
from chainlang.runtime.runner import RunResult
from tests.helpers import cli
from tests.journal_util import cut_after

TOOLS = '''\
import asyncio

from chainlang import event


class DiskFull(RuntimeError):
    """The tool's own exception type."""


@event("my.inc")
def inc(x: int) -> int:
    return x + 1


@event("my.boom")
def boom(x: int) -> int:
    raise DiskFull("disk full")


@event("my.aboom")
async def aboom(x: int) -> int:
    await asyncio.sleep(0)
    raise DiskFull("disk full, async")


@event("my.send")
def send(to: str) -> str:
    return to
'''


def project(tmp_path: Path, chain: str, name: str = "main.chain.yaml") -> Path:
    (tmp_path / "errtools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / name
    path.write_text(textwrap.dedent(chain), encoding="utf-8")
    return path


def run(path: Path, inputs: dict[str, object] | None = None, **options: object) -> RunResult:
    return chainlang.run(path, inputs, tools=[str(path.parent / "errtools.py")], **options)  # type: ignore[arg-type]


# -- RunFailed and the tool's exception --------------------------------------------------------------


@pytest.mark.parametrize(("event", "text"), [("my.boom", "disk full"), ("my.aboom", "disk full, async")])
def test_a_tool_exception_is_the_cause_of_run_failed(tmp_path: Path, event: str, text: str) -> None:
    chain = project(tmp_path, f"""\
        steps:
          - my.inc: {{x: 1}}
          - {event}: {{x: 2}}
        """)
    result = run(chain, transcript=tmp_path / "run.jsonl")
    assert result.status == "failed"
    with pytest.raises(RunFailed) as caught:
        result.raise_for_status()
    failed = caught.value
    assert (failed.step, failed.event, failed.error_type) == ("2", event, "tool_error")
    assert failed.error["message"] == f"DiskFull: {text}"
    assert failed.result is result and failed.status == "failed" and failed.transcript == tmp_path / "run.jsonl"
    assert "step 2" in str(failed) and event in str(failed) and "run.jsonl" in str(failed)
    # the very exception the tool raised, with its traceback down to the tool's line
    cause = failed.__cause__
    assert cause is result.exception
    assert type(cause).__name__ == "DiskFull" and isinstance(cause, RuntimeError) and str(cause) == text
    frames = traceback.extract_tb(cause.__traceback__)
    assert frames[-1].name in ("boom", "aboom") and frames[-1].filename.endswith("errtools.py")
    assert "raise DiskFull" in "".join(traceback.format_exception(failed))
    # in memory only: the transcript has the message, never the traceback
    transcript = (tmp_path / "run.jsonl").read_text(encoding="utf-8")
    assert "Traceback" not in transcript and "errtools.py\", line" not in transcript


def test_the_cause_is_the_failing_step_s_not_an_earlier_caught_one(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - my.boom: {x: 1}
            on_error: continue
          - my.aboom: {x: 2}
        """)
    with pytest.raises(RunFailed) as caught:
        run(chain).raise_for_status()
    assert caught.value.step == "2"
    assert str(caught.value.__cause__) == "disk full, async"


def test_a_failure_without_a_tool_exception_has_no_cause(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - fail: "no stock left"
        """)
    result = run(chain)
    assert result.status == "failed" and result.exception is None
    with pytest.raises(RunFailed) as caught:
        result.raise_for_status()
    assert caught.value.__cause__ is None and caught.value.error_type == "fail"
    assert "no stock left" in str(caught.value)


# -- the other ends of a run -----------------------------------------------------------------------


def test_ok_does_not_raise(tmp_path: Path) -> None:
    chain = project(tmp_path, "steps:\n  - my.inc: {x: 1}\n")
    result = run(chain)
    assert result.status == "ok"
    result.raise_for_status()  # nothing to raise


def test_a_limit_raises_limit_exceeded(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        limits: {max_steps: 2}
        steps:
          - my.inc: {x: 1}
          - my.inc: {x: 2}
          - my.inc: {x: 3}
        """)
    with pytest.raises(LimitExceeded) as caught:
        run(chain).raise_for_status()
    assert caught.value.limit == "max_steps"
    assert "max_steps" in str(caught.value) and "limits.max_steps" in str(caught.value)
    assert isinstance(caught.value, errors.RunError) and not isinstance(caught.value, RunFailed)


def test_a_chain_that_does_not_check_raises_chain_invalid_with_positions(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - my.inc: {x: 1}
          - my.nope: {x: 1}
        """, name="bad.chain.yaml")
    result = run(chain)
    assert result.status == "invalid"
    with pytest.raises(ChainInvalid) as caught:
        result.raise_for_status()
    [first] = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert (Path(first.file).name, first.line, first.column, first.rule) == ("bad.chain.yaml", 3, 5, "CL014")
    assert "bad.chain.yaml:3:5" in str(caught.value) and "my.nope" in str(caught.value)
    assert caught.value.result is result


def test_a_run_stopped_before_its_end_raises_run_interrupted(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - my.inc: {x: 1}
          - my.send: {to: a}
        """)
    transcript = tmp_path / "run.jsonl"
    assert run(chain, transcript=transcript).status == "ok"
    # as if the process died while the (not idempotent) send ran: resume stops there
    cut_after(transcript, lambda r: r["type"] == "step_started" and r["step"] == "2")
    resumed = chainlang.resume(transcript, tools=[str(tmp_path / "errtools.py")])
    assert resumed.status == "interrupted"
    with pytest.raises(RunInterrupted) as caught:
        resumed.raise_for_status()
    assert caught.value.error["step"] == "2"
    assert f"chainlang.resume({str(transcript)!r})" in str(caught.value)


def test_a_detached_run_at_a_wait_raises_run_waiting(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        chainlang: 1
        chain: demo.approve
        events:
          order.approved:
            payload: {type: object}
        steps:
          - wait: {event: order.approved, timeout: 1d}
            id: approval
        """)
    result = run(chain, detach=True)
    assert result.status == "waiting"
    with pytest.raises(RunWaiting) as caught:
        result.raise_for_status()
    assert "order.approved" in str(caught.value)


def test_model_failures_are_model_errors() -> None:
    # the mapping of the error types a model gives (an agent's model, decide)
    for kind in ("model", "decide"):
        result = RunResult("r1", "failed", error={"type": kind, "message": "no model answered", "step": "3"})
        with pytest.raises(ModelError) as caught:
            result.raise_for_status()
        assert isinstance(caught.value, RunFailed) and caught.value.error_type == kind and caught.value.step == "3"


# -- inputs -------------------------------------------------------------------------------------------

INPUTS = """\
    inputs:
      n: {type: integer}
    steps:
      - my.inc: {x: "{inputs.n}"}
    """


def test_missing_input_is_an_input_error_in_api_words(tmp_path: Path) -> None:
    chain = project(tmp_path, INPUTS)
    with pytest.raises(InputError) as caught:
        run(chain)
    error = caught.value
    assert (error.name, error.problem) == ("n", "missing; the chain needs it (an integer): add it to inputs")
    assert str(error) == "inputs['n']: missing; the chain needs it (an integer): add it to inputs"
    assert "--input" not in str(error)
    assert not (tmp_path / ".chainlang" / "runs").exists() or not list((tmp_path / ".chainlang" / "runs").iterdir())


def test_every_input_problem_is_named(tmp_path: Path) -> None:
    chain = project(tmp_path, INPUTS)
    with pytest.raises(InputError) as caught:
        run(chain, {"n": "x", "m": 2})
    error = caught.value
    assert [(p.name, p.kind) for p in error.problems] == [("m", "unknown"), ("n", "invalid")]
    assert str(error) == ("inputs['m']: the chain declares no such input (declared: n); "
                          "inputs['n']: 'x' is not of type 'integer'")


def test_usage_error_still_catches_input_and_config_errors(tmp_path: Path) -> None:
    chain = project(tmp_path, INPUTS)
    with pytest.raises(UsageError):
        run(chain)
    with pytest.raises(ChainlangError):
        run(chain)
    # ConfigError: caught as a RegistryError (as the registry code does) and as a UsageError
    assert issubclass(ConfigError, UsageError) and issubclass(ConfigError, RegistryError)
    assert issubclass(RegistryError, ChainlangError) and issubclass(errors.RunInUse, UsageError)
    for caught_as in (UsageError, RegistryError, ChainlangError):
        with pytest.raises(caught_as):
            raise ConfigError("chainlang.toml: invalid TOML")


def test_the_cli_keeps_its_input_words(tmp_path: Path) -> None:
    chain = project(tmp_path, INPUTS)
    tools = str(tmp_path / "errtools.py")
    missing = cli(tmp_path, "run", chain.name, "--tools", tools)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "chainlang: error: missing input 'n': give it with --input n=VALUE"
    wrong = cli(tmp_path, "run", chain.name, "--tools", tools, "--input", "n=x", "--input", "m=2")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == ("chainlang: error: unknown input 'm' (declared: n); "
                                    "input 'n': 'x' is not of type 'integer'")


# -- emit ---------------------------------------------------------------------------------------------

HOOKS = """\
events:
  order.placed:
    payload:
      type: object
      properties:
        id: {type: integer}
      required: [id]
hooks:
  - id: ship
    trigger: post:order.placed
    action:
      - my.boom: {x: 1}
"""


def test_emit_errors(tmp_path: Path) -> None:
    (tmp_path / "errtools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "shop.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    tools = [str(tmp_path / "errtools.py")]
    bad = chainlang.emit("order.placed", {"id": "x"}, project=tmp_path, tools=tools)
    assert bad.status == "invalid"
    with pytest.raises(InputError) as data_error:
        bad.raise_for_status()
    assert data_error.value.name == "data" and "'x' is not of type 'integer'" in data_error.value.problem
    assert "order.placed" in str(data_error.value) and data_error.value.result is bad

    failed = chainlang.emit("order.placed", {"id": 1}, project=tmp_path, tools=tools)
    assert failed.status == "failed"
    with pytest.raises(RunFailed) as hook_error:
        failed.raise_for_status()
    assert hook_error.value.error_type == "hook"
    assert (hook_error.value.step, hook_error.value.event) == ("hook:ship/1", "my.boom")
    assert "hook ship" in str(hook_error.value) and "DiskFull: disk full" in str(hook_error.value)


# -- the errors travel --------------------------------------------------------------------------------


def test_errors_pickle_with_their_fields(tmp_path: Path) -> None:
    chain = project(tmp_path, INPUTS)
    with pytest.raises(InputError) as caught:
        run(chain)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), again.name, again.problem, str(again)) == (
        InputError, "n", caught.value.problem, str(caught.value))
    result = RunResult("r1", "limit", error={"type": "limit", "limit": "max_steps", "message": "too many"})
    limit = pickle.loads(pickle.dumps(errors.LimitExceeded("stopped", result)))
    assert limit.limit == "max_steps" and str(limit) == "stopped" and json.dumps(limit.error)
