"""Runs always end (issue 7): whatever a tool does, its step's timeout and the run's
`limits.timeout` fire, the run ends, and `chainlang run` exits.

The misbehaving tools are in tests/run/ends_tools.py: a `blocking=True` tool and a plain
sync tool that sleep for an hour, and an async tool that swallows every cancellation.
The end-to-end tests run the real command in a subprocess with a bounded wait: a run
that does not end fails its test (it never hangs the suite). The rest go through the
Python API, with tools that misbehave only for a second or two.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import chainlang
from tests import helpers
from tests.helpers import clean_env, command, records
from tests.helpers import output_text as _text

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tests" / "run" / "ends_tools.py"
RUN_TOOLS = REPO / "tests" / "run" / "run_tools.py"
TIMEOUT = 30  # seconds for any one command: a run that has not ended by then never will
PROMPT = 15  # seconds: a run whose timeouts fire within 1-2 s has ended well before this (the tools sleep 1 h)

FOREVER_TOOLS = ["ends.blocking", "ends.sync", "ends.deaf"]


# -- helpers ------------------------------------------------------------------------------


def show(code: int | None, out: str, err: str) -> str:
    return f"exit code {code}\n--- stdout\n{out}\n--- stderr\n{err}"


def cli(cwd: Path, *args: str | os.PathLike[str]) -> tuple["subprocess.CompletedProcess[str]", float]:
    """Run `chainlang ARGS` in `cwd`; the process and how long it took. Fails the test
    when it has not ended within TIMEOUT."""
    start = time.monotonic()
    proc = helpers.cli(cwd, *args, timeout=TIMEOUT)
    return proc, time.monotonic() - start


def write_chain(directory: Path, text: str, name: str = "main.chain.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def finished(recs: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == "step_finished" and r["step"] == step]


def calls_log(project: Path) -> list[dict[str, Any]]:
    path = project / ".chainlang" / "state" / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


# -- end to end: the timeouts fire and the process exits ------------------------------------


@pytest.mark.parametrize("tool", FOREVER_TOOLS)
def test_step_timeout_fires_and_the_process_exits(tmp_path: Path, tool: str) -> None:
    chain = write_chain(tmp_path, f"""\
        steps:
          - {{event: {tool}, timeout: 500ms}}
        """)
    proc, took = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl")
    assert proc.returncode == 1, show(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert took < PROMPT, f"the run took {took:.1f} s"
    recs = records(tmp_path / "run.jsonl")
    [step] = finished(recs, "1")
    assert step["status"] == "failed" and step["error"]["type"] == "timeout", step
    assert step["error"]["abandoned"] is True, step
    assert "took longer than its timeout (0.5s)" in step["error"]["message"]
    assert "abandoned" in step["error"]["message"]
    if tool == "ends.deaf":
        assert "ignored its cancellation" in step["error"]["message"]
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "failed", recs[-1]


@pytest.mark.parametrize("tool", FOREVER_TOOLS)
def test_run_timeout_fires_and_the_process_exits(tmp_path: Path, tool: str) -> None:
    chain = write_chain(tmp_path, f"""\
        limits: {{timeout: 1s}}
        steps:
          - {tool}
        """)
    proc, took = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl", "--progress", "quiet")
    assert proc.returncode == 3, show(proc.returncode, proc.stdout, proc.stderr)
    assert "limit timeout" in proc.stderr, proc.stderr
    assert took < PROMPT, f"the run took {took:.1f} s"
    recs = records(tmp_path / "run.jsonl")
    [step] = finished(recs, "1")
    assert step["status"] == "cancelled" and step["error"]["type"] == "cancelled", step
    assert step["error"]["abandoned"] is True and "abandoned" in step["error"]["message"], step
    last = recs[-1]
    assert last["type"] == "run_finished" and last["status"] == "limit", last
    assert last["error"]["limit"] == "timeout", last


def test_a_timed_out_sync_tool_is_retried_and_the_run_goes_on(tmp_path: Path) -> None:
    # attempt 1 sleeps forever (its thread is abandoned); attempt 2 finds its marker and returns
    chain = write_chain(tmp_path, """\
        steps:
          - {event: ends.sync, timeout: 300ms, retry: {attempts: 2, delay: 10ms}}
          - {event: ends.blocking, timeout: 300ms, on_error: continue}
          - ends.threaded
        outputs:
          first: "{ends.sync.result}"
          thread: "{ends.threaded.thread}"
        """)
    proc, took = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl", "--json")
    assert proc.returncode == 0, show(proc.returncode, proc.stdout, proc.stderr)
    assert took < PROMPT, f"the run took {took:.1f} s"
    assert json.loads(proc.stdout) == {"first": "resumed", "thread": "chainlang-tool"}
    assert "hello from a thread" in proc.stderr
    recs = records(tmp_path / "run.jsonl")
    assert [(r["status"], (r["error"] or {}).get("type")) for r in finished(recs, "1")] == [
        ("failed", "timeout"), ("ok", None)]
    assert [(r["status"], r["error"]["type"]) for r in finished(recs, "2")] == [("failed", "timeout")]
    assert recs[-1]["status"] == "ok"


def test_the_process_exits_whatever_a_tool_left_running(tmp_path: Path) -> None:
    # a thread of the loop's default executor that never returns; a task that ignores cancellation
    chain = write_chain(tmp_path, """\
        steps:
          - {event: ends.offload, timeout: 300ms, on_error: continue}
          - ends.spawn
        outputs:
          spawned: "{ends.spawn.result}"
        """)
    proc, took = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl", "--json")
    assert proc.returncode == 0, show(proc.returncode, proc.stdout, proc.stderr)
    assert took < PROMPT, f"the run took {took:.1f} s"
    assert json.loads(proc.stdout) == {"spawned": "spawned"}
    recs = records(tmp_path / "run.jsonl")
    assert [(r["status"], r["error"]["type"]) for r in finished(recs, "1")] == [("failed", "timeout")]
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


def test_the_api_returns_whatever_a_tool_left_running(tmp_path: Path) -> None:
    # chainlang.run() returns (the process itself may then wait for the to_thread thread at exit)
    chain = write_chain(tmp_path, """\
        steps:
          - {event: ends.offload, timeout: 300ms, on_error: continue}
          - ends.spawn
          - {event: ends.deaf, timeout: 300ms, on_error: continue}
        """)
    script = ("import os, sys, chainlang\n"
              f"r = chainlang.run({str(chain)!r}, tools=[{str(TOOLS)!r}], transcript={str(tmp_path / 'run.jsonl')!r})\n"
              "print(r.status, flush=True)\n"
              "os._exit(0)\n")
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True,
                              text=True, timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"chainlang.run did not return within {TIMEOUT} s\n"
                    + show(None, _text(exc.stdout), _text(exc.stderr)))
    assert proc.stdout == "ok\n", show(proc.returncode, proc.stdout, proc.stderr)
    assert time.monotonic() - start < PROMPT


# -- end to end: interrupted while a tool misbehaves, then resumed ---------------------------


def start_until(spawned: list["subprocess.Popen[str]"], chain: Path, marker: Path) -> "subprocess.Popen[str]":
    """Start `chainlang run CHAIN` in the background; return once `marker` exists."""
    proc = subprocess.Popen(command("run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl"),
                            cwd=chain.parent, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", start_new_session=True)
    spawned.append(proc)
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"{marker.name} did not appear\n" + show(proc.returncode, out, err))
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("tool", ["ends.sync", "ends.deaf"])
def test_interrupted_while_a_tool_misbehaves_then_resumed(tmp_path: Path, spawned: list["subprocess.Popen[str]"],
                                                          tool: str) -> None:
    # step 1 times out (abandoned) and the run goes on; step 2 is under way when Ctrl-C comes
    chain = write_chain(tmp_path, f"""\
        steps:
          - {{event: ends.sync, params: {{name: one.pid}}, timeout: 300ms, on_error: continue}}
          - {{event: {tool}, params: {{name: two.pid}}}}
        outputs:
          second: "{{{tool}.result}}"
        """)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "two.pid")
    time.sleep(0.2)  # the tool is asleep (or awaiting): a sync one in its thread
    start = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"the run did not end within {TIMEOUT} s of Ctrl-C\n" + show(None, out, err))
    assert time.monotonic() - start < PROMPT
    assert proc.returncode == 130, show(proc.returncode, out, err)
    assert "chainlang resume run.jsonl" in err and "Traceback" not in err, err
    recs = records(tmp_path / "run.jsonl")
    assert [(r["status"], r["error"]["type"]) for r in finished(recs, "1")] == [("failed", "timeout")]
    [second] = finished(recs, "2")
    assert second["status"] == "cancelled" and second["error"]["abandoned"] is True, second
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "interrupted"

    resumed, took = cli(tmp_path, "resume", "run.jsonl", "--tools", TOOLS, "--json")
    assert resumed.returncode == 0, show(resumed.returncode, resumed.stdout, resumed.stderr)
    assert took < PROMPT
    assert json.loads(resumed.stdout) == {"second": "resumed"}
    steps = [c["step"] for c in calls_log(tmp_path) if "marker" in c]
    assert steps == ["1", "2", "2"]  # the step that timed out is finished: not run again
    recs = records(tmp_path / "run.jsonl")
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


# -- through the API: what the records say, ctx from a thread, the grace period ------------


def run(tmp_path: Path, text: str) -> tuple[chainlang.RunResult, list[dict[str, Any]]]:
    """`chainlang.run` the chain, in a daemon thread: a run that has not ended within
    TIMEOUT fails the test (and is left behind; it cannot keep the process alive)."""
    path = write_chain(tmp_path, text, "t.chain.yaml")
    outcome: list[Any] = []

    def body() -> None:
        try:
            outcome.append(chainlang.run(path, {}, tools=[str(TOOLS), str(RUN_TOOLS)],
                                         transcript=tmp_path / "run.jsonl"))
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=body, name="test-run", daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    if not outcome:
        pytest.fail(f"the run did not end within {TIMEOUT} s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0], records(tmp_path / "run.jsonl")


def test_sync_tools_run_in_worker_threads_and_ctx_works_from_there(tmp_path: Path) -> None:
    result, recs = run(tmp_path, """\
        steps:
          - ends.threaded
          - test.now
        outputs:
          thread: "{ends.threaded.thread}"
        """)
    assert result.status == "ok", result.error
    assert result.outputs == {"thread": "chainlang-tool"}  # a worker thread, not the run's
    kinds = [(r["type"], r.get("step")) for r in recs if r["type"] != "run_started"]
    assert kinds == [("step_started", "1"), ("step_progress", "1"), ("clock", "1"), ("step_finished", "1"),
                     ("step_started", "2"), ("clock", "2"), ("clock", "2"), ("step_finished", "2"),
                     ("run_finished", None)]


def test_an_abandoned_sync_tool_records_nothing_after_its_step(tmp_path: Path) -> None:
    result, recs = run(tmp_path, """\
        steps:
          - {event: ends.late, params: {seconds: 0.6}, timeout: 100ms, on_error: continue}
          - test.sleep: {seconds: 1.2}
        """)
    assert result.status == "ok", result.error
    [first] = finished(recs, "1")
    assert first["error"]["type"] == "timeout" and first["error"]["abandoned"] is True
    assert not [r for r in recs if r["type"] in ("step_progress", "clock")], recs
    assert [c.get("now") for c in calls_log(tmp_path) if c["event"] == "ends.late"] == ["CallAbandoned"]


def test_the_ctx_of_a_sync_tool_does_nothing_once_its_step_is_over(tmp_path: Path) -> None:
    result, recs = run(tmp_path, """\
        steps:
          - ends.leak: {after: 0.3}
          - test.sleep: {seconds: 0.9}
        """)
    assert result.status == "ok", result.error
    assert not [r for r in recs if r["type"] in ("step_progress", "clock")], recs
    assert [c.get("now") for c in calls_log(tmp_path) if c["event"] == "ends.leak"] == ["CallAbandoned"]


def test_an_async_tool_that_cleans_up_in_time_is_not_abandoned(tmp_path: Path) -> None:
    # not a regression test: the grace period must not cut short a tool that stops as asked
    result, recs = run(tmp_path, """\
        steps:
          - {event: ends.slow_cleanup, params: {cleanup: 0.2}, timeout: 200ms}
        """)
    assert result.status == "failed"
    [step] = finished(recs, "1")
    assert step["error"] == {"type": "timeout", "message": "ends.slow_cleanup took longer than its timeout (0.2s)"}
    assert [c.get("cleaned_up") for c in calls_log(tmp_path)] == [True]


def test_cleaning_up_on_the_event_loop_within_the_grace_period_is_not_interrupted(tmp_path: Path) -> None:
    # regression (CI of stop 39): once the step's deadline had passed, the loop watchdog
    # interrupted whatever the cancelled tool did between two awaits, as holding the loop
    # past that deadline; the tool has its grace period (GRACE) to end
    # through the CLI: the watchdog works where the loop runs in the main thread
    chain = write_chain(tmp_path, """\
        steps:
          - {event: ends.slow_cleanup, params: {cleanup: 0.3, hold: true}, timeout: 200ms}
        """)
    proc, _ = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl")
    assert proc.returncode == 1, show(proc.returncode, proc.stdout, proc.stderr)
    [step] = finished(records(tmp_path / "run.jsonl"), "1")
    assert step["error"] == {"type": "timeout", "message": "ends.slow_cleanup took longer than its timeout (0.2s)"}
    assert [c.get("cleaned_up") for c in calls_log(tmp_path)] == [True]


def test_cleaning_up_on_the_event_loop_past_the_grace_period_is_interrupted(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        steps:
          - {event: ends.slow_cleanup, params: {cleanup: 3600, hold: true}, timeout: 200ms}
        """)
    proc, took = cli(tmp_path, "run", chain.name, "--tools", TOOLS, "--transcript", "run.jsonl")
    assert proc.returncode == 1, show(proc.returncode, proc.stdout, proc.stderr)
    assert took < PROMPT, f"the run took {took:.1f} s"
    [step] = finished(records(tmp_path / "run.jsonl"), "1")
    assert step["error"] == {"type": "timeout", "message": "ends.slow_cleanup took longer than its timeout (0.2s); "
                             "it kept the event loop busy and was interrupted"}
    assert [c.get("cleaned_up") for c in calls_log(tmp_path)] == []


