"""The memory operations of `Store` (LANGUAGE.md §13): the journal and the knowledge
organized from it, searched with the full-text indexes of schema version 4.

- The journal is append-only: `append_journal` adds an entry (its keywords extracted by
  the caller, `chainlang.stdlib.memory`; its text and keywords masked here, as every
  write of the store is: `redaction.py`). `origin`
  is the step attempt's idempotency key: a second call with the same origin (a resumed
  step) returns the first entry with `new=False` and appends nothing.
- The knowledge holds one row per (kind, name): `upsert_knowledge` creates it or
  replaces its content and keywords, the sources (journal ids) merged with the old ones.
- `search_journal` / `search_knowledge` take the words to look for (never FTS syntax:
  each word is quoted here, and the words are OR-ed) and rank by SQLite's `bm25()`
  (reported as `score`, higher is better); without words they list newest first. On
  PostgreSQL, its full-text search and `ts_rank` instead (see `postgres.py`).

Every change appends its event to the event log in the same transaction
(`journal_appended`, `knowledge_updated`).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import Connection, Row, insert, select, text, update

from .base import StoreError, check_text, stamp
from .redaction import StoreRedaction
from .schema import JOURNAL, KNOWLEDGE, append_event, now

__all__ = ["KNOWLEDGE_KINDS", "JournalEntry", "KnowledgeItem", "MemoryMethods", "fts_query"]

KNOWLEDGE_KINDS = ("people", "project", "decision", "preference")
MAX_LIMIT = 1000


@dataclass(frozen=True)
class JournalEntry:
    """A row of the journal; `new` is True only for the call that appended it."""

    id: int
    thread_id: str
    at: str  # UTC, ISO 8601
    day: str  # YYYY-MM-DD on the clock of the run that appended it
    content: str
    keywords: list[str]
    origin: str | None
    new: bool = False
    score: float | None = None  # set by search_journal when words were given


@dataclass(frozen=True)
class KnowledgeItem:
    """A row of the knowledge (a person, a project, ...)."""

    id: int
    kind: str
    name: str
    content: str
    keywords: list[str]
    sources: list[int]
    updated_at: str  # UTC, ISO 8601
    score: float | None = None  # set by search_knowledge when words were given


def fts_query(words: Sequence[str]) -> str:
    """An FTS5 query that matches any of `words`, each quoted (so no word is read as FTS
    syntax: AND, NEAR, column filters, `*`, ...)."""
    quoted = ['"' + w.replace('"', '""') + '"' for w in words if w.strip()]
    if not quoted:
        raise StoreError("a memory search needs at least one word to look for")
    return " OR ".join(quoted)


class MemoryMethods:
    """Mixed into `Store` (see `store.py` and the module's docstring)."""

    where: str
    dialect: str  # 'sqlite' or 'postgresql'
    redaction: StoreRedaction  # what every write masks (redaction.py)

    def _masked_words(self, words: list[str]) -> list[str]:
        """Keywords with no secret: one that is (or holds) a secret is masked, and left out
        when nothing else is left of it."""
        return [w for w in (self.redaction.text(w) for w in words) if w != "***"]

    def _read(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _write(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    # -- the journal ---------------------------------------------------------------------

    def append_journal(self, thread_id: str, content: str, keywords: Sequence[str], *, at: str | datetime,
                       day: str, origin: str | None = None) -> JournalEntry:
        """Append an entry (or return the one appended before with the same `origin`).
        `at` is an aware moment (stored in UTC), `day` its YYYY-MM-DD on the run's clock."""
        check_text(thread_id=thread_id, content=content, day=day)
        at = stamp(at, "the moment of a journal entry")
        if origin is not None:
            check_text(origin=origin)
        content, words = self.redaction.text(content), self._masked_words(_words(keywords, "keywords"))
        with self._write(f"appending to the journal of the thread {thread_id!r}") as conn:
            if origin is not None:
                row = conn.execute(select(JOURNAL).where(JOURNAL.c.origin == origin)).first()
                if row is not None:
                    return _entry(row)
            done = conn.execute(insert(JOURNAL).values(thread_id=thread_id, at=at, day=day, content=content,
                                                       keywords=json.dumps(words, ensure_ascii=False),
                                                       origin=origin))
            key = done.inserted_primary_key
            entry_id = int(key[0]) if key is not None else 0
            append_event(conn, now(), "journal_appended", thread_id,
                         {"id": entry_id, "day": day, "keywords": words, "origin": origin})
        return JournalEntry(id=entry_id, thread_id=thread_id, at=at, day=day, content=content, keywords=words,
                            origin=origin, new=True)

    def journal(self, *, start_day: str | None = None, end_day: str | None = None,
                ids: Sequence[int] | None = None, limit: int = MAX_LIMIT) -> list[JournalEntry]:
        """The entries of the days `start_day`..`end_day` (inclusive; either may be None), or
        of these ids, oldest first."""
        query = select(JOURNAL)
        if start_day is not None:
            query = query.where(JOURNAL.c.day >= start_day)
        if end_day is not None:
            query = query.where(JOURNAL.c.day <= end_day)
        if ids is not None:
            query = query.where(JOURNAL.c.id.in_([int(i) for i in ids]))
        with self._read("reading the journal") as conn:
            rows = conn.execute(query.order_by(JOURNAL.c.at, JOURNAL.c.id).limit(_limit(limit))).all()
        return [_entry(row) for row in rows]

    def search_journal(self, words: Sequence[str] | None, *, start_day: str | None = None,
                       end_day: str | None = None, limit: int = 20) -> list[JournalEntry]:
        """Entries matching any of `words`, best first (BM25); without words, newest first."""
        where = ["1 = 1"]
        params: dict[str, Any] = {"limit": _limit(limit)}
        if start_day is not None:
            where.append("j.day >= :start")
            params["start"] = start_day
        if end_day is not None:
            where.append("j.day <= :end")
            params["end"] = end_day
        if words is None:
            sql = f"SELECT j.*, NULL AS score FROM journal j WHERE {' AND '.join(where)} " \
                  "ORDER BY j.at DESC, j.id DESC LIMIT :limit"
        elif self.dialect == "postgresql":
            from .postgres import journal_search

            sql = journal_search(where, params, words)
        else:
            params["match"] = fts_query(words)
            sql = ("SELECT j.*, -bm25(journal_fts) AS score FROM journal_fts JOIN journal j ON j.id = journal_fts.rowid "
                   f"WHERE journal_fts MATCH :match AND {' AND '.join(where)} "
                   "ORDER BY bm25(journal_fts), j.at DESC LIMIT :limit")
        with self._read("searching the journal") as conn:
            rows = conn.execute(text(sql), params).all()
        return [_entry(row, score=row.score) for row in rows]

    # -- the knowledge -------------------------------------------------------------------

    def upsert_knowledge(self, kind: str, name: str, content: str, keywords: Sequence[str],
                         sources: Sequence[int], *, at: str | datetime) -> KnowledgeItem:
        """Create the (kind, name) item or update it: new content and keywords, the sources
        merged with those it had."""
        if kind not in KNOWLEDGE_KINDS:
            raise StoreError(f"a knowledge item's kind is one of {', '.join(KNOWLEDGE_KINDS)}, not {kind!r}")
        check_text(name=name, content=content)
        at = stamp(at, "the moment of a knowledge item")
        name, content = self.redaction.text(name), self.redaction.text(content)
        words = self._masked_words(_words(keywords, "keywords"))
        ids = sorted({int(i) for i in sources})
        with self._write(f"updating the knowledge of {kind} {name!r}") as conn:
            row = conn.execute(select(KNOWLEDGE).where(KNOWLEDGE.c.kind == kind, KNOWLEDGE.c.name == name)).first()
            if row is None:
                done = conn.execute(insert(KNOWLEDGE).values(kind=kind, name=name, content=content,
                                                             keywords=json.dumps(words, ensure_ascii=False),
                                                             sources=json.dumps(ids), updated_at=at))
                key = done.inserted_primary_key
                item_id = int(key[0]) if key is not None else 0
            else:
                item_id = int(row.id)
                ids = sorted(set(ids) | {int(i) for i in json.loads(row.sources)})
                conn.execute(update(KNOWLEDGE).where(KNOWLEDGE.c.id == item_id).values(
                    content=content, keywords=json.dumps(words, ensure_ascii=False), sources=json.dumps(ids),
                    updated_at=at))
            append_event(conn, now(), "knowledge_updated", f"{kind}:{name}",
                         {"id": item_id, "kind": kind, "name": name, "sources": ids, "new": row is None})
        return KnowledgeItem(id=item_id, kind=kind, name=name, content=content, keywords=words, sources=ids,
                             updated_at=at)

    def knowledge(self, kind: str | None = None) -> list[KnowledgeItem]:
        """The knowledge items (of one kind), by kind and name."""
        query = select(KNOWLEDGE)
        if kind is not None:
            query = query.where(KNOWLEDGE.c.kind == kind)
        with self._read("reading the knowledge") as conn:
            rows = conn.execute(query.order_by(KNOWLEDGE.c.kind, KNOWLEDGE.c.name)).all()
        return [_item(row) for row in rows]

    def search_knowledge(self, words: Sequence[str] | None, *, kinds: Sequence[str] | None = None,
                         since: str | None = None, until: str | None = None, limit: int = 20) -> list[KnowledgeItem]:
        """Items matching any of `words`, best first (BM25, the name weighing most); without
        words, the most recently updated first. `since`/`until` bound `updated_at` (UTC text,
        `until` exclusive)."""
        where = ["1 = 1"]
        params: dict[str, Any] = {"limit": _limit(limit)}
        if kinds is not None:
            names = [f":kind{i}" for i in range(len(kinds))]
            where.append(f"k.kind IN ({', '.join(names) or 'NULL'})")
            params.update({f"kind{i}": kind for i, kind in enumerate(kinds)})
        if since is not None:
            where.append("k.updated_at >= :since")
            params["since"] = since
        if until is not None:
            where.append("k.updated_at < :until")
            params["until"] = until
        if words is None:
            sql = f"SELECT k.*, NULL AS score FROM knowledge k WHERE {' AND '.join(where)} " \
                  "ORDER BY k.updated_at DESC, k.id DESC LIMIT :limit"
        elif self.dialect == "postgresql":
            from .postgres import knowledge_search

            sql = knowledge_search(where, params, words)
        else:
            params["match"] = fts_query(words)
            rank = "bm25(knowledge_fts, 3.0, 1.0, 1.0)"
            sql = (f"SELECT k.*, -{rank} AS score FROM knowledge_fts JOIN knowledge k ON k.id = knowledge_fts.rowid "
                   f"WHERE knowledge_fts MATCH :match AND {' AND '.join(where)} "
                   f"ORDER BY {rank}, k.updated_at DESC LIMIT :limit")
        with self._read("searching the knowledge") as conn:
            rows = conn.execute(text(sql), params).all()
        return [_item(row, score=row.score) for row in rows]


def _words(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise StoreError(f"the {what} must be a list of words (text)")
    return list(values)


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise StoreError(f"a limit is a whole number from 0 to {MAX_LIMIT}, not {limit!r}")
    return limit


def _entry(row: Row[Any], score: float | None = None) -> JournalEntry:
    return JournalEntry(id=int(row.id), thread_id=row.thread_id, at=row.at, day=row.day, content=row.content,
                        keywords=list(json.loads(row.keywords)), origin=row.origin,
                        score=None if score is None else float(score))


def _item(row: Row[Any], score: float | None = None) -> KnowledgeItem:
    return KnowledgeItem(id=int(row.id), kind=row.kind, name=row.name, content=row.content,
                         keywords=list(json.loads(row.keywords)), sources=[int(i) for i in json.loads(row.sources)],
                         updated_at=row.updated_at, score=None if score is None else float(score))
