"""The thread operations of `Store` (LANGUAGE.md §13): threads, their summaries and status,
and what happened in them (thread_events).

- A thread is a row of `threads`: its id, summary, status (`active | archived`), when it
  was created and last updated, and a `version` that grows by one with every change of
  the row (a change checks it: of two writers, the second gets a clear StoreError).
- Its events are appended to `thread_events`, in order, never changed: each the result
  (JSON) of an event of a run attached to the thread (`run_id`, `step`). A *named value*
  is an event with a `key`: a step with an `id` is recorded with its id as the key (its
  event as the event), and a value stored by name alone has `event='value'`. So the
  latest result of an event is `latest(thread, event)`, whatever its key, and a named
  value is `latest(thread, key=name)`, whatever its event. An event given with its run
  and step is recorded once: recording it again (a resumed step) returns the first record.
- What is stored never holds a secret: the summary and every text of an event's result
  go through the store's redaction first (`redaction.py`: the project's known secrets,
  then `chainlang.redaction.mask_value`'s secret-looking values).
- Every change also appends to the event log (`thread_created`, `thread_event`,
  `thread_summarized`, `thread_archived`), in the same transaction.

Moments (`at`) are the caller's clock (the run's), given as aware datetimes or ISO 8601
text, stored in UTC (`base.stamp`); the wall clock when not given.
"""

from __future__ import annotations

import json
import secrets
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from .base import StoreError, check_key, check_text, stamp
from .redaction import StoreRedaction
from .schema import THREAD_EVENTS, THREADS, append_event, now, to_json, versioned_update

__all__ = ["THREAD_STATUSES", "ThreadEvent", "ThreadMethods", "ThreadRecord", "masked"]

THREAD_STATUSES = ("active", "archived")

_Moment = str | datetime


@dataclass(frozen=True)
class ThreadRecord:
    """A stored thread (LANGUAGE.md §13)."""

    id: str
    summary: str
    status: str  # one of THREAD_STATUSES
    created_at: str
    updated_at: str
    version: int


@dataclass(frozen=True)
class ThreadEvent:
    """One event of a thread: the result of `event` (or a named value: `event='value'`)."""

    seq: int
    thread_id: str
    at: str
    run_id: str | None
    step: str | None
    event: str
    key: str | None
    result: Any

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.event, "result": self.result, "timestamp": self.at}
        if self.key is not None:
            out["key"] = self.key
        if self.run_id is not None:
            out["run_id"] = self.run_id
        if self.step is not None:
            out["step"] = self.step
        return out


def masked(value: Any) -> Any:
    """`value` (JSON) with its secrets masked: every text (`chainlang.redaction.mask_secrets`),
    and the value of a key that names one (password, api_key, access_token...) whole."""
    from chainlang.redaction import mask_value

    return mask_value(value)


