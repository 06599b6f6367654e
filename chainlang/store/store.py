"""Opening the project's store, and the operations on it.

SQLite settings and why (set on every connection, since a pool opens several):
- WAL: readers never wait for the writer, and a crash cannot tear a commit;
- synchronous=FULL: a commit is on disk before it returns (WAL's default, NORMAL, can lose
  the last commits on power loss, and "a crash loses nothing committed" is the contract);
- a busy timeout: a second process waits for the write lock instead of failing at once;
- foreign keys on: later tables reference one another.

Transactions: the sqlite3 driver's own BEGIN handling is switched off and SQLAlchemy's
"begin" event emits ours (the recipe of SQLAlchemy's SQLite documentation, "Transactions
with SQLite and the sqlite3 driver"). Write transactions use BEGIN IMMEDIATE, which takes
the write lock before the first read: of two processes claiming one key, the second
waits (busy timeout), then sees the first one's row. A deferred transaction reads first
and must upgrade its lock to write, which SQLite refuses at once, without waiting
(SQLITE_BUSY), when another process wrote in between.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine, Row, create_engine, event, insert, inspect, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url

from .base import EmitClaim, StoreError, check_key, check_store_file
from .base import check_text as _check_text
from . import postgres
from .schema import EMITS, EVENT_LOG, SCHEMA, SCHEMA_VERSION, NewerSchema, NotAStore, migrate, now, read_version
from .schema import to_json
from .schema import append_event as _append
from .memory import MemoryMethods
from .redaction import StoreRedaction, project_secrets
from .tasks import TaskMethods
from .threads import ThreadMethods
from .waits import WaitMethods

__all__ = ["DEFAULT_PATH", "Store", "open_store", "sqlite_path", "store_exists", "store_target"]

DEFAULT_PATH = Path(".chainlang") / "store.db"
_BEGIN = postgres.BEGIN  # execution option: the BEGIN mode of a transaction


def open_store(root: Path, url: str | None = None, *, busy_timeout: float = 10.0,
               secrets: Iterable[str] | None = None) -> Store:
    """Open (creating and migrating if needed) the store of the project at `root`.

    `url` is `[store] url` of chainlang.toml: an SQLite URL, its relative path read from
    `root`, or a PostgreSQL URL (the database must exist; its tables are created).
    `busy_timeout` is how long, in seconds, to wait for another process's lock.
    `secrets` are the values its writes mask (`redaction.py`); None: the project's known
    secrets, read from its chainlang.toml.
    """
    root = Path(root)
    redaction = StoreRedaction(_project_secrets(root) if secrets is None else secrets)
    target: Path | URL
    if url is None:
        path = root / DEFAULT_PATH
        try:
            path.parent.mkdir(exist_ok=True)
        except FileExistsError:
            raise StoreError(f"{path.parent} is a file, but the project's store lives in a directory of that "
                             "name; move the file away") from None
        except OSError as e:
            raise StoreError(f"cannot create {path.parent} for the project's store: {e.strerror}; "
                             f"check that {root} is a writable directory") from e
        target = path
    else:
        target = store_target(root, url)
    if isinstance(target, Path):
        check_store_file(target)
    store = Store(target, busy_timeout, redaction)
    try:
        store._migrate()
    except BaseException:
        store.close()
        raise
    return store


def _project_secrets(root: Path) -> list[str]:
    """The project's known secrets, for the store's redaction; StoreError when its
    chainlang.toml cannot be read (a store that cannot know them is not written)."""
    from chainlang.errors import ConfigError

    try:
        return project_secrets(root)
    except ConfigError as exc:
        raise StoreError(str(exc)) from None


def store_target(root: Path, url: str) -> Path | URL:
    """Where `[store] url` puts the store: an SQLite file (relative paths read from `root`)
    or a PostgreSQL database (its URL, with the psycopg driver)."""
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        raise StoreError("[store] url is not a database URL; write sqlite:///PATH or "
                         "postgresql://USER@HOST:PORT/DATABASE") from None
    database = postgres.postgres_url(parsed)
    return sqlite_path(root, url) if database is None else database


def store_exists(root: Path, url: str | None) -> bool:
    """Whether the project's store has been created (asking never creates it): its file,
    or, on PostgreSQL, its tables in the database."""
    target = root / DEFAULT_PATH if url is None else store_target(root, url)
    if isinstance(target, Path):
        return check_store_file(target)
    engine = postgres.connect(target, 10.0)
    where = postgres.describe(target)
    try:
        with engine.connect() as conn:
            return bool(inspect(conn).has_table(SCHEMA.name))
    except sa_exc.DBAPIError as e:
        raise StoreError(postgres.explain(where, target, str(e.orig), "looking for the store", 10.0)) from e
    finally:
        engine.dispose()


def sqlite_path(root: Path, url: str) -> Path:
    """The file of an SQLite `[store] url`, relative paths read from `root`."""
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        raise StoreError("[store] url is not a database URL; write sqlite:///PATH") from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() != "sqlite" or parsed.get_driver_name() != "pysqlite":
        raise StoreError(f"[store] url {shown}: an SQLite store is sqlite:///PATH, a PostgreSQL one "
                         "postgresql://USER@HOST:PORT/DATABASE")
    if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        raise StoreError(f"[store] url {shown} names no file; write sqlite:///PATH (the store must outlive "
                         "the process)")
    path = Path(parsed.database)
    return path if path.is_absolute() else root / path


class Store(TaskMethods, ThreadMethods, MemoryMethods, WaitMethods):
    """One project's store. Every method runs in one transaction and raises only StoreError.

    The methods on tasks, their leases and runs come from `TaskMethods` (`tasks.py`).
    """

    def __init__(self, path: Path | URL, busy_timeout: float = 10.0, redaction: StoreRedaction | None = None) -> None:
        # every write masks with it (and so may what shows stored rows): see redaction.py
        self.redaction = redaction if redaction is not None else StoreRedaction()
        self.busy_timeout = busy_timeout
        self._closed = False
        self._file: Path | None = None
        self._url: URL | None = None
        if isinstance(path, URL):
            self._url, self.where, self.dialect = path, postgres.describe(path), "postgresql"
            self._engine: Engine = postgres.connect(path, busy_timeout)
            self._writer = self._engine.execution_options(**{_BEGIN: "IMMEDIATE"})
            self._reader: Engine = self._engine.execution_options(isolation_level="REPEATABLE READ")
            return
        self._file, self.where, self.dialect = path, str(path), "sqlite"
        self._engine = create_engine(URL.create("sqlite", database=str(path)),
                                     connect_args={"timeout": busy_timeout})
        self._writer = self._engine.execution_options(**{_BEGIN: "IMMEDIATE"})
        self._reader = self._engine
        millis = max(0, int(busy_timeout * 1000))

        @event.listens_for(self._engine, "connect")
        def _configure(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see "begin" below)
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {millis}")
                _use_wal(cursor, busy_timeout)
                cursor.execute("PRAGMA synchronous = FULL")
                cursor.execute("PRAGMA foreign_keys = ON")
            finally:
                cursor.close()

        @event.listens_for(self._engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get(_BEGIN, 'DEFERRED')}")

    # -- the emits of `chainlang emit --id KEY` ------------------------------------------

    def claim_emit(self, key: str, event: str, run_id: str, transcript: str, data: Any = None) -> EmitClaim:
        """Claim `key` for this run, or return the run that claimed it first (`new=False`).
        `data` (the payload, JSON) is kept, masked (`redaction.data`), so that the emit can
        be fired after a crash; a repeat's `data` is that masked copy."""
        check_key(key)
        _check_text(event=event, run_id=run_id, transcript=transcript)
        encoded = None if data is None else to_json(self.redaction.data(data), "an emit's data")
        with self._write(f"claiming the emit id {key!r}") as conn:
            row = conn.execute(select(EMITS).where(EMITS.c.key == key)).first()
            if row is not None:
                return _claim(row, new=False)
            claim = EmitClaim(new=True, key=key, event=event, run_id=run_id, transcript=transcript,
                              status="started", created_at=now(), finished_at=None, data=data)
            conn.execute(insert(EMITS).values(key=key, event=event, run_id=run_id, transcript=transcript,
                                              status=claim.status, created_at=claim.created_at, data=encoded))
            _append(conn, claim.created_at, "emit_claimed", key,
                    {"event": event, "run_id": run_id, "transcript": transcript})
        return claim

    def finish_emit(self, key: str, status: str) -> None:
        """Record the final status of the run that claimed `key`."""
        check_key(key)
        _check_text(status=status)
        with self._write(f"finishing the emit id {key!r}") as conn:
            at = now()
            done = conn.execute(update(EMITS).where(EMITS.c.key == key).values(status=status, finished_at=at))
            if done.rowcount != 1:
                raise StoreError(f"no emit with id {key!r} in {self.where}: it was never claimed")
            _append(conn, at, "emit_finished", key, {"status": status})

    def emit_batch(self, claims: list[tuple[str, str, str, str, Any]],
                   finishes: list[tuple[str, str]]) -> list[EmitClaim]:
        """Many `claim_emit` (key, event, run_id, transcript, data) and `finish_emit` (key, status)
        calls in one transaction (serve's group commit: one disk sync for all of them).
        Returns the claims' answers in order; a key claimed twice in one batch is new once.
        The finishes are applied after the claims (serve finishes only keys it claimed)."""
        encoded, mask = [], self.redaction.data  # the payloads are kept masked
        for key, name, run_id, transcript, data in claims:
            check_key(key)
            _check_text(event=name, run_id=run_id, transcript=transcript)
            encoded.append(None if data is None else to_json(mask(data), "an emit's data"))
        for key, status in finishes:
            check_key(key)
            _check_text(status=status)
        answers: list[EmitClaim] = []
        # serve's hot path: plain SQL through the driver (SQLAlchemy's statement building cost
        # more than the writes); the statements are portable but for the qmark parameters
        sql = self._sql
        with self._write(f"recording {len(claims)} emit claim(s) and {len(finishes)} end(s)") as conn:
            at = now()
            known: dict[str, EmitClaim] = {}
            keys = [c[0] for c in claims]
            for start in range(0, len(keys), 500):  # bounded IN lists
                chunk = keys[start:start + 500]
                found = conn.exec_driver_sql(sql(
                    "SELECT key, event, run_id, transcript, status, created_at, finished_at, data FROM emits "
                    f"WHERE key IN ({', '.join('?' * len(chunk))})"), tuple(chunk)).all()
                for row in found:
                    known[row.key] = _claim(row, new=False)
            rows, events = [], []
            for (key, name, run_id, transcript, data), text in zip(claims, encoded):
                if key in known:
                    answers.append(known[key])
                    continue
                claim = EmitClaim(new=True, key=key, event=name, run_id=run_id, transcript=transcript,
                                  status="started", created_at=at, finished_at=None, data=data)
                known[key] = EmitClaim(**{**claim.__dict__, "new": False})
                answers.append(claim)
                rows.append((key, name, run_id, transcript, "started", at, text))
                events.append((at, "emit_claimed", key,
                               json.dumps({"event": name, "run_id": run_id, "transcript": transcript},
                                          ensure_ascii=False, sort_keys=True)))
            if rows:
                conn.exec_driver_sql(sql("INSERT INTO emits (key, event, run_id, transcript, status, created_at, data) "
                                         "VALUES (?, ?, ?, ?, ?, ?, ?)"), rows)
            present = set(known)
            unknown = list({key for key, _ in finishes if key not in present})
            for start in range(0, len(unknown), 500):  # a key never claimed is not finished (nor logged)
                chunk = unknown[start:start + 500]
                found = conn.exec_driver_sql(sql(f"SELECT key FROM emits WHERE key IN ({', '.join('?' * len(chunk))})"),
                                             tuple(chunk)).all()
                present.update(row.key for row in found)
            finishes = [(key, status) for key, status in finishes if key in present]
            if finishes:  # one statement for all (executemany)
                conn.exec_driver_sql(sql("UPDATE emits SET status = ?, finished_at = ? WHERE key = ?"),
                                     [(status, at, key) for key, status in finishes])
                events.extend((at, "emit_finished", key, json.dumps({"status": status}, sort_keys=True))
                              for key, status in finishes)
            if events:
                conn.exec_driver_sql(sql("INSERT INTO event_log (at, kind, subject, data) VALUES (?, ?, ?, ?)"), events)
        return answers

    def started_emits(self, limit: int = 10_000) -> list[EmitClaim]:
        """The emits claimed and not finished (an interrupted serve's), oldest first."""
        with self._read("reading the unfinished emits") as conn:
            rows = conn.execute(select(EMITS).where(EMITS.c.status == "started")
                                .order_by(EMITS.c.created_at).limit(limit)).all()
        return [_claim(row, new=False) for row in rows]

    def drop_emit(self, key: str, why: str) -> bool:
        """Forget the claim of `key` whose run never started (nothing was recorded, so nothing
        was acknowledged): the sender may send it again. False when it had finished."""
        check_key(key)
        _check_text(why=why)
        with self._write(f"dropping the emit id {key!r}") as conn:
            done = conn.execute(EMITS.delete().where(EMITS.c.key == key, EMITS.c.status == "started"))
            if done.rowcount == 1:
                _append(conn, now(), "emit_dropped", key, {"why": why})
            return done.rowcount == 1

    def get_emit(self, key: str) -> EmitClaim | None:
        check_key(key)
        with self._read(f"reading the emit id {key!r}") as conn:
            row = conn.execute(select(EMITS).where(EMITS.c.key == key)).first()
        return None if row is None else _claim(row, new=False)

    # -- the event log -------------------------------------------------------------------

    def log(self, kind: str, subject: str, data: dict[str, Any]) -> None:
        """Append one event to the log (`data` must be JSON-serialisable)."""
        _check_text(kind=kind)
        if not isinstance(subject, str) or not isinstance(data, dict):
            raise StoreError(f"log() takes a subject (text) and data (a dict), not {subject!r} and {data!r}")
        with self._write(f"logging a {kind!r} event") as conn:
            _append(conn, now(), kind, subject, self.redaction.data(data))

    def events(self, limit: int = 100, *, since: str | None = None, kinds: Iterable[str] | None = None,
               subject: str | None = None) -> list[dict[str, Any]]:
        """The newest `limit` events of the log, oldest first: those at or after `since` (a
        stored moment: UTC ISO 8601), of one of `kinds`, about `subject` (a task, thread or
        run id), when given."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise StoreError(f"events(limit=...) takes a whole number >= 0, not {limit!r}")
        query = select(EVENT_LOG)
        if since is not None:
            query = query.where(EVENT_LOG.c.at >= since)
        if kinds is not None:
            query = query.where(EVENT_LOG.c.kind.in_(sorted(set(kinds))))
        if subject is not None:
            query = query.where(EVENT_LOG.c.subject == subject)
        with self._read("reading the event log") as conn:
            rows = conn.execute(query.order_by(EVENT_LOG.c.seq.desc()).limit(limit)).all()
        return [{"seq": r.seq, "at": r.at, "kind": r.kind, "subject": r.subject, "data": json.loads(r.data)}
                for r in reversed(rows)]

    def _sql(self, statement: str) -> str:
        """A driver-level statement written with qmark parameters, in the driver's style."""
        return statement.replace("?", "%s") if self.dialect == "postgresql" else statement

    # -- the store itself ----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The store's file (SQLite); a PostgreSQL store has none (see `where`)."""
        if self._file is None:
            raise StoreError(f"the store {self.where} is a PostgreSQL database, not a file")
        return self._file

    def schema_version(self) -> int:
        with self._read("reading the schema version") as conn:
            return read_version(conn)

    def close(self) -> None:
        """Close the store's connections (a later call on it raises StoreError)."""
        self._closed = True
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.where!r})"

    def _migrate(self) -> None:
        try:
            with self._errors("opening it"):
                migrate(lambda: self._reader.begin(), lambda: self._writer.begin())
        except NewerSchema as e:
            raise StoreError(f"{self.where} was written by a newer chainlang (schema version {e.found}, "
                             f"this one knows up to {SCHEMA_VERSION}); upgrade chainlang to use it") from None
        except NotAStore as e:
            raise StoreError(f"{self.where} is not a usable chainlang store: {e}; restore it from a backup, or move "
                             "it away (a new store is then created), or name another file in [store] url of "
                             "chainlang.toml") from None

    @contextmanager
    def _read(self, doing: str) -> Iterator[Connection]:
        with self._errors(doing), self._reader.begin() as conn:
            yield conn

    @contextmanager
    def _write(self, doing: str) -> Iterator[Connection]:
        with self._errors(doing), self._writer.begin() as conn:
            yield conn

    def _errors(self, doing: str) -> AbstractContextManager[None]:
        if self._closed:
            raise StoreError(f"the store {self.where} is closed; open it again to go on {doing}")
        return _translated(self, doing)


