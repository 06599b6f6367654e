"""The store's side of waiting inside a run (LANGUAGE.md §15): one row per wait.

A run registers its wait (`open_wait`) before it records `wait_started`, so a wait the
transcript knows is always findable by events; registering again (a resume) returns the
row already there, with its first deadline. Whoever settles a wait first wins: a delivery
(`deliver_wait`), its deadline (`settle_wait(..., "timed_out")`) or a cancel, each one
compare-and-set from `waiting` in one transaction that also appends to the event log. So an
event is delivered to a wait at most once, and a wait that timed out takes no event. The
run reads how its wait was settled (`get_wait`), records `wait_finished`, then marks the
row finished (`finish_wait`): a settled row not finished is a run someone must resume.

Matching an event to waits reads only rows of that event name still waiting, through the
index on (event, status, match_field, match_value): the where's equality key (`question_id
== 'q-…'`, `draft_id == email.draft.result.id`) narrows them to the ones that can match,
however many runs wait for other events or other keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, insert, select, union_all, update

from .base import StoreError, check_text
from .redaction import StoreRedaction
from .schema import WAITS, append_event, now, to_json

__all__ = ["SETTLED", "WAIT_STATUSES", "WaitMethods", "WaitRow"]

WAIT_STATUSES = ("waiting", "delivered", "timed_out", "cancelled")
SETTLED = ("delivered", "timed_out", "cancelled")
_SEEKS = 400  # keys per statement in waiting_for (SQLite allows 500 terms in a compound select)


@dataclass
class WaitRow:
    """One wait, as stored (JSON columns decoded)."""

    run_id: str
    step: str
    event: str
    where: str | None
    frozen: dict[str, Any]
    deadline: str | None
    transcript: str
    chain: str | None
    engine: str
    status: str
    created_at: str
    match_field: str | None = None
    match_value: Any = None
    question: dict[str, Any] | None = None
    payload: Any = None
    emit_id: str | None = None
    settled_at: str | None = None
    finished_at: str | None = None

    @property
    def question_id(self) -> str | None:
        return None if self.question is None else str(self.question.get("id"))

    def to_json(self) -> dict[str, Any]:
        """What `chainlang waits --json` and serve show of it."""
        out = {"run_id": self.run_id, "step": self.step, "event": self.event, "where": self.where,
               "values": self.frozen, "deadline": self.deadline, "status": self.status, "chain": self.chain,
               "transcript": self.transcript, "engine": self.engine, "created_at": self.created_at}
        if self.question is not None:
            out["question"] = self.question
        if self.status != "waiting":
            out.update(payload=self.payload, emit_id=self.emit_id, settled_at=self.settled_at,
                       finished_at=self.finished_at)
        return out



def match_text(value: Any) -> str | None:
    """The stored form of a match key's value (None: the value cannot be a key)."""
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, float) and value.is_integer():  # 1 == 1.0 in the language: one key for both
        value = int(value)
    try:
        return json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


