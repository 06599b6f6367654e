"""The store's tables and the migrations that build them, one version at a time.

The tables below are the current schema, used by the queries in `store.py`. A store
records in `chainlang_schema` one row per migration applied (its version and when), so
the newest row is the store's version. `migrate` applies the missing migrations in
order, each in its own write transaction that re-reads the version first: two processes
opening a new store at once apply each migration once. Only portable DDL is used (no
PRAGMA user_version), so the same migrations can later run on PostgreSQL.

To change the schema, append a migration; never edit one that has shipped. When a later
migration alters `emits` or `event_log`, first give `_v1` its own copy of the version 1
definitions, so that a new store walks the same path as an old one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import NamedTuple

from sqlalchemy import Column, Connection, Integer, MetaData, Table, Text, func, inspect, insert, select

__all__ = ["EMITS", "EVENT_LOG", "METADATA", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "Migration",
           "NewerSchema", "migrate", "now", "read_version"]

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


def now() -> str:
    """The stored form of a moment: ISO 8601 in UTC, to the microsecond (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Migration(NamedTuple):
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1(conn: Connection) -> None:
    METADATA.create_all(conn, tables=[EMITS, EVENT_LOG], checkfirst=False)


MIGRATIONS: list[Migration] = [
    Migration(1, "emits (the ids of `chainlang emit --id`) and the append-only event log", _v1),
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
