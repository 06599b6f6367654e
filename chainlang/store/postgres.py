"""The project's store on PostgreSQL (`[store] url = "postgresql://USER@HOST:PORT/DB"`).

Only a project whose url names PostgreSQL imports this module (and psycopg 3, the driver).
The tables, the migrations and the methods are the ones of SQLite (`schema.py`, the
mixins); what differs is here:

- Write transactions: SQLite's BEGIN IMMEDIATE lets one writer in at a time, so a
  method's read-then-write (is the key claimed? is the lease free?) sees the last commit
  and nobody writes between its read and its write. The same is done here with a
  transaction-scoped advisory lock taken first in every write transaction
  (`pg_advisory_xact_lock`), at READ COMMITTED, whose statements after the lock see every
  commit made before it. Not SERIALIZABLE with retries: a method's body runs once inside
  `with store._write(...)`, so it could not be replayed, and the one-writer model is the
  one the SQLite store was tested with. Readers never wait (MVCC); a reading method runs
  in a REPEATABLE READ snapshot, as a deferred SQLite transaction does. The lock is taken
  with `lock_timeout` set to the busy timeout: a writer that waits longer gets "busy".
- Autoincrement keys (`sqlite_autoincrement`): sequences (SERIAL), which never reuse a
  value either.
- Memory search: FTS5/BM25 on SQLite; here GIN indexes on `to_tsvector` expressions, with
  a text search configuration of English stemming that keeps stop words (as FTS5's porter
  tokenizer does), ranked by `ts_rank` (not BM25: the order of the best matches is the
  same on the tests, the scores are not), the knowledge's name weighing three times its
  text as in the bm25 call. Accents are kept (FTS5's unicode61 folds them).
- Moments are text in one fixed ISO 8601 form, so they compare the same under any
  collation of the database.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL

from .base import StoreError

__all__ = ["BEGIN", "FTS", "connect", "describe", "explain", "journal_search", "knowledge_search", "postgres_url"]

BEGIN = "chainlang_begin"  # the execution option naming a transaction's mode (as on SQLite)
# One lock per database (a project's store is a database of its own): any int8 will do
WRITE_LOCK = 0x636861696E6C61  # "chainla"
DRIVERS = ("psycopg", None)
INSTALL = "pip install 'chainlang[postgres]'"


def postgres_url(url: URL) -> URL | None:
    """`url` with the psycopg 3 driver when it names PostgreSQL; None when it does not."""
    if url.get_backend_name() not in ("postgresql", "postgres"):
        return None
    shown = url.render_as_string(hide_password=True)
    driver = url.drivername.partition("+")[2] or None
    if driver not in DRIVERS:
        raise StoreError(f"[store] url {shown}: the driver {driver!r} is not supported; write postgresql://... "
                         "(the psycopg 3 driver is used)")
    if not url.database:
        raise StoreError(f"[store] url {shown} names no database; write postgresql://USER@HOST:PORT/DATABASE")
    return url.set(drivername="postgresql+psycopg")


def describe(url: URL) -> str:
    """How messages name the store: its url (as written, without the driver), never its password."""
    return url.set(drivername="postgresql").render_as_string(hide_password=True)


def connect(url: URL, busy_timeout: float) -> Engine:
    """The engine of the store at `url` (psycopg 3), its transactions set up as above."""
    try:
        import psycopg  # noqa: F401  (imported here so that SQLite projects never load it)
    except ImportError:
        raise StoreError(f"[store] url {describe(url)} names a PostgreSQL store, but psycopg (the driver) is not "
                         f"installed; run: {INSTALL}") from None
    millis = max(1, int(busy_timeout * 1000))
    engine = create_engine(url, pool_pre_ping=True, connect_args={
        "connect_timeout": max(2, int(busy_timeout)), "application_name": "chainlang",
        "options": f"-c lock_timeout={millis}"})

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        if conn.get_execution_options().get(BEGIN) == "IMMEDIATE":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")

    return engine


def explain(where: str, url: URL, message: str, doing: str, busy_timeout: float) -> str:
    """A driver's error as a message that says what to do (the url's password removed)."""
    if url.password:
        message = message.replace(str(url.password), "***")
    first = message.strip().splitlines()[0] if message.strip() else message
    low = message.lower()
    server = f"host {url.host or 'localhost (socket)'}, port {url.port or 5432}, database {url.database}"
    if "lock timeout" in low:
        return (f"the store {where} is busy: another process held its write lock past {busy_timeout:g} s while "
                f"{doing}; try again when that process is done, or stop it")
    if "password authentication failed" in low or "no password supplied" in low:
        return (f"cannot connect to the store {where} ({server}): {first}; give the right user and password in "
                "[store] url, or leave the password out of it and set PGPASSWORD (or ~/.pgpass)")
    if "does not exist" in low and "database" in low:
        return (f"cannot connect to the store {where} ({server}): {first}; create the database "
                f"(createdb {url.database}) or name an existing one in [store] url")
    if any(s in low for s in ("connection refused", "could not connect", "connection failed", "timeout expired",
                              "could not translate host name", "name or service not known",
                              "server closed the connection")):
        return (f"cannot connect to the store {where} ({server}): {first}; check that the PostgreSQL server runs "
                "and that [store] url of chainlang.toml names its host, port and database")
    if "no space left" in low or "disk full" in low:
        return (f"the store {where} cannot grow: the server's disk is full ({first}) while {doing}; nothing of "
                "this change was written; free space and try again")
    if "permission denied" in low:
        return (f"the store {where}: {doing} failed: {first}; the user of [store] url needs the right to create "
                "and change tables in that database")
    return f"the store {where}: {doing} failed: {first}"


# Version 4's full-text indexes (the search below uses the same expressions, so that
# the planner can use them).
_JOURNAL_VEC = "to_tsvector('chainlang_english', {p}content || ' ' || {p}keywords)"
_KNOWLEDGE_VEC = ("(setweight(to_tsvector('chainlang_english', {p}name), 'A') || "
                  "to_tsvector('chainlang_english', {p}content || ' ' || {p}keywords))")
FTS = [
    # English stemming (Snowball's, as FTS5's porter) that keeps the stop words (as FTS5
    # does): `english` would drop "not", "and", "or", so a search for them found nothing
    "CREATE TEXT SEARCH DICTIONARY chainlang_stem (TEMPLATE = snowball, Language = english)",
    "CREATE TEXT SEARCH CONFIGURATION chainlang_english (COPY = english)",
    "ALTER TEXT SEARCH CONFIGURATION chainlang_english ALTER MAPPING REPLACE english_stem WITH chainlang_stem",
    f"CREATE INDEX journal_fts ON journal USING gin ({_JOURNAL_VEC.format(p='')})",
    f"CREATE INDEX knowledge_fts ON knowledge USING gin ({_KNOWLEDGE_VEC.format(p='')})",
]
# ts_rank's weights are {D, C, B, A}: the name (A) three times the rest (D), as bm25(3, 1, 1)
_KNOWLEDGE_WEIGHTS = "'{0.333333, 0.333333, 0.333333, 1.0}'"


def _query(words: Sequence[str], params: dict[str, Any]) -> str:
    """Any of `words`, each a phrase (as a quoted FTS5 string is), never query syntax."""
    kept = [w for w in words if w.strip()]
    if not kept:
        raise StoreError("a memory search needs at least one word to look for")
    parts = []
    for i, word in enumerate(kept):
        params[f"w{i}"] = word
        parts.append(f"phraseto_tsquery('chainlang_english', :w{i})")
    return "(" + " || ".join(parts) + ")"


def journal_search(where: list[str], params: dict[str, Any], words: Sequence[str]) -> str:
    query, vec = _query(words, params), _JOURNAL_VEC.format(p="j.")
    return (f"SELECT j.*, ts_rank({vec}, {query}) AS score FROM journal j "
            f"WHERE {vec} @@ {query} AND {' AND '.join(where)} ORDER BY score DESC, j.at DESC LIMIT :limit")


def knowledge_search(where: list[str], params: dict[str, Any], words: Sequence[str]) -> str:
    query, vec = _query(words, params), _KNOWLEDGE_VEC.format(p="k.")
    return (f"SELECT k.*, ts_rank({_KNOWLEDGE_WEIGHTS}, {vec}, {query}) AS score FROM knowledge k "
            f"WHERE {vec} @@ {query} AND {' AND '.join(where)} ORDER BY score DESC, k.updated_at DESC LIMIT :limit")
