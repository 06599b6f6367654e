"""A scheduler that survives its store (issue 21): a task row it cannot read is quarantined
(logged once with its id and why, shown by `chainlang tasks list`/`show` and serve's page,
counted in /metrics, /healthz `degraded`) and every other task keeps firing; SIGTERM still
exits 0. And a store that is a directory, a dangling link, or an SQLite file without its
tables gives a clear error naming it, never "no stored tasks".

The rows are damaged the way a hand edit or another program would: plain SQL on the file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.store import Store, open_store
from chainlang.schedules import Schedule
from tests.hooks_util import labels, write, write_tools
from tests.serve_util import Servers, run, servers, show, wait_until  # noqa: F401  (servers: a fixture)
from tests.test_scheduler import T0, Clock, Fire, add, make, settle

# (column, value, what the quarantine says): each a row no code of chainlang writes
DAMAGE = [
    ("next_run", "0 not a time", "its next_run is not an ISO 8601 moment: '0 not a time'"),
    ("next_run", "2026-13-45T99:00:00+00:00", "its next_run is not an ISO 8601 moment"),
    ("definition", "{not json", "its definition is not JSON"),
    ("definition", "[1, 2]", "its definition is JSON but not an object (list)"),
    ("failures", "many", "its failures is 'many', not a whole number"),
    ("status", "running-ish", "its status is 'running-ish', not one of"),
    ("lease_until", "soon", "its lease_until is not an ISO 8601 moment: 'soon'"),
    ("kind", "cron", "its kind is 'cron', not one of hook, schedule"),
]


def damage(db: Path, task_id: str, column: str, value: Any) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute(f"UPDATE tasks SET {column} = ? WHERE id = ?", (value, task_id))  # noqa: S608 (a fixed column)
        con.commit()
    finally:
        con.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path) as opened:
        yield opened


# -- the store reads a damaged row as quarantined ---------------------------------------------


@pytest.mark.parametrize(("column", "value", "said"), DAMAGE, ids=[f"{c}={v}" for c, v, _ in DAMAGE])
def test_a_row_that_cannot_be_read_comes_back_quarantined_and_the_others_are_read(
        store: Store, column: str, value: Any, said: str) -> None:
    good = add(store, Schedule("once", T0), id="good")
    bad = add(store, Schedule("once", T0), id="bad")
    damage(store.path, bad.id, column, value)
    listed = {t.id: t for t in store.list_tasks()}
    assert listed[good.id].problem is None and listed[good.id] == store.get_task(good.id)
    assert said in str(listed[bad.id].problem), listed[bad.id].problem
    got = store.get_task(bad.id)
    assert got is not None and got.problem == listed[bad.id].problem
    due = store.due_tasks(T0 + timedelta(hours=1))  # never raises; the good one is due
    assert good.id in [t.id for t in due] and all(t.problem for t in due if t.id == bad.id)
    assert store.next_due(T0) == T0.isoformat(timespec="microseconds")  # a moment, never the damaged text


# -- the scheduler ----------------------------------------------------------------------------


def test_the_loop_quarantines_unreadable_rows_and_keeps_firing_the_others(
        store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The loop of serve (`run()`), against a store with damaged rows: it does not end, it
    quarantines each bad row once (logged once, with its id and why), and fires the others,
    a task added later too."""
    clock, fire = Clock(T0), Fire()
    bad_ids = []
    for n, (column, value, _) in enumerate(DAMAGE[:4]):
        bad_ids.append(add(store, Schedule("once", T0), id=f"bad-{n}").id)
        damage(store.path, bad_ids[-1], column, value)
    unplannable = store.add_task("schedule", {"schedule": {"type": "once"}, "action": []}, id="no-timing",
                                 next_run=T0)  # a definition without its timing
    first = add(store, Schedule("once", T0), id="first")
    s = make(store, tmp_path, clock, fire, poll_seconds=0.02)

    async def body() -> None:
        stopping = asyncio.Event()
        loop = asyncio.create_task(s.run(stopping))
        deadline = time.monotonic() + 10
        while [f.task.id for f in fire.calls] != [first.id]:
            assert not loop.done(), loop.exception() if loop.done() else None
            assert time.monotonic() < deadline, "the good task never fired"
            await asyncio.sleep(0.01)
        later = await asyncio.to_thread(add, store, Schedule("once", T0), "once", "later")
        while [f.task.id for f in fire.calls] != [first.id, later.id]:
            assert not loop.done(), loop.exception() if loop.done() else None
            assert time.monotonic() < deadline, "a task added later never fired"
            await asyncio.sleep(0.01)
        await settle(s)
        stopping.set()
        await asyncio.wait_for(loop, 5)  # ends, without an exception

    with caplog.at_level("ERROR", logger="chainlang.serve"):
        asyncio.run(body())
    assert set(s.quarantined) == {*bad_ids, unplannable.id}
    assert "no readable schedule" in s.quarantined[unplannable.id]
    for task_id in [*bad_ids, unplannable.id]:  # logged once each, however many turns the loop made
        said = [r.getMessage() for r in caplog.records if f"task {task_id} is quarantined" in r.getMessage()]
        assert len(said) == 1, said
    assert s.trouble is None and asyncio.run(s.health()) == [
        f"task {i} is quarantined: {s.quarantined[i]}" for i in sorted(s.quarantined)]


