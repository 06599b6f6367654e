"""The store's tables and the migrations that build them, one version at a time.

The tables below are the current schema, used by the queries in `store.py`. A store
records in `chainlang_schema` one row per migration applied (its version and when), so
the newest row is the store's version. `migrate` applies the missing migrations in
order, each in its own write transaction that re-reads the version first: two processes
opening a new store at once apply each migration once. Only portable DDL is used (no
PRAGMA user_version), so the same migrations run on PostgreSQL: there the autoincrement
keys (`sqlite_autoincrement`) are sequences, and version 4's full-text indexes are GIN
indexes (`postgres.py`) instead of FTS5 tables.

To change the schema, append a migration; never edit one that has shipped. A migration
creates its tables from its own frozen definitions (`_V1`) or names the current tables it
creates (`_v2`), never "all tables": a new store must walk the same path as an old one.
When a later migration alters `tasks` or `task_runs`, first give `_v2` its own frozen
copy of their version 2 definitions, as `_v1` has of `emits` and `event_log`.

Version 1: `emits` and `event_log`. Version 2 adds `tasks` (hooks and schedules, their
status, failures in a row and lease) and `task_runs` (one row per firing of a task).
Version 3 adds `emits.data`: the event's payload, so that an emit whose process died
before its transcript began can still be fired (by the next serve). Version 4 adds the
threads, their events, the journal and the knowledge of §13, with FTS5 indexes on SQLite.
Version 5 adds `waits`: the runs waiting inside (§15), and how each wait was settled.
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

__all__ = ["EMITS", "EVENT_LOG", "JOURNAL", "KNOWLEDGE", "METADATA", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION",
           "TASKS", "TASK_RUNS", "THREADS", "THREAD_EVENTS", "WAITS",
           "Migration", "NewerSchema", "append_event", "migrate", "now", "read_version", "to_json", "versioned_update"]

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


# Version 4 (LANGUAGE.md §13): threads, what happened in them, the journal and the knowledge
# organized from it. One row per thread; `version` grows with every change of the row.
THREADS = Table(
    "threads", METADATA,
    Column("id", Text, primary_key=True),
    Column("summary", Text, nullable=False, server_default=text("''")),
    Column("status", Text, nullable=False),  # active | archived
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("version", Integer, nullable=False),
)

# Append-only: each step result of a run attached to a thread (and named values), in order.
THREAD_EVENTS = Table(
    "thread_events", METADATA,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("thread_id", Text, ForeignKey("threads.id"), nullable=False),
    Column("at", Text, nullable=False),
    Column("run_id", Text, nullable=True),
    Column("step", Text, nullable=True),
    Column("event", Text, nullable=False),  # the event whose result this is (or `value` for a named value)
    Column("key", Text, nullable=True),  # a named value's name
    Column("result", Text, nullable=False),  # JSON
    Index("thread_events_by_thread", "thread_id", "event", "seq"),
    sqlite_autoincrement=True,
)

# The journal (memory.append): an entry per call, with the keywords extracted from it.
# `origin` is the step attempt's idempotency key: an entry is appended once, even on resume.
JOURNAL = Table(
    "journal", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("at", Text, nullable=False),  # the moment, UTC (sorts as text)
    Column("day", Text, nullable=False),  # YYYY-MM-DD on the run's clock
    Column("content", Text, nullable=False),
    Column("keywords", Text, nullable=False),  # JSON list
    Column("origin", Text, nullable=True, unique=True),
    Index("journal_by_day", "day"),
    sqlite_autoincrement=True,
)

# What memory.digest organized from the journal: people, projects, decisions, preferences.
KNOWLEDGE = Table(
    "knowledge", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", Text, nullable=False),  # people | project | decision | preference
    Column("name", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("keywords", Text, nullable=False),  # JSON list
    Column("sources", Text, nullable=False),  # JSON list of journal ids
    Column("updated_at", Text, nullable=False),
    UniqueConstraint("kind", "name", name="knowledge_once"),
    sqlite_autoincrement=True,
)


# One row per wait of a run (§15), keyed by (run, step): the run registers it before it
# waits; a delivery, a deadline or a cancel settles it once (status goes from 'waiting' to
# 'delivered', 'timed_out' or 'cancelled' in one compare-and-set), and the run marks it
# `finished_at` once its transcript recorded `wait_finished`. Events find their waits through
# the event name, then the equality key of `where` (`match_field == frozen match_value`).
WAITS = Table(
    "waits", METADATA,
    Column("run_id", Text, primary_key=True),
    Column("step", Text, primary_key=True),
    Column("event", Text, nullable=False),
    Column("match_field", Text, nullable=True),  # a payload field `where` compares for equality
    Column("match_value", Text, nullable=True),  # JSON: the value it must equal (frozen)
    Column("where_text", Text, nullable=True),
    Column("frozen", Text, nullable=False),  # JSON: the run's values `where` reads, by reference text
    Column("question_id", Text, nullable=True),  # user.ask
    Column("question", Text, nullable=True),  # JSON: {id, question, choices?, schema?}
    Column("deadline", Text, nullable=True),  # ISO 8601 UTC; None: no timeout
    Column("transcript", Text, nullable=False),
    Column("chain", Text, nullable=True),
    Column("engine", Text, nullable=False),  # 'embedded' | 'temporal'
    Column("status", Text, nullable=False),  # waiting | delivered | timed_out | cancelled
    Column("payload", Text, nullable=True),  # JSON: the event's payload (masked), once delivered
    Column("emit_id", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("settled_at", Text, nullable=True),
    Column("finished_at", Text, nullable=True),  # the run recorded wait_finished
    Index("waits_by_event", "event", "status", "match_field", "match_value"),
    Index("waits_by_deadline", "status", "deadline"),
    Index("waits_by_question", "question_id"),
    Index("waits_settled", "status", "finished_at"),  # settled (not waiting) and not finished: runs to resume
)


def now() -> str:
    """The stored form of a moment: ISO 8601 in UTC, to the microsecond (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Migration(NamedTuple):
    version: int
    description: str
    apply: Callable[[Connection], None]


def to_json(value: object, what: str) -> str:
    """The stored form of a JSON value: sorted keys, ASCII (a lone surrogate, valid in JSON,
    cannot be UTF-8 text in the database), no NaN; StoreError naming `what` otherwise."""
    try:
        return json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{what} must be JSON ({e})") from None


def versioned_update(conn: Connection, table: Table, row: Any, what: str, path: Any, **values: Any) -> int:
    """Update a row (of `tasks` or `threads`) read in this transaction, only if no one changed
    it since (its `version`); the new version. `what` names the row in the error."""
    version = int(row.version) + 1
    done = conn.execute(table.update().where(table.c.id == row.id, table.c.version == row.version)
                        .values(version=version, **values))
    if done.rowcount != 1:
        raise StoreError(f"the {what} {row.id!r} in {path} was changed by another process meanwhile; try again")
    return version


def append_event(conn: Connection, at: str, kind: str, subject: str, data: dict[str, Any]) -> None:
    """Append one event to the log, in the caller's transaction."""
    encoded = to_json(data, f"the data of a {kind!r} event")
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


def _v5(conn: Connection) -> None:
    METADATA.create_all(conn, tables=[WAITS], checkfirst=False)


def _v4(conn: Connection) -> None:
    METADATA.create_all(conn, tables=[THREADS, THREAD_EVENTS, JOURNAL, KNOWLEDGE], checkfirst=False)
    if conn.dialect.name == "sqlite":  # full-text search with BM25 ranking (FTS5), kept in step by triggers
        for statement in _FTS:
            conn.exec_driver_sql(statement)
    elif conn.dialect.name == "postgresql":  # GIN indexes on tsvector expressions (see postgres.py)
        from .postgres import FTS

        for statement in FTS:
            conn.exec_driver_sql(statement)
    else:
        raise StoreError(f"no full-text search for {conn.dialect.name} stores: only SQLite and PostgreSQL are supported")


# The full-text indexes of the journal and the knowledge (SQLite FTS5, external content:
# the text is stored once, in the table; the index follows it through triggers).
_FTS = [
    "CREATE VIRTUAL TABLE journal_fts USING fts5(content, keywords, content='journal', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER journal_fts_insert AFTER INSERT ON journal BEGIN "
    "INSERT INTO journal_fts(rowid, content, keywords) VALUES (new.id, new.content, new.keywords); END",
    "CREATE TRIGGER journal_fts_delete AFTER DELETE ON journal BEGIN "
    "INSERT INTO journal_fts(journal_fts, rowid, content, keywords) VALUES ('delete', old.id, old.content, "
    "old.keywords); END",
    "CREATE VIRTUAL TABLE knowledge_fts USING fts5(name, content, keywords, content='knowledge', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_fts_insert AFTER INSERT ON knowledge BEGIN "
    "INSERT INTO knowledge_fts(rowid, name, content, keywords) VALUES (new.id, new.name, new.content, "
    "new.keywords); END",
    "CREATE TRIGGER knowledge_fts_delete AFTER DELETE ON knowledge BEGIN "
    "INSERT INTO knowledge_fts(knowledge_fts, rowid, name, content, keywords) VALUES ('delete', old.id, "
    "old.name, old.content, old.keywords); END",
    "CREATE TRIGGER knowledge_fts_update AFTER UPDATE ON knowledge BEGIN "
    "INSERT INTO knowledge_fts(knowledge_fts, rowid, name, content, keywords) VALUES ('delete', old.id, "
    "old.name, old.content, old.keywords); "
    "INSERT INTO knowledge_fts(rowid, name, content, keywords) VALUES (new.id, new.name, new.content, "
    "new.keywords); END",
]


MIGRATIONS: list[Migration] = [
    Migration(1, "emits (the ids of `chainlang emit --id`) and the append-only event log", _v1),
    Migration(2, "tasks (hooks and schedules, with their leases) and task_runs (their firings)", _v2),
    Migration(3, "emits.data (an emit's payload, to fire it after a crash before its transcript began)", _v3),
    Migration(4, "threads, thread_events, journal and knowledge (with their full-text indexes)", _v4),
    Migration(5, "waits (the runs waiting for an event or a deadline, and their deliveries)", _v5),
]

SCHEMA_VERSION = MIGRATIONS[-1].version


class NewerSchema(Exception):
    """The store was written by a chainlang that knows more migrations than this one."""

    def __init__(self, found: int) -> None:
        super().__init__(found)
        self.found = found


class NotAStore(Exception):
    """The database is not a chainlang store (another program's), or one that lost tables."""


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
        if before == 0 and conn.dialect.name == "sqlite":  # (a PostgreSQL database may hold other tables too)
            others = sorted(t for t in inspect(conn).get_table_names() if not t.startswith("sqlite_"))
            if others:
                raise NotAStore(f"it is an SQLite database with other tables ({', '.join(others[:5])}) and none "
                                "of a chainlang store's")
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
    with read() as conn:  # a store whose tables were dropped (by hand, a tool) fails every call: say it once
        present = set(inspect(conn).get_table_names())
    missing = [t.name for t in METADATA.sorted_tables if t.name not in present]
    if missing:
        raise NotAStore(f"it lacks the tables {', '.join(missing)} (its schema version says {max(before, 1)})")
    return before


def _pending(version: int) -> Iterator[Migration]:
    return (m for m in MIGRATIONS if m.version > version)
