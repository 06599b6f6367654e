"""The scheduler of `chainlang serve` (chainlang.serve.scheduler), driven directly: a real
store under tmp_path, a fake clock the test moves, and an injected `fire` that records the
firings it gets and answers the status the test chooses. No test reads the real clock for
the schedule; the only real waiting is a firing that blocks on purpose (drain, run()).

`pytest-asyncio` is not installed: each test runs its coroutine with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.serve.scheduler import Firing, Scheduler
from chainlang.store import Store, TaskRecord, open_store
from chainlang.schedules import Schedule

REPO = Path(__file__).resolve().parent.parent
CET = timezone(timedelta(hours=1))
T0 = datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc)
ACTION = [{"user.notify": {"message": "hello"}}]


class Clock:
    """A clock that stands still until the test moves it."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def set(self, at: datetime) -> None:
        self.at = at

    def move(self, **delta: float) -> None:
        self.at += timedelta(**delta)


class Fire:
    """The injected `fire`: records each firing; answers `status` (or the next of
    `statuses`); blocks on `gate` when one is set."""

    def __init__(self, status: str = "ok") -> None:
        self.status = status
        self.statuses: list[str] = []
        self.calls: list[Firing] = []
        self.cancelled: list[Firing] = []
        self.gate: asyncio.Event | None = None
        self.entered: asyncio.Event | None = None

    async def __call__(self, firing: Firing) -> tuple[str, Any]:
        self.calls.append(firing)
        if self.entered is not None:
            self.entered.set()
        if self.gate is not None:
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled.append(firing)
                raise
        status = self.statuses.pop(0) if self.statuses else self.status
        return status, (None if status == "ok" else {"type": "tool", "message": f"it {status}"})

    @property
    def due(self) -> list[datetime]:
        return [datetime.fromisoformat(f.run.due_at) for f in self.calls]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path) as opened:
        yield opened


def make(store: Store, tmp_path: Path, clock: Clock, fire: Fire | None = None, **options: Any) -> Scheduler:
    return Scheduler(store, clock, fire or Fire(), tmp_path / ".chainlang" / "runs", **options)


def add(store: Store, timing: Schedule, misfire: str = "once", id: str | None = None,
        schedule: dict[str, Any] | None = None) -> TaskRecord:
    """A task as task.schedule stores it."""
    given = schedule or {"type": timing.kind}
    definition = {"schedule": given, "misfire": misfire, "action": ACTION, "captured": {},
                  "timing": timing.to_json()}
    return store.add_task("schedule", definition, id=id, next_run=timing.first)


async def settle(*schedulers: Scheduler) -> None:
    """Wait until the firings the schedulers started have ended."""
    for s in schedulers:
        while s.running:
            await asyncio.gather(*list(s.running.values()), return_exceptions=True)


async def atick(*schedulers: Scheduler) -> int:
    started = sum(await asyncio.gather(*(s.tick() for s in schedulers)))
    await settle(*schedulers)
    return started


def tick(*schedulers: Scheduler) -> int:
    """One tick of each scheduler at the same moment (concurrently), their firings run to
    the end; how many firings started."""
    return asyncio.run(atick(*schedulers))


def at(moment: str | None) -> datetime | None:
    return None if moment is None else datetime.fromisoformat(moment)


def task(store: Store, id: str) -> TaskRecord:
    found = store.get_task(id)
    assert found is not None
    return found


def run_rows(store: Store, id: str) -> list[tuple[datetime, str]]:
    return [(datetime.fromisoformat(r.due_at), r.status) for r in store.runs(id)]


# -- when a task fires -------------------------------------------------------------------


