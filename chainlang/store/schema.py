"""The store's tables and the migrations that build them, one version at a time.

The tables below are the current schema, used by the queries in `store.py`. A store
records in `chainlang_schema` one row per migration applied (its version and when), so
the newest row is the store's version. `migrate` applies the missing migrations in
order, each in its own write transaction that re-reads the version first: two processes
opening a new store at once apply each migration once. Only portable DDL is used (no
PRAGMA user_version), so the same migrations can later run on PostgreSQL.

To change the schema, append a migration; never edit one that has shipped. A migration
creates its tables from its own frozen definitions (`_V1`) or names the current tables it
creates (`_v2`), never "all tables": a new store must walk the same path as an old one.
When a later migration alters `tasks` or `task_runs`, first give `_v2` its own frozen
copy of their version 2 definitions, as `_v1` has of `emits` and `event_log`.

Version 1: `emits` and `event_log`. Version 2 adds `tasks` (hooks and schedules, their
status, failures in a row and lease) and `task_runs` (one row per firing of a task).
Version 3 adds `emits.data`: the event's payload, so that an emit whose process died
before its transcript began can still be fired (by the next serve).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
import json
from datetime import datetime, timezone
from typing import Any, NamedTuple

from sqlalchemy import (Column, Connection, ForeignKey, Index, Integer, MetaData, Table, Text, UniqueConstraint,
                        func, inspect, insert, select, text)

from .base import StoreError

__all__ = ["EMITS", "EVENT_LOG", "METADATA", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "TASKS", "TASK_RUNS",
           "Migration", "NewerSchema", "append_event", "migrate", "now", "read_version"]

METADATA = MetaData()

SCHEMA = Table(
    "chainlang_schema", METADATA,
    Column("version", Integer, nullable=False),
    Column("applied_at", Text, nullable=False),
)

# One row per `chainlang emit --id KEY`: the run the key started, so a repeat is skipped.
EMITS = Table(
    "emits", METADATA,
    Column("key", Text, primary_key=True),
    Column("event", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("transcript", Text, nullable=False),
    Column("status", Text, nullable=False),  # 'started', then the run's final status
    Column("created_at", Text, nullable=False),
    Column("finished_at", Text, nullable=True),
    Column("data", Text, nullable=True),  # JSON: the payload (version 3; None for older rows)
)

# Append-only: rows are inserted, never updated or deleted. `data` is JSON text.
EVENT_LOG = Table(
    "event_log", METADATA,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("at", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("data", Text, nullable=False),
    sqlite_autoincrement=True,  # a seq is never reused, even after the newest row is gone
)

# One row per task; every change of a row adds 1 to `version` (and is checked against it).
TASKS = Table(
    "tasks", METADATA,
    Column("id", Text, primary_key=True),
    Column("kind", Text, nullable=False),  # 'hook' (task.register) or 'schedule' (task.schedule)
    Column("definition", Text, nullable=False),  # JSON: the hook or schedule as given
    Column("status", Text, nullable=False),  # pending | active | completed | archived | dead
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("next_run", Text, nullable=True),
    Column("last_run", Text, nullable=True),
    Column("failures", Integer, nullable=False, server_default=text("0")),  # failed runs in a row
    Column("origin", Text, nullable=True),  # the run (and step) that created the task
    Column("lease_owner", Text, nullable=True),
    Column("lease_until", Text, nullable=True),
    Column("version", Integer, nullable=False),
    Index("tasks_due", "status", "kind", "next_run"),
)

# One row per firing of a task: one due moment of a task is recorded (and so run) once.
TASK_RUNS = Table(
    "task_runs", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_id", Text, ForeignKey("tasks.id"), nullable=False),
    Column("run_id", Text, nullable=False),
    Column("transcript", Text, nullable=False),
    Column("due_at", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("finished_at", Text, nullable=True),
    Column("status", Text, nullable=False),  # 'running', then the run's final status
    Column("error", Text, nullable=True),  # JSON
    UniqueConstraint("task_id", "due_at", name="task_runs_once"),
    sqlite_autoincrement=True,
)


def now() -> str:
    """The stored form of a moment: ISO 8601 in UTC, to the microsecond (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Migration(NamedTuple):
    version: int
    description: str
    apply: Callable[[Connection], None]


def append_event(conn: Connection, at: str, kind: str, subject: str, data: dict[str, Any]) -> None:
    """Append one event to the log, in the caller's transaction."""
    try:
        encoded = json.dumps(data, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"the data of a {kind!r} event must be JSON ({e})") from None
    conn.execute(insert(EVENT_LOG).values(at=at, kind=kind, subject=subject, data=encoded))


# Version 1's tables as they shipped, frozen: later changes of EMITS or EVENT_LOG above
# are made by later migrations, never here.
_V1 = MetaData()
Table(
    "emits", _V1,
    Column("key", Text, primary_key=True),
    Column("event", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("transcript", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("finished_at", Text, nullable=True),
)
Table(
    "event_log", _V1,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("at", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("data", Text, nullable=False),
    sqlite_autoincrement=True,
)


def _v1(conn: Connection) -> None:
    _V1.create_all(conn, checkfirst=False)


def _v2(conn: Connection) -> None:
    METADATA.create_all(conn, tables=[TASKS, TASK_RUNS], checkfirst=False)


def _v3(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE emits ADD COLUMN data TEXT"))


MIGRATIONS: list[Migration] = [
    Migration(1, "emits (the ids of `chainlang emit --id`) and the append-only event log", _v1),
    Migration(2, "tasks (hooks and schedules, with their leases) and task_runs (their firings)", _v2),
    Migration(3, "emits.data (an emit's payload, to fire it after a crash before its transcript began)", _v3),
]

SCHEMA_VERSION = MIGRATIONS[-1].version


class NewerSchema(Exception):
    """The store was written by a chainlang that knows more migrations than this one."""

    def __init__(self, found: int) -> None:
        super().__init__(found)
        self.found = found


def read_version(conn: Connection) -> int:
    """The store's schema version; 0 for a store with no tables yet."""
    if not inspect(conn).has_table(SCHEMA.name):
        return 0
    return int(conn.execute(select(func.coalesce(func.max(SCHEMA.c.version), 0))).scalar_one())


def migrate(read: Callable[[], AbstractContextManager[Connection]],
            write: Callable[[], AbstractContextManager[Connection]]) -> int:
    """Bring the store up to `SCHEMA_VERSION`; return the version it had before.

    `read` and `write` open a transaction (a write one takes the write lock at once).
    Raises `NewerSchema` for a store this code must not touch.
    """
    with read() as conn:
        before = read_version(conn)
    if before > SCHEMA_VERSION:
        raise NewerSchema(before)
    for migration in _pending(before):
        with write() as conn:
            current = read_version(conn)  # another process may have applied it meanwhile
            if current > SCHEMA_VERSION:
                raise NewerSchema(current)
            if current >= migration.version:
                continue
            if current == 0:
                SCHEMA.create(conn, checkfirst=False)
            migration.apply(conn)
            conn.execute(insert(SCHEMA).values(version=migration.version, applied_at=now()))
    return before


def _pending(version: int) -> Iterator[Migration]:
    return (m for m in MIGRATIONS if m.version > version)