def test_a_row_fixed_or_cancelled_leaves_the_quarantine(store: Store, tmp_path: Path) -> None:
    clock, fire = Clock(T0), Fire()
    bad = add(store, Schedule("once", T0), id="bad")
    other = add(store, Schedule("once", T0), id="other")
    damage(store.path, bad.id, "definition", "{not json")
    damage(store.path, other.id, "next_run", "yesterday")
    s = make(store, tmp_path, clock, fire)
    assert set(asyncio.run(s.scan())) == {bad.id, other.id}
    store.cancel_task(bad.id)  # archived: it can never fire, so it is no trouble any more
    damage(store.path, other.id, "next_run", T0.isoformat())  # fixed by hand
    assert asyncio.run(s.scan()) == {}
    asyncio.run(atick_once(s))
    assert [f.task.id for f in fire.calls] == [other.id]


async def atick_once(s: Any) -> None:
    await s.tick()
    await settle(s)


# -- through serve and the CLI ----------------------------------------------------------------


def _project(root: Path) -> None:
    write_tools(root)
    write(root, "chainlang.toml", 'tools = ["hk_tools.py"]\n')
    write(root, "jobs.chain.yaml", """\
        steps:
          - task.schedule:
              id: tick
              type: repeat
              interval: 1s
              action:
                - t.log: {label: tick}
          - task.schedule:
              id: bad-json
              type: repeat
              interval: 1s
              action:
                - t.log: {label: never}
          - task.schedule:
              id: bad-time
              type: repeat
              interval: 1s
              action:
                - t.log: {label: never}
    """)
    ran = run(root, "run", "jobs.chain.yaml")
    assert ran.returncode == 0, show(ran)
    db = root / ".chainlang" / "store.db"
    damage(db, "bad-json", "definition", "{not json")
    damage(db, "bad-time", "next_run", "0 not a time")  # sorts before every moment


@pytest.mark.slow
def test_serve_quarantines_bad_rows_reports_them_and_keeps_firing(tmp_path: Path, servers: Servers) -> None:
    _project(tmp_path)
    server = servers.start(tmp_path)
    wait_until("the good task fired three times", lambda: labels(tmp_path).count("tick") >= 3, within=15,
               server=server)
    assert "never" not in labels(tmp_path)
    health = server.get("/healthz")
    assert health.status_code == 200, health.text
    body = health.json()
    assert body["status"] == "degraded", body
    assert any("bad-json" in p and "definition is not JSON" in p for p in body["problems"]), body
    assert any("bad-time" in p and "'0 not a time'" in p for p in body["problems"]), body
    metrics = server.get("/metrics").text
    assert "\nchainlang_tasks_quarantined 2.0\n" in metrics, metrics
    page = server.get("/", params={"refresh": "0"}).text
    assert 'data-task="bad-json"' in page and "quarantined: its definition is not JSON" in page
    listed = run(tmp_path, "tasks", "list")
    assert listed.returncode == 0, show(listed)
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert "quarantined its definition is not JSON" in rows["bad-json"], listed.stdout
    assert "quarantined its next_run is not an ISO 8601 moment" in rows["bad-time"], listed.stdout
    assert " active " in rows["tick"]
    shown = run(tmp_path, "tasks", "show", "bad-time", "--json")
    assert shown.returncode == 0, show(shown)
    task = json.loads(shown.stdout)
    assert task["status"] == "quarantined" and "'0 not a time'" in task["quarantined"], task
    assert server.stop() == 0, server.describe()
    assert server.stdout.splitlines()[-1] == "serve stopped", server.describe()
    assert "internal error" not in server.stderr and "Traceback" not in server.stderr, server.describe()
    for task_id in ("bad-json", "bad-time"):
        assert server.stderr.count(f"task {task_id} is quarantined") == 1, server.describe()


# -- a store that is not one --------------------------------------------------------------------


def _store_at(root: Path) -> Path:
    write(root, "chainlang.toml", "")
    (root / ".chainlang").mkdir()
    return root / ".chainlang" / "store.db"


def _foreign(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE contacts (name TEXT)")
    con.commit()
    con.close()


def _dropped(db: Path) -> None:
    open_store(db.parent.parent).close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE task_runs")
    con.execute("DROP TABLE tasks")
    con.commit()
    con.close()


BROKEN = {
    "a directory": (lambda db: db.mkdir(), "is a directory, not an SQLite file"),
    "a dangling link": (lambda db: db.symlink_to(db.parent / "gone" / "store.db"),
                        "is a symbolic link to"),
    "another program's database": (_foreign, "other tables (contacts) and none of a chainlang store's"),
    "a store without its tables": (_dropped, "lacks the tables tasks, task_runs"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_store_that_is_not_one_is_a_clear_error_for_every_command(tmp_path: Path, case: str) -> None:
    db = _store_at(tmp_path)
    make_it, said = BROKEN[case]
    make_it(db)
    write(tmp_path, "listing.chain.yaml", "steps:\n  - task.list: {}\n")
    for args in (("tasks", "list"), ("tasks", "show", "any"), ("run", "listing.chain.yaml"),
                 ("serve", "--port", "0")):
        done = run(tmp_path, *args, timeout=30)
        assert done.returncode == 2, f"chainlang {' '.join(args)}: {show(done)}"
        assert said in done.stderr and str(db) in done.stderr, f"chainlang {' '.join(args)}: {show(done)}"
        assert "no stored tasks" not in done.stdout and "Traceback" not in done.stderr
        assert "internal error" not in done.stderr


def test_a_project_without_a_store_yet_has_no_stored_tasks(tmp_path: Path) -> None:
    db = _store_at(tmp_path)
    listed = run(tmp_path, "tasks", "list")
    assert listed.returncode == 0 and listed.stdout.strip() == "no stored tasks", show(listed)
    assert not db.exists()  # reading creates none
