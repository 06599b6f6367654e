"""Retry by error type (LANGUAGE.md §2, issue 23 item 3): `retry.on`, `retry.jitter`,
`chainlang.StepError`, and one rule of what is retried for a live run and a resumed one.

End to end through the CLI with a project of its own (tools raising chainlang.StepError);
the waits of `jitter` are observed where the step pipeline takes them
(runtime/retry_policy.retry_delay), in a live run and in its resume.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import chainlang
from chainlang import status
from chainlang.model.nodes import Retry
from chainlang.runtime import retry_policy, step
from chainlang.runtime.step_error import error_of_step_error

from tests.helpers import cli_here, records, show
from tests.journal_util import cut_after, read_records

NOW = "2026-11-19T09:00:00+00:00"

TOOLS = '''
from typing import Any

import chainlang
from chainlang import event


@event("shop.charge", description="Charge a card", idempotent=True)
def charge(card: str, kind: str = "declined") -> dict:
    if card.startswith("4000"):
        raise chainlang.StepError(kind, f"card {card} was declined")
    return {"charged": card}


@event("shop.poll", description="Time out (its own timeout) until the given attempt", idempotent=True)
def poll(succeed_on: int, ctx: Any = None) -> int:
    if int(ctx.attempt) < succeed_on:
        raise chainlang.StepError("timeout", f"no answer (attempt {ctx.attempt})")
    return int(ctx.attempt)


@event("shop.slow", description="Take 30s until the given attempt", idempotent=True)
async def slow(succeed_on: int, ctx: Any = None) -> int:
    import asyncio

    if int(ctx.attempt) < succeed_on:
        await asyncio.sleep(30)
    return int(ctx.attempt)
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "shop_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["shop_tools.py"]\n', encoding="utf-8")
    return tmp_path


def run_chain(project: Path, text: str, name: str = "c") -> tuple[Any, list[dict[str, Any]]]:
    (project / f"{name}.chain.yaml").write_text(text, encoding="utf-8")
    proc = cli_here(project, "run", f"{name}.chain.yaml", "--now", NOW, "--json", "--transcript", f"{name}.jsonl")
    assert "Traceback" not in proc.stderr, show(proc)
    return proc, records(project, f"{name}.jsonl")


def attempts(recs: list[dict[str, Any]], path: str = "1") -> list[int]:
    return [r["attempt"] for r in recs if r["type"] == "step_started" and r["step"] == path]


def errors(recs: list[dict[str, Any]], path: str = "1") -> list[dict[str, Any]]:
    return [r["error"] for r in recs if r["type"] == "step_finished" and r["step"] == path]


# -- the saga: a declined card is not retried, a timeout is


def test_a_declined_card_is_tried_once_under_retry_on_timeout(project: Path) -> None:
    proc, recs = run_chain(project, """
steps:
  - shop.charge: {card: "4000-0002"}
    retry: {attempts: 5, delay: 10ms, on: [timeout]}
""")
    assert proc.returncode == 1, show(proc)
    assert attempts(recs) == [1]
    assert errors(recs) == [{"type": "declined", "message": "card 4000-0002 was declined"}]
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "failed"
    assert end["error"]["type"] == "declined", end


def test_a_timeout_under_the_same_retry_is_retried(project: Path) -> None:
    proc, recs = run_chain(project, """
steps:
  - shop.slow: {succeed_on: 3}
    timeout: 200ms
    retry: {attempts: 5, delay: 10ms, on: [timeout]}
  - shop.poll: {succeed_on: 2}
    retry: {attempts: 5, delay: 10ms, on: [timeout]}
outputs: {slow: "{shop.slow.result}", poll: "{shop.poll.result}"}
""")
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"slow": 3, "poll": 2}
    assert attempts(recs, "1") == [1, 2, 3] and [e["type"] for e in errors(recs, "1")[:2]] == ["timeout", "timeout"]
    # a tool's own timeout (StepError("timeout", ...)) is a timeout to retry.on as well
    assert attempts(recs, "2") == [1, 2] and errors(recs, "2")[0] == {"type": "timeout", "message": "no answer (attempt 1)"}


def test_on_names_the_types_retried_and_nothing_else(project: Path) -> None:
    """A tool_error is not retried under on: [declined]; a declined card is, and so is
    everything a tool raises when `on` is not given (as before)."""
    proc, recs = run_chain(project, """
