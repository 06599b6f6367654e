"""One question a run asks of an SQLite store with the standard library alone: is any
stored hook active? Every run, emit and check of a project with a store must know (the
hooks of `task.register` are in force for all of them, LANGUAGE.md §12), and opening the
store to ask costs SQLAlchemy's and jsonschema's imports, ~0.5 s of a cold command. Most
stores hold no active hook; then the store is never opened.

The answer is given only for a store of exactly the schema version this chainlang writes.
For anything else (an older store still to migrate, a newer one, a file that is not a
store or cannot be opened) it is None, and the caller opens the store as usual, which
migrates it or explains what is wrong.

The file is opened with `mode=rw`, which never creates one: asking never creates a store.
Nothing is written but what SQLite does when its last connection closes (a checkpoint of
the write-ahead log, as when the store closes). `mode=ro` would leave the log's two files
behind after every run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["SCHEMA_VERSION", "has_active_hooks", "has_waits_for"]

# schema.SCHEMA_VERSION and the names of the tables and columns read below, written out here
# so that asking imports no SQLAlchemy; tests/test_store_peek.py keeps them equal
SCHEMA_VERSION = 5
_VERSION = "SELECT (SELECT max(version) FROM chainlang_schema), "
_ACTIVE_HOOKS = _VERSION + "EXISTS (SELECT 1 FROM tasks WHERE kind = 'hook' AND status = 'active')"
_WAITS_FOR = _VERSION + "EXISTS (SELECT 1 FROM waits WHERE event = ? AND status = 'waiting')"


def has_active_hooks(path: Path, busy_timeout: float = 10.0) -> bool | None:
    """Whether the SQLite store at `path` holds an active stored hook; None when this
    cannot be told without opening the store (see the module's text)."""
    return _ask(path, _ACTIVE_HOOKS, (), busy_timeout)


def has_waits_for(path: Path, event: str, busy_timeout: float = 10.0) -> bool | None:
    """Whether a run waits for `event` in the SQLite store at `path` (LANGUAGE.md §15);
    None when this cannot be told without opening the store."""
    return _ask(path, _WAITS_FOR, (event,), busy_timeout)


def _ask(path: Path, query: str, params: tuple[str, ...], busy_timeout: float) -> bool | None:
    try:
        uri = Path(path).resolve().as_uri() + "?mode=rw"  # as_uri escapes ? # % in the file's name; rw never creates
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout)
    except (sqlite3.Error, OSError, ValueError):
        return None
    try:
        version, found = conn.execute(query, params).fetchone()
    except sqlite3.Error:
        return None  # no such table (an older or a foreign file), not a database, locked past the timeout
    finally:
        conn.close()
    if version != SCHEMA_VERSION:
        return None
    return bool(found)