@contextmanager
def _translated(store: Store, doing: str) -> Iterator[None]:
    """Turn what the database library raises into a StoreError that says what to do."""
    try:
        yield
    except sa_exc.DBAPIError as e:
        if store._url is not None:
            raise StoreError(postgres.explain(store.where, store._url, str(e.orig), doing, store.busy_timeout)) from e
        raise StoreError(_explain(store, str(e.orig), doing)) from e
    except sqlite3.Error as e:
        raise StoreError(_explain(store, str(e), doing)) from e
    except sa_exc.SQLAlchemyError as e:
        raise StoreError(f"the store {store.where}: {doing} failed: {e}") from e
    except UnicodeEncodeError as e:
        raise StoreError(f"the store {store.where}: {doing} failed: the text is not valid UTF-8 ({e.reason})") from e


def _explain(store: Store, message: str, doing: str) -> str:
    path, low = store.path, message.lower()
    if "locked" in low or "busy" in low:
        return (f"the store {path} is busy: another process kept it locked (this one waits up to "
                f"{store.busy_timeout:g} s) while {doing}; try again when that process is done, or stop it")
    if "not a database" in low or "encrypted" in low:
        return (f"{path} is not an SQLite database, so it cannot be the project's store; move it away "
                "(a new store is then created), or name another file in [store] url of chainlang.toml")
    if "readonly" in low or "read-only" in low:
        return (f"the store {path} is read-only ({message}); make the file and its directory writable "
                f"(SQLite writes {path.name}-wal and {path.name}-shm beside it)")
    if "unable to open" in low:
        return (f"cannot open the store {path}: its directory is missing or not writable; create it or "
                "make it writable")
    if "full" in low:
        return (f"the store {path} cannot grow: the disk is full ({message}) while {doing}; nothing of this "
                "change was written; free space and try again")
    if "malformed" in low or "corrupt" in low:
        return (f"the store {path} is damaged ({message}); restore it from a backup, or move it away to "
                "start a new one")
    return f"the store {path}: {doing} failed: {message}"


def _use_wal(cursor: sqlite3.Cursor, timeout: float) -> None:
    """Switch the file to WAL (once per file: the mode is stored in it).

    The switch needs the file to itself and SQLite does not wait for that (no busy
    handler), so two processes opening a new store at once would see "database is
    locked" at once: retry until the busy timeout instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _claim(row: Row[Any], new: bool) -> EmitClaim:
    return EmitClaim(new=new, key=row.key, event=row.event, run_id=row.run_id, transcript=row.transcript,
                     status=row.status, created_at=row.created_at, finished_at=row.finished_at,
                     data=None if row.data is None else json.loads(row.data))
