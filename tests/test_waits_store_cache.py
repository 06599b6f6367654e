"""The store an emit delivers to waits through (runtime/emit.py `waits_store`): kept open for
the process, opened again when its file was replaced; none made for a project without one."""

from __future__ import annotations

import os
from pathlib import Path

from chainlang.runtime.deliver import waits_store
from chainlang.runtime.emit import deliver_to_waits
from chainlang.store import open_store
from chainlang.tasks.stored import STORE_FILE

from tests.test_wait_delivery import row


def test_a_project_without_a_store_gets_none_from_an_emit(tmp_path: Path) -> None:
    assert deliver_to_waits(tmp_path, "approval.given", {"draft_id": "d-1"}, "e-1") == []
    assert not (tmp_path / STORE_FILE).exists()  # nothing waits without a store: none is made for it


def test_the_store_is_kept_open_and_opened_again_when_its_file_is_replaced(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.open_wait(row("r1", key="d-1"))
    first = waits_store(tmp_path)
    assert first is not None and waits_store(tmp_path) is first  # one store for the process
    assert [r["run_id"] for r in deliver_to_waits(tmp_path, "approval.given", {"draft_id": "d-1"}, "e-1")] == ["r1"]

    # another store file takes its place (a restored backup, a project made anew)
    os.rename(tmp_path / STORE_FILE, tmp_path / "old.db")
    with open_store(tmp_path) as store:
        store.open_wait(row("r2", key="d-2"))
    again = waits_store(tmp_path)
    assert again is not None and again is not first
    assert [r["run_id"] for r in deliver_to_waits(tmp_path, "approval.given", {"draft_id": "d-2"}, "e-2")] == ["r2"]
