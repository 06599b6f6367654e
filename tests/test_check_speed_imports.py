"""What a cold `chainlang check` avoids, and the collector pause around loading and checking:
behaviour, not timing."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chainlang.load.gc_pause import gc_paused
from chainlang.store import StoreError
from chainlang.tasks.stored import store_exists, stored_hook_files

_PROBE = """
import sys
from chainlang.pipeline import check_files
from chainlang.tasks.stored import stored_hook_files
result = check_files([sys.argv[1]], stored_hooks=stored_hook_files)
assert not result.diagnostics, result.diagnostics
print(sorted(m for m in ("sqlalchemy", "chainlang.store", "jsonschema") if m in sys.modules))
"""


def test_checking_a_project_without_a_store_imports_neither_sqlalchemy_nor_the_store(tmp_path: Path) -> None:
    chain = tmp_path / "a.chain.yaml"
    chain.write_text("steps:\n  - tools.now\n  - user.notify: {message: \"It is {tools.now.time}\"}\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", _PROBE, str(chain)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_dangling_link_at_the_store_path_is_still_an_error(tmp_path: Path) -> None:
    (tmp_path / ".chainlang").mkdir()
    os.symlink(tmp_path / "gone.db", tmp_path / ".chainlang" / "store.db")
    with pytest.raises(StoreError, match="symbolic link"):
        store_exists(tmp_path)
    from chainlang.errors import UsageError

    with pytest.raises(UsageError, match="symbolic link"):
        stored_hook_files(tmp_path)


def test_no_store_file_means_no_store_and_no_stored_hooks(tmp_path: Path) -> None:
    assert store_exists(tmp_path) is False
    assert stored_hook_files(tmp_path) == []


def test_gc_paused_turns_the_collector_back_on_only_when_it_was_on() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves it to the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # someone else turned it off: left off
    finally:
        gc.enable()


def test_gc_paused_restores_the_collector_when_the_body_raises() -> None:
    @gc_paused()
    def failing() -> None:
        assert not gc.isenabled()
        raise ValueError("boom")

    with pytest.raises(ValueError):
        failing()
    with pytest.raises(ValueError):
        failing()  # a decorated function pauses afresh on every call
    assert gc.isenabled()
