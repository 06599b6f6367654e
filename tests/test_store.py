"""The project's store (chainlang.store): schema and migrations, emit ids, the event log,
the errors a user can cause, and what two processes and a crash may and may not do.

Every test uses a real SQLite file under tmp_path; the concurrency and crash tests start
real child processes.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chainlang.store import SCHEMA_VERSION, EmitClaim, StoreError, open_store

REPO = Path(__file__).resolve().parent.parent


def db_path(root: Path) -> Path:
    return root / ".chainlang" / "store.db"


def raw(root: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection, to look at the file without the code under test."""
    return sqlite3.connect(db_path(root), isolation_level=None)


# -- schema and migrations -------------------------------------------------------------


def test_a_new_store_is_created_at_the_current_version(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
    con = raw(tmp_path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"chainlang_schema", "emits", "event_log", "tasks", "task_runs"} <= tables
    assert [r[0] for r in con.execute("SELECT version FROM chainlang_schema")] == [1, 2, 3, 4, 5]
    emits = {r[1]: (r[2], r[3], r[5]) for r in con.execute("PRAGMA table_info(emits)")}  # type, notnull, pk
    assert emits["key"][2] == 1 and emits["finished_at"][1] == 0 and emits["status"][1] == 1
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_applies_nothing_twice_and_keeps_the_data(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.claim_emit("order-1", "order.created", "run-1", "runs/run-1.jsonl")
    for _ in range(2):
        with open_store(tmp_path) as store:
            assert store.schema_version() == SCHEMA_VERSION
            claim = store.get_emit("order-1")
            assert claim is not None and claim.run_id == "run-1"
    assert raw(tmp_path).execute("SELECT COUNT(*) FROM chainlang_schema").fetchone()[0] == SCHEMA_VERSION


def test_a_store_from_a_newer_chainlang_is_refused_and_left_alone(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    con = raw(tmp_path)
    con.execute("INSERT INTO chainlang_schema (version, applied_at) VALUES (7, 'later')")
    with pytest.raises(StoreError) as err:
        open_store(tmp_path)
    message = str(err.value)
    assert str(db_path(tmp_path)) in message
    assert f"newer chainlang (schema version 7, this one knows up to {SCHEMA_VERSION})" in message
    assert con.execute("SELECT COUNT(*) FROM chainlang_schema").fetchone()[0] == SCHEMA_VERSION + 1


# -- emit ids --------------------------------------------------------------------------


def test_the_second_claim_of_a_key_gets_the_first_run(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        first = store.claim_emit("evt-42", "payment.received", "run-a", "runs/run-a.jsonl")
        second = store.claim_emit("evt-42", "payment.received", "run-b", "runs/run-b.jsonl")
    assert first.new and first.status == "started" and first.finished_at is None
    assert second == EmitClaim(new=False, key="evt-42", event="payment.received", run_id="run-a",
                               transcript="runs/run-a.jsonl", status="started",
                               created_at=first.created_at, finished_at=None)


def test_finish_emit_records_the_final_status(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.claim_emit("k", "e", "run-1", "t.jsonl")
        store.finish_emit("k", "failed")
        claim = store.get_emit("k")
        assert claim is not None and claim.status == "failed" and claim.finished_at is not None
        assert claim.finished_at >= claim.created_at
        assert store.claim_emit("k", "e", "run-2", "t2.jsonl").status == "failed"
        assert store.get_emit("unknown") is None
        with pytest.raises(StoreError, match="'unknown'.*never claimed"):
            store.finish_emit("unknown", "ok")


def test_the_event_log_records_claims_and_finishes_newest_last(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.claim_emit("a", "ev", "run-1", "t1")
        store.claim_emit("a", "ev", "run-2", "t2")  # a repeat changes nothing: not logged
        store.finish_emit("a", "ok")
        store.log("note", "subject-1", {"n": 1, "text": "é"})
        events = store.events()
        assert [(e["kind"], e["subject"]) for e in events] == [
            ("emit_claimed", "a"), ("emit_finished", "a"), ("note", "subject-1")]
        assert events[0]["data"] == {"event": "ev", "run_id": "run-1", "transcript": "t1"}
        assert events[2]["data"] == {"n": 1, "text": "é"}
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
        assert [e["kind"] for e in store.events(limit=2)] == ["emit_finished", "note"]
        assert store.events(limit=0) == []
        with pytest.raises(StoreError, match="JSON"):
            store.log("bad", "s", {"x": object()})
        assert len(store.events()) == 3  # the failed write left nothing


@pytest.mark.parametrize(("key", "expected"), [
    ("", "empty"),
    ("x" * 201, "201 characters long; at most 200"),
    ("a\nb", r"control character \('\\n'\) at position 2"),
    ("\x00", "control character"),
    ("a\x7f", "control character"),
    ("\x85", "control character"),
    ("a\udcff", "not UTF-8"),
])
def test_invalid_keys_are_refused_with_the_reason(tmp_path: Path, key: str, expected: str) -> None:
    with open_store(tmp_path) as store:
        with pytest.raises(StoreError, match=expected):
            store.claim_emit(key, "e", "r", "t")
        with pytest.raises(StoreError, match=expected):
            store.get_emit(key)
        assert store.claim_emit("y" * 200, "e", "r", "t").new  # the limit itself is fine
        assert store.claim_emit("naïve key/with spaces:ok", "e", "r", "t").new


# -- what a user can get wrong ---------------------------------------------------------


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    db_path(tmp_path).parent.mkdir()
    notes = b"these are my notes, not a database\n" * 200
    db_path(tmp_path).write_bytes(notes)
    with pytest.raises(StoreError) as err:
        open_store(tmp_path)
    assert str(db_path(tmp_path)) in str(err.value) and "not an SQLite database" in str(err.value)
    assert db_path(tmp_path).read_bytes() == notes  # left as it was


def test_a_lock_held_past_the_timeout(tmp_path: Path) -> None:
    with open_store(tmp_path, busy_timeout=0.2) as store:
        holder = raw(tmp_path)
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"is busy: another process kept it locked \(this one waits up to 0\.2 s"):
            store.claim_emit("k", "e", "r", "t")
        assert time.monotonic() - started >= 0.15
        assert store.get_emit("k") is None  # readers are not blocked by the writer (WAL)
        holder.execute("ROLLBACK")
        assert store.claim_emit("k", "e", "r", "t").new


def test_a_file_where_the_store_directory_should_be(tmp_path: Path) -> None:
    (tmp_path / ".chainlang").write_text("x")
    with pytest.raises(StoreError, match=r"\.chainlang is a file.*move the file away"):
        open_store(tmp_path)


def test_store_urls(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    with open_store(tmp_path, "sqlite:///other/store.db") as store:  # relative to the root
        store.claim_emit("k", "e", "r", "t")
        assert store.path == tmp_path / "other" / "store.db"
    assert (tmp_path / "other" / "store.db").is_file() and not db_path(tmp_path).exists()
    with pytest.raises(StoreError, match="directory is missing"):
        open_store(tmp_path, "sqlite:///missing-dir/store.db")
    with pytest.raises(StoreError, match="not supported") as err:  # PostgreSQL: tests/test_store_postgres.py
        open_store(tmp_path, "postgresql+asyncpg://me:secret@db.example/chainlang")
    assert "secret" not in str(err.value)
    with pytest.raises(StoreError, match="names no file"):
        open_store(tmp_path, "sqlite://")


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_emit("k")


def test_importing_the_package_does_not_load_sqlalchemy() -> None:
    code = "import sys, chainlang.store, chainlang.cli; assert 'sqlalchemy' not in sys.modules, 'loaded'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr


# -- processes and crashes -------------------------------------------------------------

CLAIMER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from chainlang.store import open_store

    root, name, start, count = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    with open_store(root) as store:  # two children started together create the schema together
        time.sleep(max(0.0, start - time.time()))
        for i in range(count):
            claim = store.claim_emit(f"key-{i}", "tick", f"{name}-{i}", f"runs/{name}-{i}.jsonl")
            if claim.new and "finish" in sys.argv[5:]:
                store.finish_emit(claim.key, "ok" if i % 2 else "failed")
            print(json.dumps([claim.key, claim.new, claim.run_id]), flush=True)
""")


def start_claimer(root: Path, name: str, start: float, count: int, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", CLAIMER, str(root), name, str(start), str(count), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_processes_claiming_the_same_keys_each_key_is_won_once(tmp_path: Path) -> None:
    start = time.time() + 0.8  # both have opened the store by then
    children = {name: start_claimer(tmp_path, name, start, 50) for name in ("p1", "p2")}
    results: dict[str, list[tuple[str, bool, str]]] = {}
    for name, child in children.items():
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        results[name] = [tuple(json.loads(line)) for line in out.splitlines()]
    won = {name: {key for key, new, _ in rows if new} for name, rows in results.items()}
    assert won["p1"].isdisjoint(won["p2"])
    assert won["p1"] | won["p2"] == {f"key-{i}" for i in range(50)}
    winner_run = {key: run for rows in results.values() for key, new, run in rows if new}
    for rows in results.values():  # the loser of a key was told the winner's run
        assert all(run == winner_run[key] for key, _, run in rows)
    con = raw(tmp_path)
    assert dict(con.execute("SELECT key, run_id FROM emits")) == winner_run
    assert con.execute("SELECT COUNT(*) FROM event_log WHERE kind = 'emit_claimed'").fetchone()[0] == 50
    assert con.execute("SELECT COUNT(*) FROM chainlang_schema").fetchone()[0] == SCHEMA_VERSION


def test_a_killed_process_leaves_every_committed_claim_whole(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    child = start_claimer(tmp_path, "victim", 0.0, 100_000, "finish")
    assert child.stdout is not None
    committed = []
    for line in child.stdout:
        committed.append(json.loads(line)[0])
        if len(committed) == 40:
            break
    time.sleep(0.05)  # let it be somewhere inside its next transactions
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL

    con = raw(tmp_path)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    emits = {row[0]: row for row in con.execute(
        "SELECT key, event, run_id, transcript, status, created_at, finished_at FROM emits")}
    assert set(committed) <= set(emits)
    log = con.execute("SELECT kind, subject, data FROM event_log ORDER BY seq").fetchall()
    claimed = {subject: json.loads(data) for kind, subject, data in log if kind == "emit_claimed"}
    finished = {subject: json.loads(data) for kind, subject, data in log if kind == "emit_finished"}
    assert len(claimed) == sum(1 for kind, _, _ in log if kind == "emit_claimed")
    assert set(claimed) == set(emits)  # a claim's row and its log entry are committed together
    for key, event, run_id, transcript, status, created_at, finished_at in emits.values():
        assert claimed[key] == {"event": event, "run_id": run_id, "transcript": transcript}
        assert created_at and event == "tick" and run_id == "victim-" + key.split("-")[1]
        if status == "started":
            assert finished_at is None and key not in finished
        else:
            assert finished_at is not None and finished[key] == {"status": status}
    with open_store(tmp_path) as store:  # and the store goes on
        assert store.claim_emit("after-the-crash", "e", "r", "t").new


def test_a_full_store_refuses_the_change_and_keeps_what_it_had(tmp_path: Path) -> None:
    # SQLite's "database or disk is full", made by capping the file's pages: the change is
    # refused with a message that says so, and nothing committed before is lost
    from sqlalchemy import event

    store = open_store(tmp_path)
    try:
        store.claim_emit("before", "order.created", "run-0", "runs/run-0.jsonl")

        @event.listens_for(store._engine, "connect")
        def _cap(dbapi_conn: object, _record: object) -> None:
            cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count = {pages}")
            cursor.close()

        store._engine.dispose()  # new connections get the cap
        big = "x" * 200_000
        with pytest.raises(StoreError, match="the disk is full"):
            store.claim_emit("after", "order.created", "run-1", "runs/run-1.jsonl", {"blob": big})
    finally:
        store.close()
    with open_store(tmp_path) as again:
        assert again.get_emit("after") is None
        claim = again.get_emit("before")
        assert claim is not None and claim.run_id == "run-0"


def test_emit_batch_claims_and_finishes_in_one_transaction(tmp_path: Path) -> None:
    # serve's group commit: the same answers and log as claim_emit / finish_emit one by one
    with open_store(tmp_path) as store:
        store.claim_emit("old", "order.created", "run-0", "t0", {"n": 0})
        answers = store.emit_batch(
            [("a", "order.created", "run-1", "t1", {"n": 1}), ("old", "order.created", "run-x", "tx", None),
             ("a", "order.created", "run-2", "t2", {"n": 2}), ("b", "order.created", "run-3", "t3", ["\ud800"])],
            [("old", "ok")])
        assert [(c.key, c.new, c.run_id) for c in answers] == [("a", True, "run-1"), ("old", False, "run-0"),
                                                                ("a", False, "run-1"), ("b", True, "run-3")]
        assert answers[1].status == "started" and answers[1].data == {"n": 0}  # read before the finishes
        store.emit_batch([], [("a", "failed"), ("b", "ok"), ("never", "ok")])
        got = {k: store.get_emit(k) for k in ("old", "a", "b")}
        assert {k: (c.status, c.data) for k, c in got.items() if c} == {
            "old": ("ok", {"n": 0}), "a": ("failed", {"n": 1}), "b": ("ok", ["\ud800"])}
        assert store.get_emit("never") is None
        kinds = [(e["kind"], e["subject"]) for e in store.events()]
        assert kinds == [("emit_claimed", "old"), ("emit_claimed", "a"), ("emit_claimed", "b"),
                         ("emit_finished", "old"), ("emit_finished", "a"), ("emit_finished", "b")]
        with pytest.raises(StoreError, match="control character"):
            store.emit_batch([("bad\nkey", "e", "r", "t", None)], [])