def test_an_async_tool_may_handle_its_own_timeouts(tmp_path: Path) -> None:
    # not a regression test: a cancellation the tool asked for itself starts no grace period
    result, recs = run(tmp_path, """\
        steps:
          - ends.own_timeout: {then: 1.3}
        outputs:
          result: "{ends.own_timeout.result}"
        """)
    assert result.status == "ok", result.error
    assert result.outputs == {"result": "done"}


def test_a_tool_that_swallows_the_run_timeout_and_returns_does_not_defeat_it(tmp_path: Path) -> None:
    result, recs = run(tmp_path, """\
        limits: {timeout: 300ms}
        steps:
          - ends.swallow_return
          - test.sleep: {seconds: 3}
          - test.sleep: {seconds: 3}
        """)
    # not defeated: the run ends `limit` and the sleeps after the swallowing step never finish
    # (the transcript says so; a stopwatch would measure the machine's load as well)
    assert result.status == "limit", result
    [step] = finished(recs, "1")
    assert step["status"] == "cancelled", step
    assert not finished(recs, "2") and not finished(recs, "3")


def test_a_sibling_that_ignores_cancellation_is_abandoned(tmp_path: Path) -> None:
    start = time.monotonic()
    result, recs = run(tmp_path, """\
        steps:
          - parallel:
              - ends.deaf
              - test.fail: {message: boom}
        """)
    assert time.monotonic() - start < PROMPT
    assert result.status == "failed" and result.error is not None and result.error["step"] == "1.2"
    [deaf] = finished(recs, "1.1")
    assert deaf["status"] == "cancelled" and deaf["error"]["abandoned"] is True
    assert "ends.deaf ignored its cancellation and was abandoned after 1s" in deaf["error"]["message"]


# -- the worker pool ----------------------------------------------------------------------


def test_worker_pool_queues_beyond_its_limit_and_abandoning_frees_a_worker() -> None:
    from chainlang.runtime import calls

    pool = calls.Workers(limit=1)
    release = threading.Event()
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def make(name: str, wait: bool) -> calls.Call:
            call = calls.Call(loop)
            call.func = lambda: (order.append(name), release.wait(5) if wait else None, name)[2]
            call.kwargs = {}
            return call

        stuck, queued, dropped = make("stuck", True), make("queued", False), make("dropped", False)
        for call in (stuck, queued, dropped):
            pool.submit(call)
        assert pool.abandon(dropped) is False  # still waiting for a worker: it never runs
        assert queued.wait(0.2) is None and order == ["stuck"]
        assert pool.abandon(stuck) is True  # left running; its worker no longer counts
        assert queued.future is not None
        assert await asyncio.wait_for(queued.future, 5) == "queued"
        assert pool.abandoned == 1
        release.set()

    asyncio.run(main())
    deadline = time.monotonic() + 5
    while pool.abandoned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.abandoned == 0 and order == ["stuck", "queued"]
