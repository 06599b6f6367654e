"""The store's task system (schema version 2): tasks, leases, runs and dead letters; the
migration from version 1; and what two processes and a SIGKILL may and may not do.

Every test uses a real SQLite file under tmp_path; the concurrency and crash tests start
real child processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chainlang.store import SCHEMA_VERSION, Lease, StoreError, TaskRecord, open_store
from chainlang.store.schema import MIGRATIONS

REPO = Path(__file__).resolve().parent.parent
V1_COMMIT = "e468aee6e671e87223e6ed6db18dc52f01b44847"  # the store as it shipped with schema version 1
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
SCHEDULE = {"type": "repeat", "interval": "1 hour", "action": {"event": "tools.echo", "params": {"x": 1}}}


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def db_path(root: Path) -> Path:
    return root / ".chainlang" / "store.db"


def raw(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(db_path(root), isolation_level=None)


def table_sql(con: sqlite3.Connection) -> dict[str, str]:
    return dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') "
                            "AND name NOT LIKE 'sqlite_%'").fetchall())


def log(root: Path, *kinds: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    rows = raw(root).execute("SELECT seq, kind, subject, data FROM event_log ORDER BY seq").fetchall()
    return [(seq, kind, subject, json.loads(data)) for seq, kind, subject, data in rows if not kinds or kind in kinds]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


# -- migrations ------------------------------------------------------------------------


def v1_package(tmp_path: Path) -> Path:
    """The store package of schema version 1, from git, importable from the returned root."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs the git history of the repository")
    old = tmp_path / "v1code"
    (old / "chainlang" / "store").mkdir(parents=True)
    (old / "chainlang" / "__init__.py").write_text("")
    for name in ("__init__.py", "base.py", "schema.py", "store.py"):
        text = subprocess.run(["git", "show", f"{V1_COMMIT}:chainlang/store/{name}"], cwd=REPO, check=True,
                              capture_output=True, text=True).stdout
        (old / "chainlang" / "store" / name).write_text(text)
    return old