steps:
  - shop.slow: {succeed_on: 2}
    timeout: 100ms
    retry: {attempts: 3, on: [declined]}
    on_error: continue
  - shop.charge: {card: "4000-0001"}
    retry: {attempts: 3, on: [declined, tool_error]}
    on_error: continue
  - shop.charge: {card: "4000-0001"}
    retry: {attempts: 2}
    on_error: continue
""")
    assert proc.returncode == 0, show(proc)
    assert attempts(recs, "1") == [1] and errors(recs, "1")[0]["type"] == "timeout"
    assert attempts(recs, "2") == [1, 2, 3]
    assert attempts(recs, "3") == [1, 2]


@pytest.mark.parametrize("kind, why", [("Not Valid", "is invalid: write lowercase letters"),
                                       ("limit", "is one of chainlang's own error types"),
                                       ("x" * 65, "is longer than 64 characters")])
def test_a_step_error_type_that_cannot_be_used_fails_the_step_saying_why(project: Path, kind: str, why: str) -> None:
    proc, recs = run_chain(project, f"""
steps:
  - shop.charge: {{card: "4000-0009", kind: "{kind}"}}
""")
    assert proc.returncode == 1, show(proc)
    (error,) = errors(recs)
    assert error["type"] == "tool_error"
    assert error["message"].startswith("the tool raised chainlang.StepError, but the type "), error
    assert why in error["message"] and "(its message: card 4000-0009 was declined)" in error["message"]


def test_step_error_is_exported_lightly() -> None:
    """`chainlang.StepError` is the leaf module's class; importing chainlang does not load it."""
    import subprocess
    import sys

    code = ("import sys, chainlang; assert 'chainlang.runtime.step_error' not in sys.modules; "
            "from chainlang.runtime.step_error import StepError; assert chainlang.StepError is StepError")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "StepError" in chainlang.__all__
    assert error_of_step_error(chainlang.StepError("declined", " two\n lines ")) == {"type": "declined",
                                                                                  "message": "two lines"}


# -- one rule for live runs and resumed ones


@pytest.mark.parametrize("card, retried", [("4000-0002", False), ("5000-0001", True)])
def test_a_resume_between_attempts_decides_as_the_live_run(project: Path, card: str, retried: bool) -> None:
    """The run is cut right after its first failed attempt (as a Ctrl-C in the wait before the
    next one leaves it), then resumed through the CLI: a declined card is not tried again,
    a timeout is."""
    chain = f"""
steps:
  - shop.charge: {{card: "{card}"}}
    retry: {{attempts: 3, delay: 10ms, on: [timeout]}}
  - shop.slow: {{succeed_on: 2}}
    timeout: 100ms
    retry: {{attempts: 3, delay: 10ms, on: [timeout]}}
outputs: {{slow: "{{shop.slow.result}}"}}
"""
    proc, live = run_chain(project, chain)
    assert proc.returncode == (0 if retried else 1), show(proc)
    if retried:  # the charge went through: cut in the wait after the slow step's first timeout
        path = "2"
        cut_after(project / "c.jsonl", lambda r: r["type"] == "step_finished" and r["step"] == "2")
    else:
        path = "1"
        cut_after(project / "c.jsonl", lambda r: r["type"] == "step_finished" and r["step"] == "1")
    before = len(read_records(project / "c.jsonl"))
    resumed = cli_here(project, "resume", "c.jsonl", "--json")
    assert resumed.returncode == proc.returncode, show(resumed)
    after = read_records(project / "c.jsonl")[before:]
    assert attempts(after, path) == ([2] if retried else [])
    assert attempts(live, path) == ([1, 2] if retried else [1])
    assert after[-1]["type"] == "run_finished" and after[-1]["status"] == live[-1]["status"]
    if not retried:
        assert after[-1]["error"]["type"] == "declined"


def test_the_one_rule_reads_on() -> None:
    declined, timeout = {"type": "declined"}, {"type": "timeout"}
    assert status.retryable(declined) and status.retryable(timeout)  # without on: a tool's every failure
    assert status.retryable(timeout, ("timeout",)) and not status.retryable(declined, ("timeout",))
    for kind in ("cancelled", "limit", "fail", "params", "chain"):  # never, whatever on says
        assert not status.retryable({"type": kind}, (kind,)), kind
    retry = Retry(node=None, attempts=3, on=("timeout",))  # type: ignore[arg-type]
    assert retry_policy.tries_again(retry, 1, timeout) and not retry_policy.tries_again(retry, 3, timeout)
    assert not retry_policy.tries_again(retry, 1, declined)
    assert retry_policy.tries_again(None, 1, timeout, most=2)  # a resume of a step whose retry was since removed


