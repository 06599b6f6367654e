"""The loop watchdog (chainlang.runtime.watchdog) and quick sync tools called inline
(chainlang.runtime.inline), end to end through `chainlang run`.

Tool code that holds the event loop (an async tool that never awaits, a sync tool called
inline) is interrupted at its step's timeout and at the run's `limits.timeout`: the run
ends on time. A sync tool goes inline only after PROVEN quick calls in worker threads, and
never when declared `blocking=True`. The tools are in tests/run/watchdog_tools.py; every
command has a bounded wait, so a run that does not end fails its test instead of hanging
the suite.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import clean_env, cli, records, show

pytestmark = pytest.mark.slow  # each test waits for a timeout of half a second or more

TOOLS = Path(__file__).resolve().parent / "run" / "watchdog_tools.py"
TIMEOUT = 40  # seconds for any one command; the tools would hang for an hour


def run(tmp_path: Path, chain: str, *extra: str, inline_ms: str = "5000") -> tuple[Any, list[dict[str, Any]]]:
    """`chainlang run` of `chain`; a sync tool's call counts as quick under `inline_ms` (so
    that how loaded the machine is does not decide which calls go inline)."""
    (tmp_path / "main.chain.yaml").write_text(textwrap.dedent(chain), encoding="utf-8")
    proc = cli(tmp_path, "run", "main.chain.yaml", "--tools", str(TOOLS), "--transcript", "run.jsonl", *extra,
               timeout=TIMEOUT, env=clean_env(CHAINLANG_INLINE_MS=inline_ms))
    return proc, records(tmp_path / "run.jsonl")


def finished(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == "step_finished"]


@pytest.mark.parametrize("tool", ["wd.sleepy", "wd.spin"])
def test_an_async_tool_that_holds_the_loop_ends_at_its_step_timeout(tmp_path: Path, tool: str) -> None:
    proc, recs = run(tmp_path, f"""\
        steps:
          - {{event: {tool}, timeout: 500ms}}
          - {{event: wd.mostly, params: {{n: 1}}}}
        """)
    assert proc.returncode == 1, show(proc)
    [step] = finished(recs)  # the run stopped at the failed step
    assert step["status"] == "failed" and step["error"]["type"] == "timeout", step
    assert step["error"]["message"] == (f"{tool} took longer than its timeout (0.5s); "
                                        "it kept the event loop busy and was interrupted"), step
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "failed", recs[-1]


@pytest.mark.parametrize("tool", ["wd.sleepy", "wd.spin"])
def test_an_async_tool_that_holds_the_loop_ends_at_the_run_timeout(tmp_path: Path, tool: str) -> None:
    proc, recs = run(tmp_path, f"""\
        limits: {{timeout: 1s}}
        steps:
          - {tool}
        """, "--progress", "quiet")
    assert proc.returncode == 3, show(proc)
    assert "limit timeout" in proc.stderr, proc.stderr
    [step] = finished(recs)
    assert step["status"] == "cancelled", step
    assert recs[-1]["status"] == "limit" and recs[-1]["error"]["limit"] == "timeout", recs[-1]


def test_a_quick_sync_tool_goes_inline_and_a_hang_there_ends_at_its_timeout(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - foreach: [1, 2, 3, 4, 5, 6, 7]
            as: n
            max_parallel: 1
            steps:
              - {event: wd.mostly, params: {n: "{n}", hang: 5}, timeout: 500ms, on_error: continue}
        """)
    assert proc.returncode == 0, show(proc)
    steps = finished(recs)
    assert [s["status"] for s in steps] == ["ok", "ok", "ok", "ok", "failed", "ok", "ok"], steps
    threads = [s["result"]["thread"] for s in steps if s["status"] == "ok"]
    # three quick calls in worker threads prove it quick; then it runs on the loop's (main) thread
    assert threads[:3] == ["chainlang-tool"] * 3 and threads[3] == "MainThread", threads
    assert steps[4]["error"]["type"] == "timeout", steps[4]
    assert "kept the event loop busy and was interrupted" in steps[4]["error"]["message"], steps[4]
    # the interrupted call sent it back to worker threads
    assert threads[4:] == ["chainlang-tool", "chainlang-tool"], threads
    # ctx.progress from the inline call is recorded as from a thread
    progress = [r for r in recs if r["type"] == "step_progress"]
    assert len(progress) == 6 and {p["fraction"] for p in progress} == {0.5}, progress


def test_a_blocking_sync_tool_never_goes_inline(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - foreach: [1, 2, 3, 4, 5, 6]
            as: n
            max_parallel: 1
            steps:
              - {event: wd.mostly_blocking, params: {n: "{n}", hang: 5}, timeout: 500ms, on_error: continue}
        """)
    assert proc.returncode == 0, show(proc)
    steps = finished(recs)
    assert {s["result"]["thread"] for s in steps if s["status"] == "ok"} == {"chainlang-tool"}, steps
    assert [s["status"] for s in steps] == ["ok", "ok", "ok", "ok", "failed", "ok"], steps
    assert steps[4]["error"]["abandoned"] is True, steps[4]  # its thread was left running, as before


def test_an_inline_sync_tool_may_run_an_event_loop_of_its_own(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - foreach: [1, 2, 3, 4, 5]
            as: n
            max_parallel: 1
            steps:
              - {event: wd.own_loop, params: {n: "{n}"}}
        """)
    assert proc.returncode == 0, show(proc)
    steps = finished(recs)
    assert [s["result"]["n"] for s in steps] == [2, 4, 6, 8, 10], steps
    assert [s["result"]["thread"] for s in steps][3:] == ["MainThread", "MainThread"], steps


def test_inline_calls_can_be_turned_off(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - foreach: [1, 2, 3, 4, 5]
            as: n
            max_parallel: 1
            steps:
              - {event: wd.mostly, params: {n: "{n}"}}
        """, inline_ms="0")
    assert proc.returncode == 0, show(proc)
    assert {s["result"]["thread"] for s in finished(recs)} == {"chainlang-tool"}, recs


def test_a_bad_inline_setting_is_said_and_the_default_used(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - {event: wd.mostly, params: {n: 1}}
        """, inline_ms="fast")
    assert proc.returncode == 0, show(proc)
    assert "CHAINLANG_INLINE_MS='fast' is not a number of milliseconds" in proc.stderr, proc.stderr
