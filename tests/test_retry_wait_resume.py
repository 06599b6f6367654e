"""`retry`'s wait between attempts is durable (LANGUAGE.md §2, issue 23): a run killed with
SIGKILL in the wait after a failed attempt, then resumed, waits only what is left of it,
measured from the failed attempt's end, and not at all once it has passed.

The tool is the both-engine retry case's `shop.poll` (tests/engines/retry_tools.py): it
fails with the error type `timeout` until the attempt it is told to succeed on. The same
mechanism serves a `repeat`'s delay: tests/test_repeat.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, records, records_so_far, show

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tests" / "engines" / "retry_tools.py"
TIMEOUT = 60

CHAIN = """\
    steps:
      - id: poll
        shop.poll: {succeed_on: 2}
        retry: {attempts: 3, delay: DELAY, on: [timeout]}
    outputs:
      polled: "{poll.result}"
    """


def at(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()


def attempt_record(recs: list[dict[str, Any]], kind: str, attempt: int) -> dict[str, Any]:
    found = [r for r in recs if r["type"] == kind and r.get("step") == "1" and r["attempt"] == attempt]
    assert len(found) == 1, (kind, attempt, found)
    return found[0]


def killed_in_the_wait(directory: Path, delay: str, spawned: Any) -> float:
    """Run the chain until its first attempt failed (the run is then in the wait before the
    second), kill it with SIGKILL; the `ts` of the failed attempt's end."""
    (directory / "main.chain.yaml").write_text(textwrap.dedent(CHAIN.replace("DELAY", delay)), encoding="utf-8")
    proc = spawned.start(directory, "run", "main.chain.yaml", "--tools", TOOLS, "--transcript", "run.jsonl")
    transcript = directory / "run.jsonl"
    deadline = time.monotonic() + TIMEOUT
    while not any(r["type"] == "step_finished" and r["step"] == "1" for r in records_so_far(transcript)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"the first attempt did not fail\nexit code {proc.returncode}\n--- stdout\n{out}\n"
                        f"--- stderr\n{err}")
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    recs = records_so_far(transcript)
    failed = attempt_record(recs, "step_finished", 1)
    assert failed["status"] == "failed" and failed["error"]["type"] == "timeout"
    assert not [r for r in recs if r["type"] == "step_started" and r["attempt"] == 2]  # killed in the wait
    assert not any(r["type"] == "run_finished" for r in recs)
    return at(failed)


def resume(directory: Path) -> tuple[list[dict[str, Any]], float, float]:
    """Resume the run; its records, when the resumed run started and when attempt 2 did."""
    resumed = cli(directory, "resume", "run.jsonl", "--tools", TOOLS, "--json", timeout=TIMEOUT)
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"polled": 2}
    recs = records(directory / "run.jsonl")
    assert [r["attempt"] for r in recs if r["type"] == "step_started"] == [1, 2]  # one attempt each side
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"
    resumed_at = at([r for r in recs if r["type"] == "run_started"][-1])
    return recs, resumed_at, at(attempt_record(recs, "step_started", 2))


@pytest.mark.slow
def test_a_retry_wait_cut_by_a_kill_waits_only_what_is_left_of_it_on_resume(tmp_path: Path, spawned: Any) -> None:
    ended = killed_in_the_wait(tmp_path, "6s", spawned)
    while time.time() < ended + 3:  # half of the wait passes while no process runs the chain
        time.sleep(0.05)
    recs, resumed_at, second = resume(tmp_path)
    assert second >= ended + 6 - 0.01  # the wait is durable: all of it passed before attempt 2
    assert second < resumed_at + 6  # and the resumed run did not start it over
    # nothing new is recorded for the wait: the failed attempt's end is when it began
    assert {r["type"] for r in recs} == {"run_started", "step_started", "step_finished", "run_finished"}


@pytest.mark.slow
def test_a_retry_wait_that_passed_while_the_run_was_down_is_not_waited_again(tmp_path: Path, spawned: Any) -> None:
    ended = killed_in_the_wait(tmp_path, "2s", spawned)
    while time.time() < ended + 2.2:  # the whole wait passes while no process runs the chain
        time.sleep(0.05)
    _, resumed_at, second = resume(tmp_path)
    assert second < resumed_at + 2  # at once: a resumed run that waited the 2 s again would be later


def test_what_is_left_of_a_wait_is_measured_from_its_recorded_start() -> None:
    from chainlang.runtime.durable_wait import time_left

    def stamp(seconds_ago: float) -> str:
        moment = datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    assert time_left(6.0, None) == 6.0  # its start is not known: all of it
    assert time_left(6.0, stamp(10)) == 0.0  # passed while the run was down
    assert time_left(3600.0, stamp(-60)) == 3600.0  # a start in the future (a clock set back): all of it
    left = time_left(3 * 3600.0, stamp(3600))  # an hour of a three-hour wait has passed
    assert 2 * 3600 - 5 < left <= 2 * 3600