# -- jitter


def test_jitter_spreads_the_waits_within_bounds_and_the_same_on_every_ask() -> None:
    retry = Retry(node=None, attempts=6, delay=1.0, backoff=2.0, max_delay=5.0, jitter=True)  # type: ignore[arg-type]
    plain = Retry(node=None, attempts=6, delay=1.0, backoff=2.0, max_delay=5.0)  # type: ignore[arg-type]
    waits = {}
    for run_id in ("r1", "r2", "r3"):
        for attempt in range(1, 6):
            nominal = retry_policy.retry_delay(plain, attempt)
            wait = retry_policy.retry_delay(retry, attempt, run_id, "2.1")
            assert nominal / 2 <= wait <= nominal, (run_id, attempt, wait)
            assert wait == retry_policy.retry_delay(retry, attempt, run_id, "2.1")  # deterministic
            waits[run_id, attempt] = wait
    assert len(set(waits.values())) == len(waits)  # spread: no two runs or attempts wait alike
    assert retry_policy.retry_delay(retry, 1, "r1", "2.1") != retry_policy.retry_delay(retry, 1, "r1", "2.2")


def test_the_waits_of_a_resumed_run_are_the_live_run_s(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline's own waits, observed where it takes them: the resume of a run cut after
    its first attempt computes every wait as the live run did."""
    chain = project / "j.chain.yaml"
    chain.write_text("""
steps:
  - shop.poll: {succeed_on: 9}
    retry: {attempts: 4, delay: 20ms, backoff: 2, on: [timeout], jitter: true}
""", encoding="utf-8")
    taken: list[tuple[int, float]] = []
    real = step.retry_delay

    def observed(retry: Any, attempt: int, run_id: str = "", ipath: str = "") -> float:
        wait = real(retry, attempt, run_id, ipath)
        taken.append((attempt, wait))
        return wait

    monkeypatch.setattr(step, "retry_delay", observed)
    transcript = project / "j.jsonl"
    live = chainlang.run(chain, now=NOW, transcript=transcript)
    assert live.status == "failed" and attempts(read_records(transcript)) == [1, 2, 3, 4]
    live_waits = list(taken)
    assert [a for a, _ in live_waits] == [1, 2, 3]
    for attempt, wait in live_waits:
        nominal = 0.02 * 2 ** (attempt - 1)
        assert nominal / 2 <= wait <= nominal, live_waits
    assert len({w for _, w in live_waits}) == 3

    taken.clear()
    cut_after(transcript, lambda r: r["type"] == "step_finished")
    resumed = chainlang.resume(transcript)
    assert resumed.status == "failed" and resumed.run_id == live.run_id
    # the wait after attempt 1, the one interrupted, is computed again (only what is left of it
    # is waited: tests/test_retry_wait_resume.py), then the waits after attempts 2 and 3
    assert taken == live_waits


def test_a_retry_delay_and_a_timeout_may_last_a_year(project: Path) -> None:
    (project / "y.chain.yaml").write_text("""
limits: {timeout: 365d}
steps:
  - shop.charge: {card: "5000"}
    timeout: 52w
    retry: {attempts: 2, delay: 2w, max_delay: 52w}
  - shop.charge: {card: "5000"}
    timeout: 366d
  - shop.charge: {card: "5000"}
    retry: {attempts: 2, delay: 53w}
""", encoding="utf-8")
    proc = cli_here(project, "check", "y.chain.yaml")
    assert proc.returncode == 1, show(proc)
    assert proc.stdout.count("[CL019 bad-duration]") == 2, show(proc)
    assert "timeout: '366d' is out of range (more than 0, at most 365d)" in proc.stdout
    assert "retry delay: '53w' is out of range" in proc.stdout
    assert "y.chain.yaml:5" not in proc.stdout and "y.chain.yaml:6" not in proc.stdout  # 52w, 2w are fine
    plain = Retry(node=None, attempts=3, delay=14 * 86400.0)  # type: ignore[arg-type]
    assert retry_policy.retry_delay(plain, 1) == 14 * 86400.0  # a written delay is waited, even over an hour
    from chainlang.runtime.outcomes import seconds

    assert seconds(14 * 86400.0) == "1209600s" and seconds(0.2) == "0.2s"  # as a timeout's message says it