def test_a_once_task_fires_once_at_its_moment_not_before(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    s = make(store, tmp_path, clock, fire)
    t = add(store, Schedule("once", T0 + timedelta(hours=2)))
    clock.move(hours=1, minutes=59, seconds=59)
    assert tick(s) == 0 and fire.calls == []
    clock.move(seconds=1)
    assert tick(s) == 1
    (firing,) = fire.calls
    assert firing.task.id == t.id and not firing.resumed and firing.run.run_id
    assert at(firing.run.due_at) == T0 + timedelta(hours=2)
    assert Path(firing.run.transcript).parent == tmp_path / ".chainlang" / "runs"
    done = task(store, t.id)
    assert (done.status, done.next_run, at(done.last_run), done.failures) == \
        ("completed", None, T0 + timedelta(hours=2), 0)
    assert done.lease_owner is None
    assert run_rows(store, t.id) == [(T0 + timedelta(hours=2), "ok")]
    clock.move(days=3)
    assert tick(s) == 0 and len(fire.calls) == 1


def test_late_ms_is_how_late_the_firing_started(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    add(store, Schedule("once", T0 - timedelta(seconds=2.5)))
    assert tick(make(store, tmp_path, clock, fire)) == 1
    assert fire.calls[0].late_ms == pytest.approx(2500.0)


def test_a_repeat_by_interval_moves_its_next_run(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    s = make(store, tmp_path, clock, fire)
    t = add(store, Schedule("repeat", T0 + timedelta(hours=1), every=timedelta(hours=1)))
    for n in range(1, 4):
        clock.set(T0 + timedelta(hours=n))
        assert tick(s) == 1
        assert at(task(store, t.id).next_run) == T0 + timedelta(hours=n + 1)
        assert tick(s) == 0  # the same moment again: nothing more is due
    assert fire.due == [T0 + timedelta(hours=n) for n in (1, 2, 3)]
    assert task(store, t.id).status == "active"


def test_a_repeat_by_cron_moves_its_next_run_in_the_clock_zone(store: Store, tmp_path: Path) -> None:
    # 08:00 every weekday, read in the zone of the clock that scheduled it (CET), although
    # the store keeps moments in UTC
    start = datetime(2026, 11, 20, 7, 0, tzinfo=CET)  # a Friday
    clock, fire = Clock(start), Fire()
    first = datetime(2026, 11, 20, 8, 0, tzinfo=CET)
    t = add(store, Schedule("repeat", first, cron="0 8 * * 1-5"))
    s = make(store, tmp_path, clock, fire)
    clock.set(first)
    assert tick(s) == 1
    monday = datetime(2026, 11, 23, 8, 0, tzinfo=CET)
    assert at(task(store, t.id).next_run) == monday
    clock.set(monday + timedelta(seconds=5))
    assert tick(s) == 1
    assert at(task(store, t.id).next_run) == monday + timedelta(days=1)
    assert fire.due == [first, monday]


def test_a_delay_task_fires_once(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("delay", T0 + timedelta(minutes=30)), schedule={"type": "delay", "interval": "30m"})
    s = make(store, tmp_path, clock, fire)
    assert tick(s) == 0
    clock.move(minutes=30)
    assert tick(s) == 1
    clock.move(minutes=30)
    assert tick(s) == 0
    assert task(store, t.id).status == "completed" and len(fire.calls) == 1


def test_a_cancelled_task_does_not_fire(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("repeat", T0 + timedelta(minutes=1), every=timedelta(minutes=1)))
    store.cancel_task(t.id)
    clock.move(minutes=5)
    assert tick(make(store, tmp_path, clock, fire)) == 0
    assert fire.calls == [] and store.runs(t.id) == [] and task(store, t.id).status == "archived"


def test_a_task_cancelled_while_it_fires_stays_archived(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("repeat", T0, every=timedelta(minutes=1)))
    s = make(store, tmp_path, clock, fire)

    async def body() -> None:
        fire.gate, fire.entered = asyncio.Event(), asyncio.Event()
        await s.tick()
        await fire.entered.wait()
        await asyncio.to_thread(store.cancel_task, t.id)
        fire.gate.set()
        await settle(s)

    asyncio.run(body())
    after = task(store, t.id)
    assert after.status == "archived" and after.lease_owner is None
    assert run_rows(store, t.id) == [(T0, "ok")]
    clock.move(minutes=5)
    assert tick(s) == 0


# -- misfires -------------------------------------------------------------------------------


HOURLY = Schedule("repeat", T0 + timedelta(hours=1), every=timedelta(hours=1))
PAUSE = T0 + timedelta(hours=5, minutes=30)  # the firings of 1h..5h were missed


def test_misfire_skip_fires_none_and_moves_past(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(PAUSE), Fire()
    t = add(store, HOURLY, misfire="skip")
    s = make(store, tmp_path, clock, fire)
    assert tick(s) <= 1 and fire.calls == []
    after = task(store, t.id)
    assert (after.status, at(after.next_run), after.lease_owner) == ("active", T0 + timedelta(hours=6), None)
    assert store.runs(t.id) == []
    clock.set(T0 + timedelta(hours=6))
    assert tick(s) == 1 and fire.due == [T0 + timedelta(hours=6)]


def test_misfire_skip_of_a_once_task_completes_it(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0 + timedelta(hours=3)), Fire()
    t = add(store, Schedule("once", T0 + timedelta(hours=1)), misfire="skip")
    tick(make(store, tmp_path, clock, fire))
    assert fire.calls == [] and task(store, t.id).status == "completed"


def test_misfire_once_fires_the_latest_missed(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(PAUSE), Fire()
    t = add(store, HOURLY, misfire="once")
    s = make(store, tmp_path, clock, fire)
    assert tick(s) == 1
    assert fire.due == [T0 + timedelta(hours=5)]
    assert fire.calls[0].late_ms == pytest.approx(30 * 60 * 1000)
    assert at(task(store, t.id).next_run) == T0 + timedelta(hours=6)
    assert tick(s) == 0
    assert run_rows(store, t.id) == [(T0 + timedelta(hours=5), "ok")]


def test_misfire_all_fires_each_missed_one_over_successive_ticks(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(PAUSE), Fire()
    t = add(store, HOURLY, misfire="all")
    s = make(store, tmp_path, clock, fire)
    for _ in range(5):
        assert tick(s) == 1
    assert tick(s) == 0
    missed = [T0 + timedelta(hours=n) for n in range(1, 6)]
    assert fire.due == missed
    assert [round(f.late_ms) for f in fire.calls] == [round((PAUSE - m).total_seconds() * 1000) for m in missed]
    assert run_rows(store, t.id) == [(m, "ok") for m in missed]
    assert at(task(store, t.id).next_run) == T0 + timedelta(hours=6)


def test_misfire_all_is_bounded_by_max_catch_up(store: Store, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import chainlang.schedules as when

    monkeypatch.setattr(when, "MAX_CATCH_UP", 3)
    clock, fire = Clock(PAUSE), Fire()
    add(store, HOURLY, misfire="all")
    s = make(store, tmp_path, clock, fire)
    while tick(s):
        assert len(fire.calls) < 10
    assert fire.due == [T0 + timedelta(hours=n) for n in (3, 4, 5)]  # the latest ones


def test_a_long_pause_of_a_fast_repeat_is_planned_quickly(store: Store, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat every second, and serve stopped for a year: deciding what to fire must
    not walk through the 31 million missed firings (on the event loop). The moments the
    schedule is asked about are counted, not timed."""
    from chainlang.schedules import MAX_CATCH_UP

    every_second = Schedule("repeat", T0 + timedelta(seconds=1), every=timedelta(seconds=1))
    year = T0 + timedelta(days=365, milliseconds=500)
    looked: list[datetime] = []
    at_or_before, after = Schedule.at_or_before, Schedule.after
    monkeypatch.setattr(Schedule, "at_or_before", lambda self, moment: looked.append(moment) or at_or_before(self, moment))
    monkeypatch.setattr(Schedule, "after", lambda self, moment: looked.append(moment) or after(self, moment))
    for misfire in ("skip", "once", "all"):
        clock, fire = Clock(year), Fire()
        t = add(store, every_second, misfire=misfire)
        s = make(store, tmp_path, clock, fire)
        looked.clear()
        tick(s)
        # a few looks per firing owed (at most MAX_CATCH_UP, for `all`); a walk would look at 31 million
        assert len(looked) <= 2 * MAX_CATCH_UP + 10, (misfire, len(looked))
        expected = {"skip": [], "once": [year - timedelta(milliseconds=500)],
                    "all": [year - timedelta(milliseconds=500, seconds=999)]}[misfire]
        assert fire.due == expected, misfire
        store.cancel_task(t.id)


def test_a_firing_late_by_less_than_grace_is_not_a_misfire(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0 + timedelta(hours=1, seconds=59)), Fire()
    t = add(store, HOURLY, misfire="skip")
    s = make(store, tmp_path, clock, fire, grace=timedelta(seconds=60))
    assert tick(s) == 1
    assert fire.due == [T0 + timedelta(hours=1)] and fire.calls[0].late_ms == pytest.approx(59_000)
    # late by more than grace: skipped
    clock.set(T0 + timedelta(hours=2, seconds=61))
    tick(s)
    assert len(fire.calls) == 1 and at(task(store, t.id).next_run) == T0 + timedelta(hours=3)


# -- failures and dead letters -------------------------------------------------------------


def fail_series(store: Store, tmp_path: Path, statuses: list[str], **options: Any) -> tuple[TaskRecord, Fire]:
    clock, fire = Clock(T0), Fire()
    fire.statuses = list(statuses)
    t = add(store, Schedule("repeat", T0 + timedelta(minutes=1), every=timedelta(minutes=1)))
    s = make(store, tmp_path, clock, fire, **options)
    for n in range(1, len(statuses) + 1):
        clock.set(T0 + timedelta(minutes=n))
        tick(s)
    return task(store, t.id), fire


def test_three_failures_in_a_row_make_the_task_dead(store: Store, tmp_path: Path) -> None:
    dead, fire = fail_series(store, tmp_path, ["failed", "failed", "failed"])
    assert (dead.status, dead.failures, dead.lease_owner) == ("dead", 3, None)
    assert [r.status for r in store.runs(dead.id)] == ["failed"] * 3
    assert store.runs(dead.id)[-1].error == {"type": "tool", "message": "it failed"}
    clock = Clock(T0 + timedelta(hours=1))
    again = Fire()
    s = make(store, tmp_path, clock, again)
    assert tick(s) == 0 and again.calls == []
    back = store.retry_task(dead.id)
    assert (back.status, back.failures) == ("active", 0)
    assert tick(s) == 1 and len(again.calls) == 1
    assert task(store, dead.id).status == "active"


def test_a_success_between_failures_resets_the_count(store: Store, tmp_path: Path) -> None:
    alive, _ = fail_series(store, tmp_path, ["failed", "failed", "ok", "failed", "failed"])
    assert (alive.status, alive.failures) == ("active", 2)


def test_any_status_but_ok_or_broken_counts_as_a_failure(store: Store, tmp_path: Path) -> None:
    alive, _ = fail_series(store, tmp_path, ["limit", "invalid", "broken"])
    assert (alive.status, alive.failures) == ("active", 0)


def test_max_failures_is_configurable(store: Store, tmp_path: Path) -> None:
    dead, _ = fail_series(store, tmp_path, ["failed"], max_failures=1)
    assert dead.status == "dead"
    alive, _ = fail_series(store, tmp_path, ["failed"] * 4, max_failures=5)
    assert (alive.status, alive.failures) == ("active", 4)


def test_a_failed_once_task_does_not_come_back(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire("failed")
    t = add(store, Schedule("once", T0))
    s = make(store, tmp_path, clock, fire)
    assert tick(s) == 1
    clock.move(hours=1)
    assert tick(s) == 0
    after = task(store, t.id)
    assert (after.status, after.failures) == ("completed", 1)


def test_a_fire_that_raises_is_a_failed_run_and_counts(store: Store, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Fire):
        async def __call__(self, firing: Firing) -> tuple[str, Any]:
            self.calls.append(firing)
            raise RuntimeError("engine bug")

    clock, fire = Clock(T0), Broken()
    t = add(store, Schedule("repeat", T0 + timedelta(minutes=1), every=timedelta(minutes=1)))
    s = make(store, tmp_path, clock, fire)
    with caplog.at_level("ERROR", logger="chainlang.serve"):
        for n in (1, 2, 3, 4):
            clock.set(T0 + timedelta(minutes=n))
            tick(s)
    assert len(fire.calls) == 3  # then dead
    after = task(store, t.id)
    assert (after.status, after.failures, after.lease_owner) == ("dead", 3, None)
    (first, *_) = store.runs(t.id)
    assert first.status == "failed" and first.error == {"type": "internal", "message": "RuntimeError: engine bug"}
    assert any("engine bug" in (r.exc_text or "") for r in caplog.records)


def test_a_schedule_whose_next_firing_cannot_be_computed_ends(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    bad = Schedule("repeat", T0, cron="not a cron")  # stored by hand: task.schedule checks cron
    t = add(store, bad)
    s = make(store, tmp_path, clock, fire)
    for _ in range(3):
        tick(s)
    assert len(fire.calls) == 1  # fired at its first moment; its next one cannot be computed
    after = task(store, t.id)
    assert (after.status, after.lease_owner, after.next_run) == ("completed", None, None)
    assert [r.status for r in store.runs(t.id)] == ["ok"]


def test_a_task_that_cannot_be_planned_is_released_and_left_alone_for_a_while(store: Store, tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    clock, fire = Clock(T0 + timedelta(days=1)), Fire()  # missed: planning evaluates the cron
    t = add(store, Schedule("repeat", T0, cron="not a cron"))
    s = make(store, tmp_path, clock, fire, rest_seconds=60)
    with caplog.at_level("ERROR", logger="chainlang.serve"):
        for _ in range(3):
            tick(s)
    assert fire.calls == [] and store.runs(t.id) == []
    after = task(store, t.id)
    assert (after.status, after.lease_owner) == ("active", None)
    assert len([r for r in caplog.records if "trying again in 60s" in r.getMessage()]) == 1


# -- two schedulers, leases, crashes --------------------------------------------------------


def test_two_schedulers_at_the_same_moment_fire_a_due_task_once(store: Store, tmp_path: Path) -> None:
    clock = Clock(T0)
    fires = [Fire(), Fire()]
    both = [make(store, tmp_path, clock, f) for f in fires]
    ids = [add(store, Schedule("repeat", T0 + timedelta(minutes=1), every=timedelta(minutes=1))).id
           for _ in range(5)]
    for n in range(1, 4):
        clock.set(T0 + timedelta(minutes=n))
        assert tick(*both) == 5
    fired = [(f.task.id, f.run.due_at) for fire in fires for f in fire.calls]
    assert len(fired) == len(set(fired)) == 15
    for id in ids:
        assert [due for due, _ in run_rows(store, id)] == [T0 + timedelta(minutes=n) for n in (1, 2, 3)]


CHILD = textwrap.dedent("""
    import asyncio, json, sys, time
    from datetime import datetime, timedelta
    from pathlib import Path
    from chainlang.serve.scheduler import Scheduler
    from chainlang.store import open_store

    root, start, count, out = Path(sys.argv[1]), datetime.fromisoformat(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

    class Clock:
        at = start
        def now(self):
            return self.at

    fired = []

    async def fire(firing):
        fired.append({"task": firing.task.id, "due_at": firing.run.due_at, "resumed": firing.resumed})
        await asyncio.sleep(0)
        return "ok", None

    async def main():
        clock = Clock()
        with open_store(root) as store:
            # a lease longer than the two fake clocks ever differ: a lease that runs out while
            # its firing runs is another test's matter
            s = Scheduler(store, clock, fire, root / "runs", lease_seconds=3600)
            go = root / "go"
            while not go.exists():
                time.sleep(0.002)
            for n in range(1, count + 1):
                clock.at = start + timedelta(minutes=n)
                await s.tick()
                while s.running:
                    await asyncio.gather(*list(s.running.values()), return_exceptions=True)
                await asyncio.sleep(0)
        Path(out).write_text(json.dumps(fired))

    asyncio.run(main())
""")


def test_two_processes_on_one_store_fire_each_due_moment_once(tmp_path: Path) -> None:
    """Two scheduler processes tick through the same fake moments against one store file:
    every moment of every task has one run, fired by one process, never resumed."""
    moments, tasks = 8, 3
    with open_store(tmp_path) as store:
        ids = [add(store, Schedule("repeat", T0 + timedelta(minutes=1), every=timedelta(minutes=1)), misfire="all").id
               for _ in range(tasks)]
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outs = [tmp_path / f"out{i}.json" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), T0.isoformat(), str(moments), str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for out in outs]
    time.sleep(0.3)  # both import and open the store, then start together
    (tmp_path / "go").write_text("go")
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    fired = [f for out in outs for f in json.loads(out.read_text())]
    last = T0 + timedelta(minutes=moments)
    with open_store(tmp_path) as store:
        for id in ids:  # no moment skipped: the runs are the first k moments, the task is due at the next
            rows = run_rows(store, id)
            assert [due for due, _ in rows] == [T0 + timedelta(minutes=n) for n in range(1, len(rows) + 1)]
            assert at(task(store, id).next_run) == T0 + timedelta(minutes=len(rows) + 1)
        # a process that lagged behind another in a task's series caught up one moment a tick (misfire:
        # all): what is left is fired now, at the last moment
        rest = Fire()
        s = make(store, tmp_path, Clock(last), rest)
        while tick(s):
            pass
        fired += [{"task": f.task.id, "due_at": f.run.due_at, "resumed": f.resumed} for f in rest.calls]
        for id in ids:
            rows = run_rows(store, id)
            assert [due for due, _ in rows] == [T0 + timedelta(minutes=n) for n in range(1, moments + 1)]
            assert {status for _, status in rows} == {"ok"}
    keys = [(f["task"], f["due_at"]) for f in fired]
    assert len(keys) == len(set(keys)) == moments * tasks, "a moment fired twice, or not at all"
    assert not any(f["resumed"] for f in fired)
    assert len(rest.calls) < len(keys)  # the processes did the work


DEAD_OWNER = "elsewhere:12345:abcdef"


def crashed_run(store: Store, id: str, owner: str, due: datetime, now: datetime) -> str:
    """What a process that crashed mid-firing leaves: its lease, and a run started and not finished."""
    assert store.claim(id, owner, now, 30) is not None
    run = store.start_run(id, owner, "20261123T080000Z-crashd", "/elsewhere/run.jsonl", due, now)
    return run.run_id


def test_an_expired_lease_is_reclaimed_and_its_open_run_resumed(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("repeat", T0, every=timedelta(hours=1)))
    run_id = crashed_run(store, t.id, DEAD_OWNER, T0, T0)
    s = make(store, tmp_path, clock, fire)
    clock.move(seconds=29)
    assert tick(s) == 0 and fire.calls == []  # the lease holds
    clock.move(seconds=2)
    assert tick(s) == 1
    (firing,) = fire.calls
    assert firing.resumed and firing.run.run_id == run_id and firing.run.transcript == "/elsewhere/run.jsonl"
    assert at(firing.run.due_at) == T0
    assert run_rows(store, t.id) == [(T0, "ok")]
    after = task(store, t.id)
    assert (at(after.next_run), after.lease_owner) == (T0 + timedelta(hours=1), None)
    assert any(e["kind"] == "lease_reclaimed" for e in store.events(limit=1000))


def test_a_running_firing_renews_its_lease(store: Store, tmp_path: Path) -> None:
    clock = Clock(T0)
    first, second = Fire(), Fire()
    add(store, Schedule("once", T0))
    a = make(store, tmp_path, clock, first, lease_seconds=0.3)  # renewed every 0.1 s (real time)
    b = make(store, tmp_path, clock, second)

    async def body() -> None:
        first.gate, first.entered = asyncio.Event(), asyncio.Event()
        assert await a.tick() == 1
        await first.entered.wait()
        clock.move(seconds=0.25)
        deadline = time.monotonic() + 10
        while not any(e["kind"] == "lease_renewed" and e["data"]["until"] > (T0 + timedelta(seconds=0.5)).isoformat()
                      for e in await asyncio.to_thread(store.events, 1000)):
            assert time.monotonic() < deadline, "never renewed"
            await asyncio.sleep(0.02)  # a renewal at T0+0.25 s: held until T0+0.55 s
        clock.move(seconds=0.25)  # past the first lease's end
        assert await b.tick() == 0
        first.gate.set()
        await settle(a, b)

    asyncio.run(body())
    assert len(first.calls) == 1 and second.calls == []
    assert any(e["kind"] == "lease_renewed" for e in store.events(limit=1000))


def test_a_firing_stalled_past_its_lease_with_its_transcript_free_is_resumed_by_another_once(
        store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A holder that neither renews nor ends within its lease, and no longer holds its
    transcript, loses the task: the next owner resumes the same run and records its end;
    the stalled one's late end (the same) is not recorded again. (While the transcript is
    held, the run is left to its holder: tests/test_leases.py.)"""
    clock = Clock(T0)
    first, second = Fire(), Fire()
    t = add(store, HOURLY)
    clock.set(T0 + timedelta(hours=1))
    a = make(store, tmp_path, clock, first, lease_seconds=30)
    b = make(store, tmp_path, clock, second)

    async def body() -> None:
        first.gate, first.entered = asyncio.Event(), asyncio.Event()
        assert await a.tick() == 1
        await first.entered.wait()
        first.calls[0].lock.release()  # as if its process no longer held the transcript
        clock.move(seconds=31)
        assert await b.tick() == 1
        await settle(b)
        first.gate.set()
        await settle(a)

    with caplog.at_level("INFO", logger="chainlang.serve"):
        asyncio.run(body())
    assert [(f.resumed, f.run.run_id) for f in second.calls] == [(True, first.calls[0].run.run_id)]
    assert run_rows(store, t.id) == [(T0 + timedelta(hours=1), "ok")]
    after = task(store, t.id)
    assert (after.lease_owner, at(after.next_run), after.failures) == (None, T0 + timedelta(hours=2), 0)
    assert any("was recorded by another process" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_an_open_run_is_resumed_whatever_misfire_says(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, HOURLY, misfire="skip")
    run_id = crashed_run(store, t.id, DEAD_OWNER, T0 + timedelta(hours=1), T0 + timedelta(hours=1))
    clock.set(PAUSE)  # hours later
    assert tick(make(store, tmp_path, clock, fire)) == 1
    assert [(f.resumed, f.run.run_id) for f in fire.calls] == [(True, run_id)]
    assert at(task(store, t.id).next_run) == T0 + timedelta(hours=6)


def test_recover_frees_the_lease_of_a_dead_process_of_this_host(store: Store, tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    dead_owner = f"{host}:{gone.pid}:abcdef"
    live_owner = f"{host}:{os.getppid()}:abcdef"  # a process that runs
    clock, fire = Clock(T0), Fire()
    dead_task = add(store, Schedule("once", T0))
    live_task = add(store, Schedule("once", T0))
    other_host = add(store, Schedule("once", T0))
    run_id = crashed_run(store, dead_task.id, dead_owner, T0, T0)
    store.claim(live_task.id, live_owner, T0, 30)
    store.claim(other_host.id, DEAD_OWNER, T0, 30)
    s = make(store, tmp_path, clock, fire)
    assert asyncio.run(s.recover()) == [dead_task.id]
    assert tick(s) == 1  # at once: the lease has not run out
    assert [(f.task.id, f.resumed, f.run.run_id) for f in fire.calls] == [(dead_task.id, True, run_id)]
    assert task(store, live_task.id).lease_owner == live_owner
    assert task(store, other_host.id).lease_owner == DEAD_OWNER


def test_drain_cancels_a_firing_past_the_grace_and_leaves_its_run_open(store: Store, tmp_path: Path) -> None:
    clock = Clock(T0)
    first, second = Fire(), Fire()
    t = add(store, HOURLY)
    clock.set(T0 + timedelta(hours=1))
    s = make(store, tmp_path, clock, first)

    async def body() -> list[str]:
        first.gate, first.entered = asyncio.Event(), asyncio.Event()
        assert await s.tick() == 1
        await first.entered.wait()
        # the firing never ends by itself (its gate stays shut): drain returns only by cutting it
        return await asyncio.wait_for(s.drain(0.05), 30)

    assert asyncio.run(body()) == [t.id]
    assert len(first.cancelled) == 1 and s.running == {}
    left = task(store, t.id)
    assert left.lease_owner is None and at(left.next_run) == T0 + timedelta(hours=1)
    assert [r.status for r in store.runs(t.id)] == ["running"]
    # another scheduler (the next serve) resumes that run, not a new one
    other = make(store, tmp_path, clock, second)
    assert tick(other) == 1
    assert [(f.resumed, f.run.run_id) for f in second.calls] == [(True, first.calls[0].run.run_id)]
    assert run_rows(store, t.id) == [(T0 + timedelta(hours=1), "ok")]


def test_drain_lets_a_firing_that_ends_within_the_grace_finish(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("once", T0))
    s = make(store, tmp_path, clock, fire)

    async def body() -> list[str]:
        fire.gate, fire.entered = asyncio.Event(), asyncio.Event()
        await s.tick()
        await fire.entered.wait()
        asyncio.get_running_loop().call_later(0.05, fire.gate.set)
        return await s.drain(5)

    assert asyncio.run(body()) == []
    assert run_rows(store, t.id) == [(T0, "ok")] and task(store, t.id).status == "completed"


# -- the loop ------------------------------------------------------------------------------


def test_run_fires_due_tasks_and_sleeps_while_one_runs(store: Store, tmp_path: Path) -> None:
    """run() fires what is due, and while a firing runs (its task still due in the store
    until it ends) it does not spin: it sleeps until the poll or a wake-up."""
    clock, fire = Clock(T0), Fire()
    t = add(store, Schedule("repeat", T0, every=timedelta(hours=1)))
    s = make(store, tmp_path, clock, fire, poll_seconds=0.1)
    calls = {"due": 0}
    real = store.due_tasks

    def counted(*args: Any, **kw: Any) -> list[TaskRecord]:
        calls["due"] += 1
        return real(*args, **kw)

    store.due_tasks = counted  # type: ignore[method-assign]

    async def body() -> None:
        stopping = asyncio.Event()
        fire.gate, fire.entered = asyncio.Event(), asyncio.Event()
        loop = asyncio.create_task(s.run(stopping))
        await asyncio.wait_for(fire.entered.wait(), 5)
        await asyncio.sleep(0.5)  # the firing runs for half a second
        fire.gate.set()
        await settle(s)
        stopping.set()
        await asyncio.wait_for(loop, 5)

    asyncio.run(body())
    assert len(fire.calls) == 1 and run_rows(store, t.id) == [(T0, "ok")]
    assert calls["due"] < 20, f"{calls['due']} ticks in ~0.5 s: the loop spins while a firing runs"


def test_run_wakes_for_a_task_added_meanwhile(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    s = make(store, tmp_path, clock, fire, poll_seconds=0.05)

    async def body() -> None:
        stopping = asyncio.Event()
        loop = asyncio.create_task(s.run(stopping))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(add, store, Schedule("once", T0))
        deadline = time.monotonic() + 5
        while not fire.calls and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await settle(s)
        stopping.set()
        await asyncio.wait_for(loop, 5)

    asyncio.run(body())
    assert len(fire.calls) == 1


def test_a_task_added_in_this_process_wakes_the_loop_before_its_poll(store: Store, tmp_path: Path) -> None:
    """A task that this process adds (an event's action under serve, through a store of its
    own: stdlib task.schedule opens one), from another thread, is fired without waiting for
    the poll, here an hour away; the loop stops listening when it ends."""
    from chainlang.store import tasks as store_tasks

    clock, fire = Clock(T0), Fire()
    s = make(store, tmp_path, clock, fire, poll_seconds=3600)
    listening = len(store_tasks._ADDED)

    def add_elsewhere() -> None:
        with open_store(tmp_path) as other:
            add(other, Schedule("once", T0))

    async def body() -> None:
        stopping = asyncio.Event()
        loop = asyncio.create_task(s.run(stopping))
        deadline = time.monotonic() + 5
        while len(store_tasks._ADDED) == listening and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # the loop has begun and sleeps until its poll
        await asyncio.to_thread(add_elsewhere)
        deadline = time.monotonic() + 10
        while not fire.calls and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await settle(s)
        stopping.set()
        await asyncio.wait_for(loop, 5)

    asyncio.run(body())
    assert len(fire.calls) == 1
    assert len(store_tasks._ADDED) == listening


def test_a_task_without_a_readable_schedule_is_not_fired_nor_retried_at_once(store: Store, tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    clock, fire = Clock(T0), Fire()
    bad = store.add_task("schedule", {"schedule": {"type": "once"}, "action": ACTION}, next_run=T0)
    good = add(store, Schedule("once", T0))
    s = make(store, tmp_path, clock, fire, poll_seconds=0.02)

    async def body() -> None:
        stopping = asyncio.Event()
        loop = asyncio.create_task(s.run(stopping))
        deadline = time.monotonic() + 10
        while not fire.calls and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # ten polls more
        stopping.set()
        await asyncio.wait_for(loop, 5)

    with caplog.at_level("ERROR", logger="chainlang.serve"):
        asyncio.run(body())
    assert [f.task.id for f in fire.calls] == [good.id]
    assert task(store, bad.id).lease_owner is None and task(store, bad.id).status == "active"
    complaints = [r for r in caplog.records if bad.id in r.getMessage()]
    assert len(complaints) == 1 and "no readable schedule" in complaints[0].getMessage()