def run_v1(code_root: Path, project: Path, code: str) -> str:
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        import chainlang.store
        assert chainlang.store.__file__.startswith(sys.argv[1]), chainlang.store.__file__
        from chainlang.store import SCHEMA_VERSION, open_store
        assert SCHEMA_VERSION == 1
        store = open_store(Path(sys.argv[2]))
    """) + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", script, str(code_root), str(project)], capture_output=True,
                          text=True, timeout=60, cwd=code_root, env={**os.environ, "PYTHONPATH": str(code_root)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_version_1_store_is_migrated_to_5_and_keeps_its_emits(tmp_path: Path) -> None:
    old = v1_package(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    run_v1(old, project, 'store.claim_emit("evt-1", "order.created", "run-1", "runs/run-1.jsonl")\nstore.close()')
    v1_tables = table_sql(raw(project))
    assert set(v1_tables) == {"chainlang_schema", "emits", "event_log"}

    with open_store(project) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        claim = store.get_emit("evt-1")
        assert claim is not None and claim.run_id == "run-1" and claim.transcript == "runs/run-1.jsonl"
        assert claim.data is None  # claimed before version 3 kept the payload
        task = store.add_task("schedule", SCHEDULE, id="after-migration", next_run=at(0))
        assert store.get_task("after-migration") == task
    con = raw(project)
    assert [r[0] for r in con.execute("SELECT version FROM chainlang_schema ORDER BY version")] == [1, 2, 3, 4, 5]
    tables = table_sql(con)
    assert tables["event_log"] == v1_tables["event_log"]  # version 1's tables untouched, but for
    assert tables["emits"].replace(", data TEXT", "") == v1_tables["emits"]  # the column version 3 adds
    assert {"tasks", "task_runs", "tasks_due"} <= set(tables)
    assert [kind for _, kind, _, _ in log(project)] == ["emit_claimed", "task_added"]
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []


def test_migration_1_creates_exactly_the_tables_it_shipped_with(tmp_path: Path) -> None:
    old = v1_package(tmp_path)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    run_v1(old, shipped, "store.close()")
    expected = table_sql(raw(shipped))

    ours = tmp_path / "ours.db"  # migration 1 alone, from today's code
    con = sqlite3.connect(ours)
    con.close()
    from sqlalchemy import create_engine

    from chainlang.store.schema import SCHEMA

    engine = create_engine(f"sqlite:///{ours}")
    with engine.begin() as conn:
        SCHEMA.create(conn)
        MIGRATIONS[0].apply(conn)
    engine.dispose()
    assert MIGRATIONS[0].version == 1
    assert table_sql(sqlite3.connect(ours)) == expected


def test_a_new_store_walks_every_migration_and_matches_the_current_tables(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        assert store.schema_version() == 5
    con = raw(tmp_path)
    assert [r[0] for r in con.execute("SELECT version FROM chainlang_schema ORDER BY version")] == [1, 2, 3, 4, 5]
    from chainlang.store.schema import METADATA

    for table in METADATA.sorted_tables:  # what the queries use is what the migrations built
        columns = {r[1]: (r[2].upper(), bool(r[3]), r[5]) for r in con.execute(f"PRAGMA table_info({table.name})")}
        assert list(columns) == [c.name for c in table.columns], table.name
        for column in table.columns:
            assert columns[column.name][1] == (not column.nullable or column.primary_key), (table.name, column.name)
    tasks = {r[1]: r for r in con.execute("PRAGMA table_info(tasks)")}
    assert tasks["failures"][4] == "0" and tasks["id"][5] == 1 and tasks["next_run"][3] == 0
    assert [tuple(r[2:5]) for r in con.execute("PRAGMA foreign_key_list(task_runs)")] == [("tasks", "task_id", "id")]
    unique = [r for r in con.execute("PRAGMA index_list(task_runs)") if r[2] == 1]
    assert [[c[2] for c in con.execute(f"PRAGMA index_info({u[1]})")] for u in unique] == [["task_id", "due_at"]]


# -- tasks -----------------------------------------------------------------------------


def test_the_listeners_of_added_tasks_are_told_after_the_commit(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Told of each task added or retried (serve's scheduler wakes on it); one that fails is
    logged and fails nothing: the task is stored."""
    from chainlang.store.tasks import when_tasks_added

    seen: list[list[str]] = []

    def look() -> None:  # what the store holds when told: the write is committed, a new reader sees it
        with open_store(tmp_path) as other:
            seen.append([t.id for t in other.list_tasks()])

    def broken() -> None:
        raise ValueError("a listener's bug")

    with open_store(tmp_path) as store:
        stop_look, stop_broken = when_tasks_added(look), when_tasks_added(broken)
        try:
            with caplog.at_level("ERROR", logger="chainlang.store"):
                store.add_task("schedule", SCHEDULE, id="first", next_run=T0)
            stop_broken()
            store.add_task("schedule", SCHEDULE, id="second", next_run=T0)
        finally:
            stop_look(), stop_broken()
        store.add_task("schedule", SCHEDULE, id="third", next_run=T0)  # no one listens any more
        assert [t.id for t in store.list_tasks()] == ["first", "second", "third"]
    assert seen == [["first"], ["first", "second"]]
    assert [r.getMessage() for r in caplog.records] == ["a listener of added tasks failed"]


