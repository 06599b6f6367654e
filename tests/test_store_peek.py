"""Asking an SQLite store whether any stored hook is active, with the standard library
alone (`chainlang/store/peek.py`): every run, emit and check of a project with a store
asks, and opening the store to ask costs SQLAlchemy's imports. The answer must be the
store's own (`list_tasks(status="active", kind="hook")`), and None, so that the store is
opened as before, whenever the file is not a store of exactly this version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chainlang.store import open_store
from chainlang.store.peek import SCHEMA_VERSION, has_active_hooks, has_waits_for
from chainlang.store.schema import SCHEMA, SCHEMA_VERSION as WRITTEN_VERSION, TASKS, WAITS
from chainlang.store.waits import WaitRow


def test_the_written_out_names_are_the_schemas() -> None:
    assert SCHEMA_VERSION == WRITTEN_VERSION
    assert (SCHEMA.name, TASKS.name, WAITS.name) == ("chainlang_schema", "tasks", "waits")
    assert {"kind", "status"} <= set(TASKS.c.keys()) and "version" in SCHEMA.c.keys()
    assert {"event", "status"} <= set(WAITS.c.keys())


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("folder", ["project", "a ?#% b"])  # as_uri must escape what a URI reads
def test_the_answer_follows_the_hooks_state(tmp_path: Path, folder: str) -> None:
    root = tmp_path / folder
    root.mkdir()
    file = root / ".chainlang" / "store.db"
    with open_store(root) as store:
        pass
    assert has_active_hooks(file) is False  # a new store
    with open_store(root) as store:
        store.add_task("schedule", {"type": "delay"}, id="later")
        store.add_task("hook", {"trigger": "x"}, id="waiting", status="pending")
    assert has_active_hooks(file) is False  # neither a schedule nor a hook not yet active counts
    with open_store(root) as store:
        store.add_task("hook", {"trigger": "x"}, id="h")
    assert has_active_hooks(file) is True
    with open_store(root) as store:
        store.cancel_task("h")
    assert has_active_hooks(file) is False


def test_the_answer_about_waits_names_the_event_and_follows_the_wait(tmp_path: Path) -> None:
    file = tmp_path / ".chainlang" / "store.db"
    with open_store(tmp_path) as store:
        pass
    assert has_waits_for(file, "approval.given") is False
    with open_store(tmp_path) as store:
        store.open_wait(WaitRow(run_id="r1", step="2", event="approval.given", where=None, frozen={}, deadline=None,
                                transcript="runs/r1.jsonl", chain="c", engine="embedded", status="waiting",
                                created_at=""))
    assert has_waits_for(file, "approval.given") is True
    assert has_waits_for(file, "approval.denied") is False  # another event: nothing waits for it
    with open_store(tmp_path) as store:
        store.settle_wait("r1", "2", "cancelled")
    assert has_waits_for(file, "approval.given") is False  # settled: it waits no more


def test_asking_changes_nothing_on_disk(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    with open_store(tmp_path, f"sqlite:///{file}") as store:
        store.add_task("hook", {"trigger": "x"}, id="h")
    before = _files(tmp_path)
    assert has_active_hooks(file) is True
    assert _files(tmp_path) == before


def test_a_store_of_another_version_is_left_to_the_store(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    with open_store(tmp_path, f"sqlite:///{file}"):
        pass
    with sqlite3.connect(file) as conn:  # as a newer chainlang would leave it
        conn.execute("INSERT INTO chainlang_schema VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    conn.close()
    assert has_active_hooks(file) is None
    with sqlite3.connect(file) as conn:  # as an older one would (version 1 had no tasks table)
        conn.execute("DELETE FROM chainlang_schema WHERE version > 1")
        conn.execute("DROP TABLE task_runs")
        conn.execute("DROP TABLE tasks")
    conn.close()
    assert has_active_hooks(file) is None


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_a_store_is_left_to_the_store(tmp_path: Path, content: bytes) -> None:
    file = tmp_path / "store.db"
    file.write_bytes(content)
    assert has_active_hooks(file) is None
    assert file.read_bytes() == content


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    assert has_active_hooks(tmp_path / "none.db") is None
    assert not list(tmp_path.iterdir())