class ThreadMethods:
    """Mixed into `Store` (see `store.py` and the module's docstring)."""

    where: str
    redaction: StoreRedaction  # what every write masks (redaction.py)

    def _read(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _write(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def create_thread(self, id: str | None = None, *, summary: str = "", at: _Moment | None = None) -> ThreadRecord:
        """Store a new active thread; `id` is generated (`thread-` and 12 hex digits) when None."""
        thread_id = f"thread-{secrets.token_hex(6)}" if id is None else check_key(id, "thread id")
        if not isinstance(summary, str):
            raise StoreError(f"a thread's summary must be text, not {type(summary).__name__}")
        moment = now() if at is None else stamp(at, "at")
        with self._write(f"creating the thread {thread_id!r}") as conn:
            found = conn.execute(select(THREADS.c.status).where(THREADS.c.id == thread_id)).first()
            if found is not None:
                raise StoreError(f"thread ID exists: {thread_id!r} is already a thread in {self.where} (status "
                                 f"{found.status}); give another id")
            conn.execute(insert(THREADS).values(id=thread_id, summary=self.redaction.data(summary), status="active",
                                                created_at=moment, updated_at=moment, version=1))
            append_event(conn, now(), "thread_created", thread_id, {"at": moment})
            return _thread(_get(conn, thread_id, self.where))

    def get_thread(self, id: str) -> ThreadRecord | None:
        check_key(id, "thread id")
        with self._read(f"reading the thread {id!r}") as conn:
            row = conn.execute(select(THREADS).where(THREADS.c.id == id)).first()
        return None if row is None else _thread(row)

    def list_threads(self, status: str | None = None) -> list[ThreadRecord]:
        """The threads (of this status, when given), the most recently updated first."""
        query = select(THREADS).order_by(THREADS.c.updated_at.desc(), THREADS.c.id)
        if status is not None:
            _check_status(status)
            query = query.where(THREADS.c.status == status)
        with self._read("listing the threads") as conn:
            return [_thread(row) for row in conn.execute(query).all()]

    def set_summary(self, id: str, summary: str, *, at: _Moment | None = None,
                    version: int | None = None) -> ThreadRecord:
        """Replace a thread's summary (masked) and its `updated_at`; given `version`, only if
        the thread is still at that version."""
        check_key(id, "thread id")
        if not isinstance(summary, str):
            raise StoreError(f"a thread's summary must be text, not {type(summary).__name__}")
        moment = now() if at is None else stamp(at, "at")
        with self._write(f"summarizing the thread {id!r}") as conn:
            row = _get(conn, id, self.where)
            if version is not None and int(row.version) != version:
                raise StoreError(f"the thread {id!r} in {self.where} is at version {row.version}, not {version}: "
                                 "it was changed meanwhile; read it again")
            text = self.redaction.data(summary)
            _change(conn, row, self.where, summary=text, updated_at=moment)
            append_event(conn, now(), "thread_summarized", id, {"at": moment, "length": len(text)})
            return _thread(_get(conn, id, self.where))

    def archive(self, id: str, *, at: _Moment | None = None) -> ThreadRecord:
        """Archive a thread (an archived one stays as it is): it is no longer matched."""
        check_key(id, "thread id")
        moment = now() if at is None else stamp(at, "at")
        with self._write(f"archiving the thread {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.status == "archived":
                return _thread(row)
            _change(conn, row, self.where, status="archived", updated_at=moment)
            append_event(conn, now(), "thread_archived", id, {"at": moment})
            return _thread(_get(conn, id, self.where))

    def add_event(self, thread_id: str, event: str, result: Any, run_id: str | None = None,
                  step: str | None = None, key: str | None = None, *, at: _Moment | None = None) -> ThreadEvent:
        """Append an event's result (masked) to a thread, and make it the thread's latest
        update. With `run_id` and `step`, recorded once: a second call for the same thread,
        run, step, event and key returns the first record and changes nothing."""
        check_key(thread_id, "thread id")
        check_text(event=event)
        for name, value in (("run_id", run_id), ("step", step), ("key", key)):
            if value is not None:
                check_text(**{name: value})
        moment = now() if at is None else stamp(at, "at")
        encoded = to_json(self.redaction.data(result), f"the result of {event!r}")
        with self._write(f"adding an event to the thread {thread_id!r}") as conn:
            row = _get(conn, thread_id, self.where)
            if run_id is not None and step is not None:
                before = conn.execute(select(THREAD_EVENTS).where(
                    THREAD_EVENTS.c.thread_id == thread_id, THREAD_EVENTS.c.run_id == run_id,
                    THREAD_EVENTS.c.step == step, THREAD_EVENTS.c.event == event,
                    THREAD_EVENTS.c.key.is_(None) if key is None else THREAD_EVENTS.c.key == key)).first()
                if before is not None:
                    return _event(before)
            inserted = conn.execute(insert(THREAD_EVENTS).values(
                thread_id=thread_id, at=moment, run_id=run_id, step=step, event=event, key=key,
                result=encoded)).inserted_primary_key
            if inserted is None:
                raise StoreError(f"the event of the thread {thread_id!r} in {self.where} got no sequence number")
            seq = int(inserted[0])
            _change(conn, row, self.where, updated_at=max(moment, str(row.updated_at)))
            append_event(conn, now(), "thread_event", thread_id,
                         {"seq": seq, "event": event, "key": key, "run_id": run_id, "step": step})
            found = conn.execute(select(THREAD_EVENTS).where(THREAD_EVENTS.c.seq == seq)).first()
            if found is None:
                raise StoreError(f"the event {seq} of the thread {thread_id!r} in {self.where} vanished")
            return _event(found)

    def thread_events(self, thread_id: str, limit: int | None = None) -> list[ThreadEvent]:
        """A thread's events in order; given `limit`, only the last `limit` of them."""
        check_key(thread_id, "thread id")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise StoreError(f"limit takes a whole number >= 0, not {limit!r}")
        query = select(THREAD_EVENTS).where(THREAD_EVENTS.c.thread_id == thread_id).order_by(THREAD_EVENTS.c.seq.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._read(f"reading the events of the thread {thread_id!r}") as conn:
            _get(conn, thread_id, self.where)
            rows = conn.execute(query).all()
        return [_event(row) for row in reversed(rows)]

    def latest(self, thread_id: str, event: str | None = None, key: str | None = None) -> ThreadEvent | None:
        """The thread's latest result of `event` (whatever its key), of the named value
        `key` (whatever its event), or of both when both are given."""
        check_key(thread_id, "thread id")
        if event is None and key is None:
            raise StoreError("latest() needs an event, a key, or both")
        query = select(THREAD_EVENTS).where(THREAD_EVENTS.c.thread_id == thread_id)
        if event is not None:
            check_text(event=event)
            query = query.where(THREAD_EVENTS.c.event == event)
        if key is not None:
            check_text(key=key)
            query = query.where(THREAD_EVENTS.c.key == key)
        with self._read(f"reading the thread {thread_id!r}") as conn:
            _get(conn, thread_id, self.where)
            row = conn.execute(query.order_by(THREAD_EVENTS.c.seq.desc()).limit(1)).first()
        return None if row is None else _event(row)

    def thread_keys(self, thread_id: str) -> tuple[list[str], list[str]]:
        """What a thread has values for: the events it recorded, and the names of its named
        values (each sorted, once)."""
        check_key(thread_id, "thread id")
        with self._read(f"reading the thread {thread_id!r}") as conn:
            _get(conn, thread_id, self.where)
            events = conn.execute(select(THREAD_EVENTS.c.event).where(THREAD_EVENTS.c.thread_id == thread_id)
                                  .distinct()).scalars().all()
            keys = conn.execute(select(THREAD_EVENTS.c.key).where(THREAD_EVENTS.c.thread_id == thread_id,
                                                                  THREAD_EVENTS.c.key.is_not(None))
                                .distinct()).scalars().all()
        return sorted(str(e) for e in events), sorted(str(k) for k in keys)

def _check_status(status: object) -> None:
    if status not in THREAD_STATUSES:
        raise StoreError(f"a thread's status is one of {', '.join(THREAD_STATUSES)}, not {status!r}")


def _get(conn: Connection, id: str, path: Any) -> Row[Any]:
    row = conn.execute(select(THREADS).where(THREADS.c.id == id)).first()
    if row is None:
        raise StoreError(f"no thread with id {id!r} in {path}")
    return row


def _change(conn: Connection, row: Row[Any], path: Any, **values: Any) -> int:
    """Update a thread read in this transaction, only if no one changed it since; its new version."""
    return versioned_update(conn, THREADS, row, "thread", path, **values)


def _thread(row: Row[Any]) -> ThreadRecord:
    return ThreadRecord(id=row.id, summary=row.summary, status=row.status, created_at=row.created_at,
                        updated_at=row.updated_at, version=int(row.version))


def _event(row: Row[Any]) -> ThreadEvent:
    return ThreadEvent(seq=int(row.seq), thread_id=row.thread_id, at=row.at, run_id=row.run_id, step=row.step,
                       event=row.event, key=row.key, result=json.loads(row.result))