def test_add_get_list_cancel_retry_and_their_log(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        hook = store.add_task("hook", {"trigger": "order.created", "action": {"event": "tools.echo"}},
                              origin="run-7/3")
        sched = store.add_task("schedule", SCHEDULE, id="nightly", next_run=datetime(2026, 3, 1, 9, tzinfo=timezone(
            timedelta(hours=1))))
        assert hook.id.startswith("task-") and len(hook.id) == 17 and int(hook.id[5:], 16) >= 0
        assert hook.kind == "hook" and hook.status == "active" and hook.failures == 0 and hook.version == 1
        assert hook.origin == "run-7/3" and hook.next_run is None and hook.lease_owner is None
        assert sched.next_run == "2026-03-01T08:00:00.000000+00:00"  # stored in UTC
        assert store.get_task("nightly") == sched and store.get_task("nope") is None
        assert sched.definition == SCHEDULE
        assert [t.id for t in store.list_tasks()] == [hook.id, "nightly"]
        assert [t.id for t in store.list_tasks(kind="schedule")] == ["nightly"]
        assert store.list_tasks(status="dead") == []

        with pytest.raises(StoreError, match="task ID exists: 'nightly'"):
            store.add_task("schedule", SCHEDULE, id="nightly")
        with pytest.raises(StoreError, match="kind is one of hook, schedule"):
            store.add_task("cron", SCHEDULE)
        with pytest.raises(StoreError, match="no time zone"):
            store.add_task("schedule", SCHEDULE, next_run="2026-03-01 08:00")
        with pytest.raises(StoreError, match="must be JSON"):
            store.add_task("schedule", {"x": {1, 2}})
        with pytest.raises(StoreError, match="control character"):
            store.add_task("schedule", SCHEDULE, id="a\nb")

        cancelled = store.cancel_task("nightly")
        assert cancelled.status == "archived" and cancelled.version == 2
        assert store.cancel_task("nightly") == cancelled  # stays archived, nothing changes
        assert [t.id for t in store.list_tasks(status="archived")] == ["nightly"]
        with pytest.raises(StoreError, match="is archived, not dead"):
            store.retry_task("nightly")
        for call in (store.cancel_task, store.retry_task):
            with pytest.raises(StoreError, match="no task with id 'ghost'"):
                call("ghost")
        with pytest.raises(StoreError, match="no task with id 'ghost'"):
            store.claim("ghost", "me", at(0), 30)
    kinds = [(kind, subject, data) for _, kind, subject, data in log(tmp_path)]
    assert kinds == [
        ("task_added", hook.id, {"kind": "hook", "status": "active", "next_run": None, "origin": "run-7/3"}),
        ("task_added", "nightly", {"kind": "schedule", "status": "active", "next_run": sched.next_run,
                                   "origin": None}),
        ("task_cancelled", "nightly", {"from": "active"}),
    ]


def test_three_failures_in_a_row_make_a_dead_letter_and_retry_revives_it(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_task("schedule", SCHEDULE, id="flaky", next_run=at(0))
        statuses = ["failed", "ok", "failed", "limit", "interrupted"]
        for i, status in enumerate(statuses):
            due = at(i * 3600)
            assert [t.id for t in store.due_tasks(due)] == ["flaky"]
            assert store.claim("flaky", "w", due, 60) is not None
            run = store.start_run("flaky", "w", f"run-{i}", f"runs/run-{i}.jsonl", due, due)
            assert run.new and run.status == "running"
            task = store.finish_run("flaky", "w", due, status, at(i * 3600 + 5), next_run=at((i + 1) * 3600),
                                    error=None if status == "ok" else {"type": status})
            assert task.failures == [1, 0, 1, 2, 3][i] and task.last_run == due and task.lease_owner is None
        assert task.status == "dead" and task.next_run == at(5 * 3600)
        assert store.due_tasks(at(10 * 3600)) == [] and store.claim("flaky", "w", at(10 * 3600), 60) is None
        assert [t.id for t in store.list_tasks(status="dead")] == ["flaky"]
        runs = store.runs("flaky")
        assert [r.status for r in runs] == statuses and runs[0].error == {"type": "failed"} and runs[1].error is None
        assert all(r.finished_at is not None and not r.new for r in runs)

        revived = store.retry_task("flaky")
        assert revived.status == "active" and revived.failures == 0
        assert [t.id for t in store.due_tasks(at(10 * 3600))] == ["flaky"]
        with pytest.raises(StoreError, match="is active, not dead"):
            store.retry_task("flaky")
    dead = log(tmp_path, "task_dead")
    assert [(subject, data) for _, _, subject, data in dead] == [
        ("flaky", {"failures": 3, "max_failures": 3, "run_id": "run-4"})]
    assert [d["task_status"] for _, _, _, d in log(tmp_path, "run_finished")] == ["active"] * 4 + ["dead"]
    assert len(log(tmp_path, "task_retried")) == 1


def test_a_once_task_completes_and_a_hook_stays_active(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_task("schedule", {"type": "once", "at": at(0)}, id="once", next_run=at(0))
        store.claim("once", "w", at(1), 60)
        store.start_run("once", "w", "r", "t", at(0), at(1))
        done = store.finish_run("once", "w", at(0), "ok", at(2), next_run=None)
        assert done.status == "completed" and done.next_run is None and done.last_run == at(0)
        assert store.claim("once", "w", at(3), 60) is None and store.due_tasks(at(99)) == []

        store.add_task("hook", {"trigger": "x"}, id="hook")
        store.claim("hook", "w", at(1), 60)
        store.start_run("hook", "w", "r", "t", at(1), at(1))
        assert store.finish_run("hook", "w", at(1), "failed", at(2), next_run=None).status == "active"


def test_due_tasks_claim_and_the_lease_rules(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_task("schedule", SCHEDULE, id="b", next_run=at(10))
        store.add_task("schedule", SCHEDULE, id="a", next_run=at(5))
        store.add_task("schedule", SCHEDULE, id="later", next_run=at(100))
        store.add_task("schedule", SCHEDULE, id="ended", next_run=at(0), status="completed")
        store.add_task("schedule", SCHEDULE, id="fresh", next_run=at(11), status="pending")  # not fired yet: runnable
        store.add_task("hook", {"trigger": "x"}, id="hook")
        assert [t.id for t in store.due_tasks(at(10))] == ["a", "b"]  # the earliest first
        assert [t.id for t in store.due_tasks(at(10), limit=1)] == ["a"]
        with pytest.raises(StoreError, match="limit takes a whole number"):
            store.due_tasks(at(10), limit=-1)

        lease = store.claim("a", "w1", at(10), 30)
        assert lease == Lease(task_id="a", owner="w1", until=at(40), version=2)
        assert [t.id for t in store.due_tasks(at(10))] == ["b"]  # a leased task is not due
        assert store.claim("a", "w2", at(20), 30) is None
        assert store.claim("a", "w1", at(20), 30) is None  # not even for its owner: renew() extends
        assert store.claim("ended", "w1", at(20), 30) is None
        with pytest.raises(StoreError, match="ttl_seconds"):
            store.claim("b", "w1", at(20), 0)

        with pytest.raises(StoreError, match="'w2' does not hold the lease of the task 'a'.*'w1' does"):
            store.start_run("a", "w2", "r", "t", at(5), at(20))
        renewed = store.renew("a", "w1", at(30), 30)
        assert renewed is not None and renewed.until == at(60)
        assert store.claim("a", "w2", at(45), 30) is None  # renewed: still held
        assert [t.id for t in store.due_tasks(at(61))] == ["a", "b", "fresh"]  # expired: due again (and the pending one, due at 11)

        reclaimed = store.claim("a", "w2", at(61), 30)
        assert reclaimed is not None and reclaimed.owner == "w2" and reclaimed.reclaimed_from == "w1"
        assert store.renew("a", "w1", at(62), 30) is None
        assert store.release("a", "w1") is False
        with pytest.raises(StoreError, match="'w1' does not hold"):
            store.start_run("a", "w1", "r", "t", at(5), at(62))
        with pytest.raises(StoreError, match="the lease of 'w2' on the task 'a' expired"):
            store.start_run("a", "w2", "r", "t", at(5), at(200))
        assert store.release("a", "w2") is True
        released = store.get_task("a")
        assert released is not None and released.lease_owner is None
        assert released.version == 5  # added, claimed, renewed, reclaimed, released
    reclaims = log(tmp_path, "lease_reclaimed")
    assert [(s, d["owner"], d["from"], d["expired"]) for _, _, s, d in reclaims] == [("a", "w2", "w1", at(60))]
    assert [d["owner"] for _, _, s, d in log(tmp_path, "lease_taken")] == ["w1", "w2"]
    assert [d["owner"] for _, _, s, d in log(tmp_path, "lease_released")] == ["w2"]


def test_next_due_leaves_out_the_tasks_held_at_now(tmp_path: Path) -> None:
    """What the scheduler sleeps until: a task someone holds (running) is not waited for
    until its lease runs out, else the loop would wake at once, again and again."""
    with open_store(tmp_path) as store:
        assert store.next_due() is None and store.next_due(at(0)) is None
        store.add_task("schedule", SCHEDULE, id="a", next_run=at(5))
        store.add_task("schedule", SCHEDULE, id="b", next_run=at(50))
        store.add_task("schedule", SCHEDULE, id="off", next_run=at(1), status="completed")
        assert store.next_due() == store.next_due(at(10)) == at(5)
        assert store.claim("a", "w1", at(10), 30) is not None
        assert store.next_due() == at(5)  # without now: every active schedule
        assert store.next_due(at(10)) == at(50)  # a is held until at(40)
        assert store.next_due(at(41)) == at(5)  # its lease ran out
        store.cancel_task("b")
        assert store.next_due(at(10)) is None


def test_a_due_moment_is_recorded_once_and_a_reclaimer_resumes_its_run(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_task("schedule", SCHEDULE, id="job", next_run=at(0))
        store.claim("job", "w1", at(0), 30)
        first = store.start_run("job", "w1", "run-1", "runs/run-1.jsonl", at(0), at(1))
        again = store.start_run("job", "w1", "run-2", "runs/run-2.jsonl", at(0), at(2))
        assert first.new and not again.new and again.run_id == "run-1" and again.id == first.id
        # w1 dies; its lease expires; w2 takes over the same due moment
        store.claim("job", "w2", at(40), 30)
        resumed = store.start_run("job", "w2", "run-3", "runs/run-3.jsonl", at(0), at(41))
        assert not resumed.new and resumed.run_id == "run-1" and resumed.transcript == "runs/run-1.jsonl"
        with pytest.raises(StoreError, match="'w1' does not hold"):
            store.finish_run("job", "w1", at(0), "ok", at(42), next_run=at(3600))
        task = store.finish_run("job", "w2", at(0), "ok", at(42), next_run=at(3600))
        assert task.next_run == at(3600) and task.lease_owner is None
        store.claim("job", "w2", at(43), 30)
        with pytest.raises(StoreError, match="already finished \\(ok\\)"):
            store.finish_run("job", "w2", at(0), "ok", at(44), next_run=at(3600))
        with pytest.raises(StoreError, match="no run due at"):
            store.finish_run("job", "w2", at(3600), "ok", at(44), next_run=at(7200))
        assert [r.run_id for r in store.runs("job")] == ["run-1"]
    con = raw(tmp_path)
    assert con.execute("SELECT COUNT(*) FROM task_runs").fetchone()[0] == 1
    assert len(log(tmp_path, "run_started")) == 1
    with pytest.raises(sqlite3.IntegrityError):  # and the table itself refuses a second row
        con.execute("INSERT INTO task_runs (task_id, run_id, transcript, due_at, started_at, status) "
                    "VALUES ('job', 'x', 'x', ?, 'x', 'running')", (at(0),))


def test_a_task_cancelled_during_its_run_is_finished_and_stays_archived(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.add_task("schedule", SCHEDULE, id="job", next_run=at(0))
        store.claim("job", "w", at(0), 30)
        store.start_run("job", "w", "r", "t", at(0), at(0))
        store.cancel_task("job")
        task = store.finish_run("job", "w", at(0), "failed", at(1), next_run=at(3600))
        assert task.status == "archived" and task.failures == 1 and task.lease_owner is None
        store.add_task("schedule", SCHEDULE, id="job2", next_run=at(0))
        store.claim("job2", "w", at(0), 30)
        store.cancel_task("job2")
        with pytest.raises(StoreError, match="is archived: only a pending or active task is run"):
            store.start_run("job2", "w", "r", "t", at(0), at(0))


# -- processes and crashes -------------------------------------------------------------

CLAIMER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from chainlang.store import open_store

    root, name, start, now = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    with open_store(root) as store:
        time.sleep(max(0.0, start - time.time()))
        for task in store.due_tasks(now):
            lease = store.claim(task.id, name, now, 30)
            print(json.dumps([task.id, lease is not None]), flush=True)
""")


def test_two_processes_claiming_the_same_due_tasks_each_task_is_claimed_once(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(30):
            store.add_task("schedule", SCHEDULE, id=f"t{i:02}", next_run=at(i))
    start = time.time() + 0.8
    children = {name: subprocess.Popen([sys.executable, "-c", CLAIMER, str(tmp_path), name, str(start), at(60)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
                for name in ("p1", "p2")}
    won: dict[str, set[str]] = {}
    for name, child in children.items():
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        won[name] = {task for task, ok in map(json.loads, out.splitlines()) if ok}
    assert won["p1"].isdisjoint(won["p2"]) and won["p1"] | won["p2"] == {f"t{i:02}" for i in range(30)}
    with open_store(tmp_path) as store:
        owners = {t.id: t.lease_owner for t in store.list_tasks()}
        assert owners == {task: name for name, tasks in won.items() for task in tasks}
        assert store.due_tasks(at(60)) == []
        # the leases (30 s from at(60)) expire; another owner reclaims one
        assert store.claim("t00", "p3", at(89), 30) is None
        lease = store.claim("t00", "p3", at(91), 30)
        assert lease is not None and lease.reclaimed_from == owners["t00"]
    taken = log(tmp_path, "lease_taken")
    assert len(taken) == 31 and {s for _, _, s, _ in taken} == set(owners)
    assert [(s, d["from"], d["owner"]) for _, _, s, d in log(tmp_path, "lease_reclaimed")] == [
        ("t00", owners["t00"], "p3")]


WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from chainlang.store import open_store

    root, now, later = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open_store(root) as store:
        i = 0
        while True:
            for task in store.due_tasks(now, limit=10):
                if store.claim(task.id, "victim", now, 30) is None:
                    continue
                run = store.start_run(task.id, "victim", f"run-{i}", f"runs/run-{i}.jsonl", task.next_run, now)
                status = "failed" if i % 3 == 0 else "ok"
                store.finish_run(task.id, "victim", task.next_run, status, now, next_run=later,
                                 error={"n": i} if status == "failed" else None)
                print(task.id, flush=True)
                i += 1
""")

_CHANGES = ("task_added", "task_cancelled", "task_retried", "lease_taken", "lease_renewed", "lease_released",
            "run_finished")


def test_a_killed_worker_leaves_no_half_finished_firing(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(150):
            store.add_task("schedule", SCHEDULE, id=f"t{i:04}", next_run=at(0))
    child = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), at(10), at(3600)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    assert child.stdout is not None
    finished = []
    for line in child.stdout:
        finished.append(line.strip())
        if len(finished) == 40:
            break
    time.sleep(0.05)  # somewhere inside its next claim, start or finish
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""

    con = raw(tmp_path)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    events = log(tmp_path)
    tasks = {r[0]: r for r in con.execute(
        "SELECT id, status, next_run, last_run, failures, lease_owner, lease_until, version FROM tasks")}
    runs = {r[0]: r for r in con.execute("SELECT task_id, run_id, due_at, finished_at, status, error FROM task_runs")}
    assert set(finished) <= {t for t, r in runs.items() if r[4] != "running"}
    # every change of a task is in the log, committed with it: the version counts them
    for task_id, row in tasks.items():
        assert row[7] == sum(1 for _, kind, s, _ in events if s == task_id and kind in _CHANGES), task_id
    leased_at: dict[str, int] = {}
    for seq, kind, subject, data in events:
        if kind == "lease_taken":
            leased_at[subject] = seq
        if kind == "run_started":  # a run is started only under a lease taken before it
            assert data["owner"] == "victim" and leased_at[subject] < seq
    assert {s for _, k, s, _ in events if k == "run_started"} == set(runs)
    finished_log = {s: d for _, k, s, d in events if k == "run_finished"}
    running = [t for t, r in runs.items() if r[4] == "running"]
    assert len(running) <= 1
    for task_id, (_, run_id, due, finished_at, status, error) in runs.items():
        _, t_status, next_run, last_run, failures, owner, until, _ = tasks[task_id]
        if status == "running":  # started, not finished: the task is untouched and still leased
            assert finished_at is None and task_id not in finished_log
            assert owner == "victim" and next_run == at(0) and last_run is None
        else:  # finished: the task moved on and the lease is gone, in the same commit
            assert finished_at == at(10) and finished_log[task_id]["status"] == status
            assert owner is None and until is None and next_run == at(3600) and last_run == at(0)
            assert failures == (1 if status == "failed" else 0) and t_status == "active"
            assert (error is None) == (status == "ok")
    leased_without_run = [t for t, r in tasks.items() if r[5] is not None and t not in runs]
    assert len(leased_without_run) + len(running) <= 1

    with open_store(tmp_path) as store:  # another worker takes over once the lease expired
        for task_id in running + leased_without_run:
            assert store.claim(task_id, "heir", at(20), 30) is None  # still leased at 20 s
            assert store.claim(task_id, "heir", at(41), 30) is not None
            run = store.start_run(task_id, "heir", "run-heir", "runs/heir.jsonl", at(0), at(41))
            assert run.new == (task_id not in running)
            assert store.finish_run(task_id, "heir", at(0), "ok", at(42), next_run=at(3600)).status == "active"
        done = sum(1 for t in store.list_tasks() if t.last_run is not None)
        assert done == len(runs) + len(leased_without_run)
