"""The task system's operations on the store: tasks, the leases that let one process run
a due task, the runs (firings) of tasks, and dead letters.

The model (LANGUAGE.md §12, after AOF's event-sourced task store): every change of a
task is one write transaction that also appends its event to the event log, so the log
and the tables never disagree, even after a crash.

- A task is a hook (`kind='hook'`) or a timed chain (`kind='schedule'`); its status is
  `pending | active | completed | archived | dead`.
- A due task (`due_tasks`) is run by whoever `claim`s it: the lease names the owner until
  a moment; a lease that has expired (`lease_until < now`) may be taken by another owner
  (`lease_reclaimed` in the log). Only the holder may `start_run` and `finish_run`.
- `start_run` records one firing per (task, due moment): the UNIQUE (task_id, due_at)
  row makes a second firing of the same moment impossible. A second call for the same
  moment does not start another run: it returns the first one with `new=False`, so that
  the caller (e.g. the owner that reclaimed the lease of a crashed process) resumes that
  run (same run id and transcript) instead of running the task twice.
- `finish_run` ends the run, counts failures in a row (`SUCCEEDED` statuses reset them),
  makes the task `dead` (a dead letter, until `retry_task`) after `max_failures`, sets
  its next run (none: a schedule is `completed`) and releases the lease: all at once.
- A run to be resumed later (e.g. serve stopping with SIGTERM) is not finished: the
  holder `release`s the lease and the run stays `running` until it is resumed.

`now` arguments are the caller's clock (serve's, or a test's), given as aware datetimes or
ISO 8601 text; `created_at`/`updated_at` and the event log's `at` are the wall clock.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Callable

from sqlalchemy import Connection, Row, insert, or_, select, update

from .base import SUCCEEDED, TASK_KINDS, TASK_STATUSES, Lease, StoreError, TaskRecord, TaskRun, check_key
from .base import check_text, stamp
from .redaction import StoreRedaction
from .schema import TASK_RUNS, TASKS, append_event, now, to_json, versioned_update
from .task_rows import readable_moment
from .task_rows import task_record as _task

__all__ = ["TaskMethods", "when_tasks_added"]

_Moment = str | datetime
RUNNABLE = ("pending", "active")  # a schedule not fired yet is pending, then active until it ends

# told when this process adds a task or makes a dead one due again (serve's scheduler, so that
# a task an event's action schedules fires at its moment, not at the next poll)
_ADDED: list[Callable[[], None]] = []


def when_tasks_added(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback()` after each task this process adds or retries, in any store, from the
    thread that wrote it (once the write is committed). Returns what stops it."""
    _ADDED.append(callback)
    return lambda: _ADDED.remove(callback) if callback in _ADDED else None


def _tell_added() -> None:
    """The write is committed: a listener that fails must not fail it (the caller would
    take a stored task for one not stored), so its error is logged instead."""
    for callback in list(_ADDED):
        try:
            callback()
        except Exception:
            import logging

            logging.getLogger("chainlang.store").exception("a listener of added tasks failed")