class WaitMethods:
    """The wait operations of `Store` (mixed into it; see the module's docstring)."""

    where: str
    redaction: StoreRedaction

    def _read(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _write(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        raise NotImplementedError

    def open_wait(self, row: WaitRow) -> WaitRow:
        """Register `row` (status waiting), or return the wait of (run, step) registered before."""
        check_text(run_id=row.run_id, step=row.step, event=row.event, transcript=row.transcript)
        values = dict(
            run_id=row.run_id, step=row.step, event=row.event, where_text=row.where,
            # the known secrets only (as a task's definition): the where compares these values, and a guess at
            # what looks like a secret (a uuid hex id) would make the wait never match
            frozen=to_json(self.redaction.definition(row.frozen), "a wait's frozen values"),
            match_field=row.match_field,
            match_value=None if row.match_field is None else match_text(row.match_value),
            question_id=row.question_id,
            question=None if row.question is None else to_json(row.question, "a wait's question"),
            deadline=row.deadline, transcript=row.transcript, chain=row.chain, engine=row.engine,
            status="waiting", created_at=row.created_at or now())
        with self._write(f"registering the wait of run {row.run_id} at step {row.step}") as conn:
            found = conn.execute(select(WAITS).where(WAITS.c.run_id == row.run_id, WAITS.c.step == row.step)).first()
            if found is not None:
                return _row(found)
            conn.execute(insert(WAITS).values(**values))
            append_event(conn, str(values["created_at"]), "wait_opened", f"{row.run_id}/{row.step}",
                         {"event": row.event, "deadline": row.deadline})
            stored = conn.execute(select(WAITS).where(WAITS.c.run_id == row.run_id, WAITS.c.step == row.step)).one()
        return _row(stored)

    def get_wait(self, run_id: str, step: str) -> WaitRow | None:
        with self._read(f"reading the wait of run {run_id} at step {step}") as conn:
            found = conn.execute(select(WAITS).where(WAITS.c.run_id == run_id, WAITS.c.step == step)).first()
        return None if found is None else _row(found)

    def waiting_for(self, event: str, payload: Any) -> list[WaitRow]:
        """The waits still waiting for `event` that `payload` can match by their equality key
        (the caller evaluates each one's `where`)."""
        fields = payload if isinstance(payload, dict) else {}
        keyed = [(key, text) for key, value in fields.items()
                 if isinstance(key, str) and (text := match_text(value)) is not None]
        rows: list[Row[Any]] = []
        with self._read(f"finding the waits for {event}") as conn:
            for at in range(0, max(1, len(keyed)), _SEEKS):  # the waits without a key with the first keys
                chunk = keyed[at:at + _SEEKS]
                bound = {"event": event, **{f"k{i}": k for i, (k, _) in enumerate(chunk)},
                         **{f"v{i}": v for i, (_, v) in enumerate(chunk)}}
                rows += conn.execute(_seeks(len(chunk), at == 0), bound).all()
        rows.sort(key=lambda r: (r.created_at, r.run_id, r.step))
        return [_row(r) for r in rows]

    def events_waited(self, events: Iterable[str]) -> set[str]:
        """Which of `events` some run still waits for (one read through the index, for a batch)."""
        names = sorted(set(events))
        if not names:
            return set()
        found: set[str] = set()
        # serve's hot path (every event): plain SQL through the driver, as Store.emit_batch
        with self._read("finding the events runs wait for") as conn:
            for start in range(0, len(names), 500):  # bounded IN lists
                chunk = names[start:start + 500]
                found.update(r[0] for r in conn.exec_driver_sql(self._sql(
                    f"SELECT DISTINCT event FROM waits WHERE status = 'waiting' AND event IN ({', '.join('?' * len(chunk))})"),
                    tuple(chunk)))
        return found

    def waits_by_question(self, question_id: str) -> list[WaitRow]:
        with self._read(f"finding the question {question_id}") as conn:
            rows = conn.execute(select(WAITS).where(WAITS.c.question_id == question_id)).all()
        return [_row(r) for r in rows]

    def settle_wait(self, run_id: str, step: str, status: str, payload: Any = None,
                    emit_id: str | None = None) -> WaitRow | None:
        """Settle the wait if it is still waiting (a delivery, its deadline, a cancel):
        the settled row, or None when something settled it first."""
        if status not in SETTLED:
            raise StoreError(f"unknown wait status {status!r} (expected one of {', '.join(SETTLED)})")
        encoded = None if payload is None else to_json(self.redaction.definition(payload), "an event's payload")
        with self._write(f"settling the wait of run {run_id} at step {step}") as conn:
            at = now()
            done = conn.execute(update(WAITS).where(WAITS.c.run_id == run_id, WAITS.c.step == step,
                                                    WAITS.c.status == "waiting")
                                .values(status=status, payload=encoded, emit_id=emit_id, settled_at=at))
            if done.rowcount != 1:
                return None
            append_event(conn, at, f"wait_{status}", f"{run_id}/{step}", {"emit_id": emit_id} if emit_id else {})
            row = conn.execute(select(WAITS).where(WAITS.c.run_id == run_id, WAITS.c.step == step)).one()
        return _row(row)

    def deliver_waits(self, deliveries: Iterable[tuple[str, str]], payload: Any,
                      emit_id: str | None) -> list[WaitRow]:
        """Settle many waits (run, step) with one event in one transaction (one disk sync):
        the rows this call delivered to (a wait settled meanwhile is left out)."""
        wanted = list(deliveries)
        if not wanted:
            return []
        encoded = None if payload is None else to_json(self.redaction.definition(payload), "an event's payload")
        out: list[WaitRow] = []
        with self._write("delivering an event to waiting runs") as conn:
            at = now()
            for run_id, step in wanted:
                done = conn.execute(update(WAITS).where(WAITS.c.run_id == run_id, WAITS.c.step == step,
                                                        WAITS.c.status == "waiting")
                                    .values(status="delivered", payload=encoded, emit_id=emit_id, settled_at=at))
                if done.rowcount == 1:
                    append_event(conn, at, "wait_delivered", f"{run_id}/{step}", {"emit_id": emit_id} if emit_id else {})
                    out.append(_row(conn.execute(select(WAITS).where(WAITS.c.run_id == run_id,
                                                                     WAITS.c.step == step)).one()))
        return out

    def finish_wait(self, run_id: str, step: str) -> None:
        """The run recorded `wait_finished`: nobody needs to resume it for this wait any more."""
        with self._write(f"finishing the wait of run {run_id} at step {step}") as conn:
            conn.execute(update(WAITS).where(WAITS.c.run_id == run_id, WAITS.c.step == step,
                                             WAITS.c.finished_at.is_(None)).values(finished_at=now()))

    def list_waits(self, *, status: str | None = "waiting", run_id: str | None = None,
                   limit: int = 1000) -> list[WaitRow]:
        """Waits, oldest first: by default those still waiting."""
        query = select(WAITS)
        if status is not None:
            query = query.where(WAITS.c.status == status)
        if run_id is not None:
            query = query.where(WAITS.c.run_id == run_id)
        with self._read("listing the waits") as conn:
            rows = conn.execute(query.order_by(WAITS.c.created_at, WAITS.c.run_id, WAITS.c.step).limit(limit)).all()
        return [_row(r) for r in rows]

    def due_waits(self, at: str, limit: int = 1000) -> list[WaitRow]:
        """Waits still waiting whose deadline is at or before `at` (ISO 8601 UTC)."""
        with self._read("finding the waits past their deadline") as conn:
            rows = conn.execute(select(WAITS).where(WAITS.c.status == "waiting", WAITS.c.deadline.is_not(None),
                                                    WAITS.c.deadline <= at)
                                .order_by(WAITS.c.deadline).limit(limit)).all()
        return [_row(r) for r in rows]

    def next_wait_deadline(self) -> str | None:
        with self._read("finding the next wait deadline") as conn:
            return conn.execute(select(func.min(WAITS.c.deadline)).where(WAITS.c.status == "waiting")).scalar()

    def unfinished_waits(self, limit: int = 1000) -> list[WaitRow]:
        """Settled waits whose run has not recorded `wait_finished` yet: runs to resume."""
        with self._read("finding the settled waits") as conn:
            # by status first (the index): the waiting rows, however many, are not read
            rows = conn.execute(select(WAITS).where(WAITS.c.status.in_(SETTLED), WAITS.c.finished_at.is_(None))
                                .order_by(WAITS.c.settled_at).limit(limit)).all()
        return [_row(r) for r in rows]

    def count_waits(self) -> int:
        with self._read("counting the waits") as conn:
            return int(conn.execute(select(func.count()).select_from(WAITS)
                                    .where(WAITS.c.status == "waiting")).scalar_one())


@lru_cache(maxsize=64)
def _seeks(keys: int, unkeyed: bool) -> Any:
    """The statement finding an event's waits (bound: event, k0 v0, k1 v1...) with one index
    seek per key and one for the waits without a key, never a scan of the event's waits
    (whose cost would grow with the runs waiting for other keys: benchmarks/bench_waits.py);
    built once per shape (building it costs more than running it)."""
    waiting = (WAITS.c.event == bindparam("event"), WAITS.c.status == "waiting")
    parts = [select(WAITS).where(*waiting, WAITS.c.match_field.is_(None))] if unkeyed else []
    parts += [select(WAITS).where(*waiting, WAITS.c.match_field == bindparam(f"k{i}"),
                                  WAITS.c.match_value == bindparam(f"v{i}")) for i in range(keys)]
    return parts[0] if len(parts) == 1 else union_all(*parts)


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _row(r: Row[Any]) -> WaitRow:
    return WaitRow(run_id=r.run_id, step=r.step, event=r.event, where=r.where_text, frozen=_json(r.frozen) or {},
                   deadline=r.deadline, transcript=r.transcript, chain=r.chain, engine=r.engine, status=r.status,
                   created_at=r.created_at, match_field=r.match_field, match_value=_json(r.match_value),
                   question=_json(r.question), payload=_json(r.payload), emit_id=r.emit_id, settled_at=r.settled_at,
                   finished_at=r.finished_at)
