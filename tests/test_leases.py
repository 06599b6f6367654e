"""Leases that do not lie (issue 21): a firing whose lease ran out while its action still runs
(a clock jump, a process paused longer than the lease) is neither fired again nor recorded
as failed by another scheduler, as long as its transcript is held by a live process; the
process that ran it records its end, lease or not.

Two levels: the scheduler driven directly with a fake clock that jumps (the real seam:
`Scheduler.clock`), and two real `chainlang serve` processes on one store, one of them
stopped with SIGSTOP for longer than its lease and continued with SIGCONT. No test sleeps
and then counts: each waits for a condition, with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest

from chainlang.store import Store, StoreError, open_store
from chainlang.schedules import Schedule
from tests.hooks_util import labels, log, write, write_tools
from tests.serve_util import Servers, run, servers, show, wait_until  # noqa: F401  (servers: a fixture)
from tests.test_scheduler import HOURLY, T0, Clock, Fire, add, at, make, run_rows, settle, task


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with open_store(tmp_path) as opened:
        yield opened


# -- the scheduler, with a clock that jumps -------------------------------------------------


@pytest.mark.parametrize("jump", [timedelta(seconds=31), timedelta(hours=3)], ids=["past-the-lease", "hours"])
def test_a_clock_jump_past_the_lease_leaves_the_firing_to_the_process_that_runs_it(
        store: Store, tmp_path: Path, jump: timedelta) -> None:
    """A holds the firing's transcript while its action runs; the clock jumps past A's lease.
    B sees the task due and its lease run out, but the transcript is held by a live process:
    B neither fires it again nor takes the lease, and A's end is recorded as it ended."""
    clock = Clock(T0)
    first, second = Fire(), Fire()
    t = add(store, HOURLY)
    clock.set(T0 + timedelta(hours=1))
    a = make(store, tmp_path, clock, first, lease_seconds=30, max_failures=1)
    b = make(store, tmp_path, clock, second, lease_seconds=30, max_failures=1)

    async def body() -> None:
        first.gate, first.entered = asyncio.Event(), asyncio.Event()
        assert await a.tick() == 1
        await first.entered.wait()
        clock.move(seconds=jump.total_seconds())
        for _ in range(3):
            assert await b.tick() == 0
            b._resting.clear()  # looked at again at once: still held, still left alone
        held = await asyncio.to_thread(store.get_task, t.id)
        assert held is not None and held.lease_owner == a.owner  # not reclaimed
        first.gate.set()
        await settle(a, b)

    asyncio.run(body())
    assert second.calls == [], "a firing whose transcript is held was fired again"
    assert run_rows(store, t.id) == [(T0 + timedelta(hours=1), "ok")]
    after = task(store, t.id)
    assert (after.status, after.failures, after.lease_owner) == ("active", 0, None)  # not dead, not counted
    assert not [e for e in store.events(limit=1000) if e["kind"] == "lease_reclaimed"]


def test_the_process_that_ran_a_firing_records_its_end_after_losing_its_lease(store: Store) -> None:
    """w1's lease ran out while it ran; w2 took the lease, found the transcript held and gave
    the lease back: w1's end is recorded (once), not refused."""
    t = add(store, HOURLY)
    due = T0 + timedelta(hours=1)
    assert store.claim(t.id, "w1", due, 30) is not None
    store.start_run(t.id, "w1", "run-1", "runs/run-1.jsonl", due, due)
    assert store.claim(t.id, "w2", due + timedelta(seconds=31), 30) is not None
    assert store.release(t.id, "w2")
    after = store.finish_run(t.id, "w1", due, "ok", due + timedelta(seconds=40), next_run=due + timedelta(hours=1))
    assert (after.failures, after.lease_owner, at(after.next_run)) == (0, None, due + timedelta(hours=1))
    assert [(r.run_id, r.status) for r in store.runs(t.id)] == [("run-1", "ok")]
    (finished,) = [e for e in store.events(limit=1000) if e["kind"] == "run_finished"]
    assert finished["data"]["owner"] == "w1" and finished["data"]["lease_lost"] is True
    assert store.claim(t.id, "w1", due + timedelta(seconds=41), 30) is not None
    with pytest.raises(StoreError, match="already finished"):  # once
        store.finish_run(t.id, "w1", due, "ok", due + timedelta(seconds=42), next_run=None)


# -- two serves on one store, one paused longer than its lease ------------------------------------


def _project(root: Path) -> None:
    write_tools(root)
    write(root, "chainlang.toml", 'tools = ["hk_tools.py"]\n\n[serve]\nlease = "1s"\n')
    write(root, "later.chain.yaml", """\
        steps:
          - task.schedule:
              id: held-job
              type: delay
              interval: 1s
              action:
                - t.wait: {name: go, label: held}
                - t.log: {label: after}
    """)


def _task(root: Path) -> dict:  # type: ignore[type-arg]
    shown = run(root, "tasks", "show", "held-job", "--json")
    assert shown.returncode == 0, show(shown)
    return dict(json.loads(shown.stdout))


@pytest.mark.slow
def test_a_serve_paused_longer_than_its_lease_keeps_its_firing_and_records_it_once(
        tmp_path: Path, servers: Servers) -> None:
    _project(tmp_path)
    both = [servers.start(tmp_path), servers.start(tmp_path)]
    scheduled = run(tmp_path, "run", "later.chain.yaml")
    assert scheduled.returncode == 0, show(scheduled)
    wait_until("the firing's action runs", lambda: "held:start" in labels(tmp_path), within=15)
    pid = [e["pid"] for e in log(tmp_path) if e["label"] == "held"][0]
    (owner,) = [s for s in both if s.proc.pid == pid]
    (other,) = [s for s in both if s is not owner]
    os.kill(owner.proc.pid, signal.SIGSTOP)
    try:
        # longer than the lease: the other serve has seen the lease run out and the transcript held
        wait_until("the other serve saw the lease run out and left the firing alone",
                   lambda: "not taken over" in other.stderr, within=20, server=other)
        assert labels(tmp_path) == ["held:start"]  # not fired again
        (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    finally:
        os.kill(owner.proc.pid, signal.SIGCONT)
    wait_until("the task completed", lambda: _task(tmp_path)["status"] == "completed", within=20, server=owner)
    shown = _task(tmp_path)
    assert [r["status"] for r in shown["runs"]] == ["ok"] and shown["failures"] == 0, shown
    assert labels(tmp_path) == ["held:start", "held:end", "after"]  # its side effects ran once
    for server in both:
        assert server.stop() == 0, server.describe()
        assert "Traceback" not in server.stderr and "failed" not in server.stderr, server.describe()
    assert "holds the transcript" in other.stderr