class TaskMethods:
    """The task operations of `Store` (mixed into it; see the module's docstring)."""

    where: str
    redaction: StoreRedaction  # what every write masks (redaction.py)

    def _read(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _write(self, doing: str) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    # -- tasks ---------------------------------------------------------------------------

    def add_task(self, kind: str, definition: Mapping[str, Any], *, id: str | None = None,
                 next_run: _Moment | None = None, origin: str | None = None,
                 status: str = "active") -> TaskRecord:
        """Store a new task; `id` is generated (`task-` and 12 hex digits) when None."""
        _check_choice("kind", kind, TASK_KINDS)
        _check_choice("status", status, TASK_STATUSES)
        task_id = f"task-{secrets.token_hex(6)}" if id is None else check_key(id, "task id")
        if not isinstance(definition, Mapping):
            raise StoreError(f"a task's definition must be a mapping (the hook or schedule), not "
                             f"{type(definition).__name__}")
        # its known secrets masked (and its descriptions): a definition is code that must still run (redaction.py)
        text = to_json(self.redaction.task(dict(definition)), "the definition of a task")
        due = None if next_run is None else stamp(next_run, "next_run")
        if origin is not None:
            check_text(origin=origin)
        with self._write(f"adding the task {task_id!r}") as conn:
            found = conn.execute(select(TASKS.c.status).where(TASKS.c.id == task_id)).first()
            if found is not None:
                raise StoreError(f"task ID exists: {task_id!r} is already a task in {self.where} (status "
                                 f"{found.status}); give another id, or cancel that task and use a new one")
            at = now()
            conn.execute(insert(TASKS).values(id=task_id, kind=kind, definition=text, status=status,
                                              created_at=at, updated_at=at, next_run=due, failures=0,
                                              origin=origin, version=1))
            append_event(conn, at, "task_added", task_id,
                         {"kind": kind, "status": status, "next_run": due, "origin": origin})
            added = _task(_get(conn, task_id, self.where))
        _tell_added()
        return added

    def get_task(self, id: str) -> TaskRecord | None:
        check_key(id, "task id")
        with self._read(f"reading the task {id!r}") as conn:
            row = conn.execute(select(TASKS).where(TASKS.c.id == id)).first()
        return None if row is None else _task(row)

    def list_tasks(self, status: str | None = None, kind: str | None = None) -> list[TaskRecord]:
        """The tasks (of this status and kind, when given), oldest first."""
        query = select(TASKS).order_by(TASKS.c.created_at, TASKS.c.id)
        if status is not None:
            _check_choice("status", status, TASK_STATUSES)
            query = query.where(TASKS.c.status == status)
        if kind is not None:
            _check_choice("kind", kind, TASK_KINDS)
            query = query.where(TASKS.c.kind == kind)
        with self._read("listing the tasks") as conn:
            return [_task(row) for row in conn.execute(query).all()]

    def hooks_stamp(self) -> tuple[int, str | None]:
        """How many stored hooks are active and when the latest changed: it changes when one
        is added or cancelled (for a process that polls for them, e.g. serve)."""
        from sqlalchemy import func

        query = select(func.count(), func.max(TASKS.c.updated_at)).where(TASKS.c.kind == "hook",
                                                                          TASKS.c.status == "active")
        with self._read("reading the stamp of the stored hooks") as conn:
            count, latest = conn.execute(query).one()
        return int(count), None if latest is None else str(latest)

    def cancel_task(self, id: str) -> TaskRecord:
        """Archive a task (an archived one stays as it is). A lease on it is kept, so that
        the run in progress can still be finished by its holder; no new lease is given."""
        check_key(id, "task id")
        with self._write(f"cancelling the task {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.status == "archived":
                return _task(row)
            at = now()
            _change(conn, row, self.where, status="archived", updated_at=at)
            append_event(conn, at, "task_cancelled", id, {"from": row.status})
            return _task(_get(conn, id, self.where))

    def retry_task(self, id: str) -> TaskRecord:
        """Bring a dead task back: `active` again, with no failures counted."""
        check_key(id, "task id")
        with self._write(f"retrying the task {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.status != "dead":
                raise StoreError(f"the task {id!r} is {row.status}, not dead: only a dead task can be retried")
            at = now()
            _change(conn, row, self.where, status="active", failures=0, updated_at=at)
            append_event(conn, at, "task_retried", id, {"failures": row.failures})
            retried = _task(_get(conn, id, self.where))
        _tell_added()
        return retried

    # -- due tasks and their leases ------------------------------------------------------

    def due_tasks(self, now: _Moment, limit: int = 100) -> list[TaskRecord]:
        """Active schedules whose next run is at or before `now` and that nobody holds
        (no lease, or an expired one): the earliest first, at most `limit`."""
        at = stamp(now, "now")
        _check_count("limit", limit)
        query = (select(TASKS)
                 .where(TASKS.c.kind == "schedule", TASKS.c.status.in_(RUNNABLE), TASKS.c.next_run.is_not(None),
                        TASKS.c.next_run <= at, _unleased(at))
                 .order_by(TASKS.c.next_run, TASKS.c.id).limit(limit))
        with self._read("reading the due tasks") as conn:
            return [_task(row) for row in conn.execute(query).all()]

    def next_due(self, now: _Moment | None = None, excluding: Collection[str] = ()) -> str | None:
        """When the earliest active schedule is due (stored form), None when none is; given
        `now`, only of the schedules nobody holds at `now` (no lease, or an expired one); not
        of the tasks `excluding` names (those the caller leaves alone for now)."""
        query = (select(TASKS.c.next_run)
                 .where(TASKS.c.kind == "schedule", TASKS.c.status.in_(RUNNABLE), TASKS.c.next_run.is_not(None))
                 .order_by(TASKS.c.next_run).limit(50))
        if now is not None:
            query = query.where(_unleased(stamp(now, "now")))
        if excluding:
            query = query.where(TASKS.c.id.not_in(sorted(excluding)[:500]))
        with self._read("reading when the next task is due") as conn:
            while True:  # the earliest that is a moment: a damaged row's text is not (it is quarantined)
                found = conn.execute(query).scalars().all()
                for value in found:
                    if readable_moment(value):
                        return str(value)
                if len(found) < 50:
                    return None
                query = query.where(TASKS.c.next_run > found[-1])

    def claim(self, id: str, owner: str, now: _Moment, ttl_seconds: float) -> Lease | None:
        """Take the lease of an active task for `owner` until `now + ttl_seconds`.

        Returns None when the task is not active or someone (`owner` too) holds a lease
        that has not expired; an expired lease is taken over (`lease_reclaimed`).
        """
        at, until = _lease_span(id, owner, now, ttl_seconds)
        with self._write(f"claiming the task {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.status not in RUNNABLE or (row.lease_until is not None and row.lease_until >= at):
                return None
            version = _change(conn, row, self.where, lease_owner=owner, lease_until=until, updated_at=now_())
            logged = now_()
            if row.lease_owner is not None:
                append_event(conn, logged, "lease_reclaimed", id,
                             {"owner": owner, "from": row.lease_owner, "expired": row.lease_until, "now": at})
            append_event(conn, logged, "lease_taken", id, {"owner": owner, "until": until})
            return Lease(task_id=id, owner=owner, until=until, version=version, reclaimed_from=row.lease_owner)

    def renew(self, id: str, owner: str, now: _Moment, ttl_seconds: float) -> Lease | None:
        """Extend `owner`'s lease to `now + ttl_seconds` (for a run that lasts longer than
        its lease); None when another owner holds it (it reclaimed it). A lease nobody holds
        is taken again (`lease_retaken`): another process took it while this one's run went
        on (a pause, a clock jump), saw the run's transcript held, and gave it back."""
        at, until = _lease_span(id, owner, now, ttl_seconds)
        with self._write(f"renewing the lease of the task {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.lease_owner is not None and row.lease_owner != owner:
                return None
            version = _change(conn, row, self.where, lease_owner=owner, lease_until=until, updated_at=now_())
            kind = "lease_renewed" if row.lease_owner == owner else "lease_retaken"
            append_event(conn, now_(), kind, id, {"owner": owner, "until": until})
            return Lease(task_id=id, owner=owner, until=until, version=version)

    def release(self, id: str, owner: str) -> bool:
        """Give up `owner`'s lease; False (and no change) when `owner` does not hold it."""
        check_key(id, "task id")
        check_text(owner=owner)
        with self._write(f"releasing the task {id!r}") as conn:
            row = _get(conn, id, self.where)
            if row.lease_owner != owner:
                return False
            _change(conn, row, self.where, lease_owner=None, lease_until=None, updated_at=now_())
            append_event(conn, now_(), "lease_released", id, {"owner": owner})
            return True

    # -- runs ----------------------------------------------------------------------------

    def start_run(self, task_id: str, owner: str, run_id: str, transcript: str, due_at: _Moment,
                  started_at: _Moment) -> TaskRun:
        """Record the run of the task's firing due at `due_at`, for the holder of its lease.

        The holder's lease must not have expired at `started_at`, and the task must be
        active. A firing is recorded once: when `due_at` already has a run, that run is
        returned with `new=False` and nothing is written (resume it; do not run again).
        """
        check_key(task_id, "task id")
        check_text(owner=owner, run_id=run_id, transcript=transcript)
        due, start = stamp(due_at, "due_at"), stamp(started_at, "started_at")
        with self._write(f"starting a run of the task {task_id!r}") as conn:
            row = _get(conn, task_id, self.where)
            _check_holder(row, owner, start, self.where)
            found = conn.execute(select(TASK_RUNS).where(TASK_RUNS.c.task_id == task_id,
                                                         TASK_RUNS.c.due_at == due)).first()
            if found is not None:
                return _run(found, new=False)
            if row.status not in RUNNABLE:
                raise StoreError(f"the task {task_id!r} is {row.status}: only a pending or active task is run; "
                                 "release its lease")
            done = conn.execute(insert(TASK_RUNS).values(task_id=task_id, run_id=run_id, transcript=transcript,
                                                         due_at=due, started_at=start, status="running"))
            append_event(conn, now_(), "run_started", task_id,
                         {"owner": owner, "run_id": run_id, "transcript": transcript, "due_at": due})
            key = done.inserted_primary_key
            assert key is not None
            return TaskRun(id=int(key[0]), task_id=task_id, run_id=run_id, transcript=transcript, due_at=due,
                           started_at=start, finished_at=None, status="running", error=None, new=True)

    def finish_run(self, task_id: str, owner: str, due_at: _Moment, status: str, now: _Moment, *,
                   next_run: _Moment | None, error: Any = None, max_failures: int = 3) -> TaskRecord:
        """End the run due at `due_at`, update its task and release the lease, at once.

        `status` is the run's final status: one of `SUCCEEDED` resets the failures in a
        row, any other adds one, and the task becomes `dead` at `max_failures`. `last_run`
        becomes `due_at`. `next_run` is the task's next firing; None means there is none:
        a schedule is then `completed` (a hook stays active). A task cancelled meanwhile
        stays archived. A run is finished once, by the lease's holder (its lease may have
        expired, as long as no one else has taken it), or by the process that ran it after
        it lost the lease (a pause or a clock jump longer than the lease) while no one holds
        a lease that runs at `now`: the transcript lock let no one else run it meanwhile,
        so its end is the truth.
        """
        check_key(task_id, "task id")
        check_text(owner=owner, status=status)
        if status == "running":
            raise StoreError("a run is finished with its final status, not 'running'")
        due, at = stamp(due_at, "due_at"), stamp(now, "now")
        nxt = None if next_run is None else stamp(next_run, "next_run")
        _check_count("max_failures", max_failures, least=1)
        error_text = None if error is None else to_json(self.redaction.data(error), "a run's error")
        with self._write(f"finishing a run of the task {task_id!r}") as conn:
            row = _get(conn, task_id, self.where)
            run = conn.execute(select(TASK_RUNS).where(TASK_RUNS.c.task_id == task_id,
                                                       TASK_RUNS.c.due_at == due)).first()
            holds = row.lease_owner == owner
            # lost the lease while it ran (paused, or the clock jumped), and nobody else holds one now
            ran_it = run is not None and run.status == "running" and not holds and (
                row.lease_owner is None or row.lease_until is None or row.lease_until < at)
            if not holds and not ran_it:
                holder = "nobody" if row.lease_owner is None else repr(row.lease_owner)
                raise StoreError(f"{owner!r} does not hold the lease of the task {task_id!r} ({holder} does): "
                                 "only the holder may finish its run")
            if run is None:
                raise StoreError(f"the task {task_id!r} has no run due at {due}: start_run it first")
            if run.status != "running":
                raise StoreError(f"the run {run.run_id!r} of the task {task_id!r} due at {due} is already "
                                 f"finished ({run.status})")
            conn.execute(update(TASK_RUNS).where(TASK_RUNS.c.id == run.id)
                         .values(finished_at=at, status=status, error=error_text))
            failures = 0 if status in SUCCEEDED else row.failures + 1
            new_status = row.status
            if row.status in RUNNABLE:  # a pending schedule has fired now: active, unless it ends here
                if failures >= max_failures:
                    new_status = "dead"
                elif nxt is None and row.kind == "schedule":
                    new_status = "completed"
                else:
                    new_status = "active"
            logged = now_()
            _change(conn, row, self.where, status=new_status, failures=failures, last_run=due, next_run=nxt,
                    lease_owner=None, lease_until=None, updated_at=logged)
            append_event(conn, logged, "run_finished", task_id,
                         {"owner": owner, "run_id": run.run_id, "due_at": due, "status": status,
                          "failures": failures, "task_status": new_status, "next_run": nxt,
                          **({} if holds else {"lease_lost": True})})
            if new_status == "dead" and row.status != "dead":
                append_event(conn, logged, "task_dead", task_id,
                             {"failures": failures, "max_failures": max_failures, "run_id": run.run_id})
            return _task(_get(conn, task_id, self.where))

    def skip_firing(self, task_id: str, owner: str, due_at: _Moment, next_run: _Moment | None) -> TaskRecord:
        """Move a task held by `owner` past a firing it will not run (`misfire: skip`): its
        next run becomes `next_run` (None: a schedule is `completed`) and the lease is released."""
        check_key(task_id, "task id")
        check_text(owner=owner)
        due = stamp(due_at, "due_at")
        nxt = None if next_run is None else stamp(next_run, "next_run")
        with self._write(f"skipping a firing of the task {task_id!r}") as conn:
            row = _get(conn, task_id, self.where)
            if row.lease_owner != owner:
                raise StoreError(f"{owner!r} does not hold the lease of the task {task_id!r}: claim it first")
            status = "completed" if nxt is None and row.status in RUNNABLE and row.kind == "schedule" else row.status
            logged = now_()
            _change(conn, row, self.where, next_run=nxt, status=status, lease_owner=None, lease_until=None,
                    updated_at=logged)
            append_event(conn, logged, "firing_skipped", task_id, {"owner": owner, "due_at": due, "next_run": nxt})
            return _task(_get(conn, task_id, self.where))

    def open_run(self, task_id: str) -> TaskRun | None:
        """The task's run that started and has not finished (an interrupted firing), if any."""
        check_key(task_id, "task id")
        with self._read(f"reading the open run of the task {task_id!r}") as conn:
            row = conn.execute(select(TASK_RUNS).where(TASK_RUNS.c.task_id == task_id,
                                                       TASK_RUNS.c.status == "running")
                               .order_by(TASK_RUNS.c.id).limit(1)).first()
        return None if row is None else _run(row, new=False)

    def leases(self) -> list[Lease]:
        """The leases held now (expired or not), to find those of processes that are gone."""
        with self._read("reading the leases") as conn:
            rows = conn.execute(select(TASKS).where(TASKS.c.lease_owner.is_not(None))).all()
        return [Lease(task_id=r.id, owner=r.lease_owner, until=r.lease_until, version=int(r.version)) for r in rows
                if isinstance(r.lease_owner, str) and isinstance(r.version, int)]  # else quarantined: never fired

    def expire_lease(self, task_id: str, owner: str, why: str) -> bool:
        """End `owner`'s lease at once (its process is gone): the task may be claimed again."""
        check_key(task_id, "task id")
        check_text(owner=owner, why=why)
        with self._write(f"expiring the lease of the task {task_id!r}") as conn:
            row = _get(conn, task_id, self.where)
            if row.lease_owner != owner:
                return False
            logged = now_()
            _change(conn, row, self.where, lease_owner=None, lease_until=None, updated_at=logged)
            append_event(conn, logged, "lease_expired", task_id, {"owner": owner, "why": why})
            return True

    def runs(self, task_id: str) -> list[TaskRun]:
        """The runs of a task, in the order they started."""
        check_key(task_id, "task id")
        with self._read(f"reading the runs of the task {task_id!r}") as conn:
            rows = conn.execute(select(TASK_RUNS).where(TASK_RUNS.c.task_id == task_id)
                                .order_by(TASK_RUNS.c.id)).all()
        return [_run(row, new=False) for row in rows]


now_ = now  # the wall clock, where a parameter named `now` hides it


def _get(conn: Connection, id: str, path: object) -> Row[Any]:
    row = conn.execute(select(TASKS).where(TASKS.c.id == id)).first()
    if row is None:
        raise StoreError(f"no task with id {id!r} in {path}; `chainlang tasks list` shows the tasks")
    return row


def _change(conn: Connection, row: Row[Any], path: Any, **values: Any) -> int:
    """Update a task read in this transaction, only if no one changed it since; its new version."""
    return versioned_update(conn, TASKS, row, "task", path, **values)


def _unleased(at: str) -> Any:
    return or_(TASKS.c.lease_until.is_(None), TASKS.c.lease_until < at)


def _check_holder(row: Row[Any], owner: str, at: str, path: object) -> None:
    if row.lease_owner != owner:
        holder = "nobody" if row.lease_owner is None else repr(row.lease_owner)
        raise StoreError(f"{owner!r} does not hold the lease of the task {row.id!r} in {path} ({holder} does): "
                         "claim it first")
    if row.lease_until < at:
        raise StoreError(f"the lease of {owner!r} on the task {row.id!r} expired at {row.lease_until}; "
                         "claim it again before starting a run")


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise StoreError(f"a task's {name} is one of {', '.join(choices)}, not {value!r}")


def _check_count(name: str, value: object, least: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise StoreError(f"{name} takes a whole number >= {least}, not {value!r}")


def _run(row: Row[Any], new: bool) -> TaskRun:
    return TaskRun(id=int(row.id), task_id=row.task_id, run_id=row.run_id, transcript=row.transcript,
                   due_at=row.due_at, started_at=row.started_at, finished_at=row.finished_at, status=row.status,
                   error=None if row.error is None else json.loads(row.error), new=new)


def _lease_span(id: str, owner: str, now: _Moment, ttl_seconds: float) -> tuple[str, str]:
    """The checked arguments of a lease: its start and its end, as stored."""
    check_key(id, "task id")
    check_text(owner=owner)
    at = stamp(now, "now")
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, (int, float)) or not ttl_seconds > 0:
        raise StoreError(f"ttl_seconds must be a number of seconds > 0, not {ttl_seconds!r}")
    return at, stamp(datetime.fromisoformat(at) + timedelta(seconds=ttl_seconds), "the lease's end")
