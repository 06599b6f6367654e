"""The scheduler of `chainlang serve` (LANGUAGE.md §12): fires the project's due tasks, each
once, with leases in the store.

One tick: read the due tasks; claim each (a lease in the store: another process or a
crashed one's successor cannot fire it meanwhile); decide the firing (`plan`); record the
run in the store (`start_run`: one run per due moment, ever) before anything runs; fire
it; then `finish_run` records the run's end, counts failures in a row (the task is `dead`
after `max_failures`), sets the next run and releases the lease, at once. While a firing
runs its lease is renewed. A run the store holds as started and not finished (a crash, or
a SIGTERM past the grace period) is resumed from its transcript, never fired again.

Missed firings (serve was not running when they were due, by more than `grace`) follow
the task's `misfire`: `skip` moves past them, `once` fires the latest, `all` fires each
(at most `MAX_CATCH_UP`, the latest ones), one per tick.

A task row the scheduler cannot read (a moment that is not ISO 8601, a definition that is
not JSON, a schedule it cannot evaluate) is **quarantined**: logged once with its id and
why, never fired, counted (`quarantined`, for /metrics and /healthz), and every other task
keeps firing. The loop itself never ends on an error: it logs it, says so in `trouble`
(/healthz: degraded) and tries again after a pause.

A lease that ran out while its firing still runs (a clock jump, a process paused longer
than the lease) is not taken over while the firing's transcript is locked by a live
process: that process still runs it, and records its end (`Store.finish_run` takes the end
of a run that is still open from the process that ran it, lease or not). Only a firing
whose transcript nobody holds is resumed by another process.

Time comes from an injectable clock (`now()`), so tests drive the scheduler with a fake
one and call `tick()`; `run()` is the loop serve uses, sleeping until the next due task.
Store calls run in a thread: a busy store must not stop the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, TypeVar

from chainlang.serve.transcript_locks import discard_lock as _discard
from chainlang.serve.transcript_locks import lock_new as _lock_new
from chainlang.serve.transcript_locks import transcript_holder
from chainlang.status import INTERNAL
from chainlang.store.base import StoreError

if TYPE_CHECKING:
    from chainlang.store import Store, TaskRecord, TaskRun
    from chainlang.schedules import Schedule

__all__ = ["ELSEWHERE", "Clock", "Firing", "Scheduler", "new_owner", "owner_is_gone"]

log = logging.getLogger("chainlang.serve")
_T = TypeVar("_T")


class Clock(Protocol):
    def now(self) -> datetime: ...


@dataclass(frozen=True)
class Firing:
    """One firing to run: the task, its run in the store, and whether that run is resumed."""

    task: "TaskRecord"
    run: "TaskRun"
    resumed: bool
    late_ms: float
    # the transcript's lock, taken by the scheduler before the run was recorded and held until
    # its end is (a new firing; None for a resumed one, whose resume takes the lock itself):
    # a run left open whose transcript nobody holds is then always one that no process runs
    lock: Any = field(default=None, compare=False)


# (firing) -> (final status, error): runs the action, writing the run's transcript
FireFn = Callable[[Firing], Awaitable[tuple[str, Any]]]

# what `fire` answers when another live process holds the firing's transcript (it runs it):
# this process neither runs it nor records an end for it
ELSEWHERE = "elsewhere"


def new_owner() -> str:
    """This process's name in leases: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def owner_is_gone(owner: str) -> bool:
    """Whether a lease's owner was a process of this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class Scheduler:
    """Fires the store's due tasks on serve's event loop."""
    store: "Store"
    clock: Clock
    fire: FireFn
    runs_dir: Path  # where the firings' transcripts go (the project's .chainlang/runs)
    owner: str = field(default_factory=new_owner)
    lease_seconds: float = 30.0
    max_failures: int = 3
    grace: timedelta = timedelta(seconds=60)  # later than this after its moment, a firing was missed
    max_running: int = 16
    poll_seconds: float = 0.5  # how often to look for tasks added by other processes
    running: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    on_finished: Callable[[Firing, str, float], None] | None = None  # metrics: firing, status, seconds
    rest_seconds: float = 60.0  # a task whose firing cannot be planned (its cron fails) is left alone this long
    lead: timedelta = timedelta(0)  # claim and prepare a firing this long before it is due (serve: 0.2 s)
    prepare: Callable[["TaskRecord"], Awaitable[None]] | None = None  # get a firing ready before its moment
    on_quarantine: Callable[[int], None] | None = None  # metrics: how many tasks are quarantined now
    scan_seconds: float = 30.0  # how often every row is read again (to quarantine, or to release)
    quarantined: dict[str, str] = field(default_factory=dict)  # task id -> why its row cannot be read
    trouble: str | None = None  # why the last turn of the loop failed (the store cannot be read...)
    _scanned: float | None = None  # loop time of the last scan
    _elsewhere: set[tuple[str, str]] = field(default_factory=set)  # (task, run) seen running in another process
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _resting: dict[str, float] = field(default_factory=dict)  # task id -> loop time it may be tried again
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(
        max_workers=2, thread_name_prefix="chainlang-scheduler"))

    def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> "asyncio.Future[_T]":
        """A store call in the scheduler's own threads: it never queues behind the tools of
        busy actions in the default pool, so a due task is not made late by them."""
        return asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    # -- the loop

    async def run(self, stopping: asyncio.Event) -> None:
        """Tick until `stopping` is set; sleep until the next due task (or the poll). Never
        ends on an error: it is logged (once while it lasts), kept in `trouble`, and the
        loop goes on after a pause. A task added or retried in this process (an event's
        action that schedules one) wakes it at once; those of other processes, the poll."""
        from chainlang.store.tasks import when_tasks_added

        loop = asyncio.get_running_loop()

        def added() -> None:  # from whichever thread wrote the task
            try:
                loop.call_soon_threadsafe(self.wake)
            except RuntimeError:  # the loop is closed: nothing to wake
                pass

        unsubscribe = when_tasks_added(added)
        try:
            await self._loop(stopping)
        finally:
            unsubscribe()

    async def _loop(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                if self._scanned is None or asyncio.get_running_loop().time() - self._scanned >= self.scan_seconds:
                    await self.scan()
                await self.tick()
                wait = await self._until_next()
                if self.trouble is not None:
                    log.info("scheduler: the store can be read again; tasks fire as scheduled")
                self.trouble = None
            except StoreError as exc:
                self._troubled(f"the store cannot be read: {exc}")
                wait = self.poll_seconds * 4
            except Exception as exc:  # a bug must not stop every task for good: say it, go on
                self._troubled(f"the scheduler failed: {type(exc).__name__}: {exc}", exc)
                wait = self.poll_seconds * 4
            self._wake.clear()
            sleeper = asyncio.create_task(self._wake.wait())
            stopper = asyncio.create_task(stopping.wait())
            await asyncio.wait({sleeper, stopper}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            stopper.cancel()

    def _troubled(self, why: str, exc: BaseException | None = None) -> None:
        if why != self.trouble:
            log.error("scheduler: %s (trying again every %gs)", why, self.poll_seconds * 4, exc_info=exc)
        self.trouble = why

    # -- quarantine

    async def scan(self) -> dict[str, str]:
        """Read every task row again: quarantine those that cannot be read, release those that
        can again (fixed, or gone). Returns the quarantined ones."""
        rows = await self._call(self.store.list_tasks)
        self._scanned = asyncio.get_running_loop().time()
        found: dict[str, str] = {}
        for task in rows:
            why = _unreadable(task)
            if why is not None:
                found[task.id] = why
        for task_id in [t for t in self.quarantined if t not in found]:
            self._release_quarantine(task_id)
        for task_id, why in found.items():
            self._quarantine(task_id, why)
        return dict(self.quarantined)

    async def health(self) -> list[str]:
        """What is wrong now, for /healthz (empty: nothing). A process that does not run the
        loop (an HTTP worker of `serve --workers`) scans the store itself, at most every
        `scan_seconds`."""
        if self._scanned is None or asyncio.get_running_loop().time() - self._scanned >= self.scan_seconds:
            try:
                await self.scan()
            except StoreError as exc:
                return [f"the store cannot be read: {exc}"]
        problems = [self.trouble] if self.trouble else []
        problems += [f"task {task_id} is quarantined: {why}" for task_id, why in sorted(self.quarantined.items())]
        return problems

    def _quarantine(self, task_id: str, why: str) -> None:
        if self.quarantined.get(task_id) == why:
            return
        self.quarantined[task_id] = why
        log.error("task %s is quarantined, it does not fire: %s; see chainlang tasks show %s, then fix the row or "
                  "cancel the task (chainlang tasks cancel %s)", task_id, why, task_id, task_id)
        if self.on_quarantine is not None:
            self.on_quarantine(len(self.quarantined))

    def _release_quarantine(self, task_id: str) -> None:
        if self.quarantined.pop(task_id, None) is None:
            return
        log.info("task %s can be read again (or is gone): it is no longer quarantined", task_id)
        if self.on_quarantine is not None:
            self.on_quarantine(len(self.quarantined))

    def wake(self) -> None:
        """Look at the store again now (a task was scheduled, or a firing ended)."""
        self._wake.set()

    async def _until_next(self) -> float:
        if len(self.running) >= self.max_running:
            return self.poll_seconds  # a firing that ends wakes the loop
        now = self.clock.now()
        # the tasks someone holds (this process's running firings too) are not waited for:
        # their end wakes the loop, or the poll finds them when their lease runs out; nor are
        # those left alone for now (quarantined, resting): the scan or the poll sees them again
        resting = asyncio.get_running_loop().time()
        skip = set(self.quarantined) | {t for t, until in self._resting.items() if until > resting}
        due = await self._call(self.store.next_due, now, skip)
        if due is None:
            return self.poll_seconds
        seconds = (datetime.fromisoformat(due) - self.lead - now).total_seconds()
        return max(0.0, min(self.poll_seconds, seconds))

    async def tick(self) -> int:
        """Claim and start the firings due now; return how many started."""
        now = self.clock.now()
        free = self.max_running - len(self.running)
        if free <= 0:
            return 0
        due = await self._call(self.store.due_tasks, now + self.lead,
                               free + len(self._resting) + len(self.quarantined))
        started = 0
        resting_now = asyncio.get_running_loop().time()
        for task in due:
            why = _unreadable(task)
            if why is not None:  # never fired; the others go on
                self._quarantine(task.id, why)
                continue
            self._release_quarantine(task.id)
            if task.id in self.running or self._resting.get(task.id, 0.0) > resting_now:
                continue
            if started >= free:
                break
            self._resting.pop(task.id, None)
            if task.lease_owner is not None and task.lease_owner != self.owner \
                    and await self._runs_elsewhere(task, resting_now):
                continue
            lease = await self._call(self.store.claim, task.id, self.owner, now, self.lease_seconds)
            if lease is None:  # another process took it in between
                continue
            if lease.version != task.version + 1:  # changed since read: another process may have fired it
                fresh = await self._call(self.store.get_task, task.id)
                if fresh is None or fresh.status not in ("pending", "active") or fresh.next_run is None \
                        or datetime.fromisoformat(fresh.next_run) > now + self.lead:
                    await self._call(self._release, task.id)
                    continue
                task = fresh
            self.running[task.id] = asyncio.create_task(self._guarded(task, now), name=f"task {task.id}")
            started += 1
        return started

    async def _runs_elsewhere(self, task: "TaskRecord", resting_now: float) -> bool:
        """Whether the task's open run (if any) is still run by a live process that holds its
        transcript, though that process's lease ran out (it was paused, or the clock jumped):
        then it is not taken over, and looked at again a while later."""
        open_run = await self._call(self.store.open_run, task.id)
        if open_run is None:
            return False
        pid = await asyncio.to_thread(transcript_holder, open_run.transcript)
        if pid is None:
            return False
        if (task.id, open_run.run_id) not in self._elsewhere:
            self._elsewhere.add((task.id, open_run.run_id))
            log.info("task %s: the lease of %s ran out at %s, but its firing %s still runs in process %s (it holds "
                     "the transcript): not taken over; that process records its end", task.id, task.lease_owner,
                     task.lease_until, open_run.run_id, pid or "?")
        self._resting[task.id] = resting_now + max(self.poll_seconds, self.lease_seconds / 3)
        return True

    async def recover(self) -> list[str]:
        """On start: end the leases of this host's processes that are gone, so their tasks
        (and runs left open) are taken up now instead of when the lease runs out."""
        freed = []
        for lease in await self._call(self.store.leases):
            if lease.owner != self.owner and owner_is_gone(lease.owner):
                if await self._call(self.store.expire_lease, lease.task_id, lease.owner,
                                           "its process is gone"):
                    freed.append(lease.task_id)
        return freed

    async def drain(self, grace: float) -> list[str]:
        """Let the running firings end within `grace` seconds; cancel the rest (their runs
        stay open in the store, to be resumed). Returns the ids of the cancelled ones."""
        if not self.running:
            return []
        _, pending = await asyncio.wait(set(self.running.values()), timeout=grace)
        cancelled = [task_id for task_id, job in self.running.items() if job in pending]
        for job in pending:
            job.cancel()
        if pending:
            await asyncio.wait(pending)
        return cancelled

    # -- one firing

    async def _guarded(self, task: "TaskRecord", now: datetime) -> None:
        try:
            await self._fire(task, now)
        except asyncio.CancelledError:
            await asyncio.shield(self._call(self._release, task.id))
            raise
        except StoreError as exc:
            log.error("task %s: %s", task.id, exc)
            await self._call(self._release, task.id)
        except Exception:  # e.g. a stored schedule that cannot be evaluated: leave it alone for a while
            log.exception("task %s: not fired (trying again in %gs)", task.id, self.rest_seconds)
            self._resting[task.id] = asyncio.get_running_loop().time() + self.rest_seconds
            await self._call(self._release, task.id)
        finally:
            self.running.pop(task.id, None)
            self.wake()

    def _release(self, task_id: str) -> None:
        try:
            self.store.release(task_id, self.owner)
        except StoreError as exc:
            log.error("task %s: %s", task_id, exc)

    async def _fire(self, task: "TaskRecord", now: datetime) -> None:
        from chainlang.runtime.admission import new_run_id

        timing, misfire = _timing(task)
        store = self.store
        open_run = await self._call(store.open_run, task.id)
        if open_run is not None:  # interrupted: resume it, whatever misfire says
            due_at = datetime.fromisoformat(open_run.due_at)
        else:
            due_at, skip = plan(timing, datetime.fromisoformat(str(task.next_run)), now, misfire, self.grace)
            if skip:
                nxt = timing.after(now)
                await self._call(store.skip_firing, task.id, self.owner, str(task.next_run), nxt)
                log.info("task %s: skipped the firings due from %s to %s (misfire: skip); next: %s", task.id,
                         task.next_run, now.isoformat(), nxt.isoformat() if nxt else "none")
                return
        if self.prepare is not None and open_run is None:
            await self.prepare(task)
        wait = (due_at - self.clock.now()).total_seconds()
        while wait > 0:  # claimed ahead (lead): start at its moment, not before (a timer may wake early)
            await asyncio.sleep(wait)
            now = self.clock.now()
            wait = (due_at - now).total_seconds()
        run_id = new_run_id()
        where = self.runs_dir / f"{run_id}.jsonl"
        lock = None if open_run is not None else await asyncio.to_thread(_lock_new, where)
        try:
            await self._run_and_finish(task, timing, misfire, due_at, now, run_id, where, lock)
        finally:
            if lock is not None:  # only now that the store knows the end (or the run stays open, cut)
                lock.release()

    async def _run_and_finish(self, task: "TaskRecord", timing: "Schedule", misfire: str, due_at: datetime,
                              now: datetime, run_id: str, where: Path, lock: Any) -> None:
        store = self.store
        run = await self._call(store.start_run, task.id, self.owner, run_id, str(where), due_at, now)
        if lock is not None and not run.new:  # that moment has a run already: its own transcript, not this one
            await asyncio.to_thread(_discard, lock, where)
            lock = None
        if run.status != "running":  # finished before its task was: only the task is behind
            status, error = run.status, run.error
        else:
            late = (now - due_at).total_seconds() * 1000
            renewer = asyncio.create_task(self._renew(task.id))
            started = asyncio.get_running_loop().time()
            firing = Firing(task, run, not run.new, max(0.0, late), lock)
            try:
                status, error = await self.fire(firing)
            except Exception as exc:  # a bug under the action: a failed run (counted), not a run left open
                log.exception("task %s: the firing of %s failed inside serve", task.id, run.due_at)
                status, error = "failed", {"type": INTERNAL, "message": f"{type(exc).__name__}: {exc}"}
            finally:
                renewer.cancel()
            if status == ELSEWHERE:  # another live process runs it (it holds the transcript) and records its end
                log.info("task %s: the firing due at %s is run by another process (it holds the transcript); "
                         "left to it", task.id, run.due_at)
                self._resting[task.id] = asyncio.get_running_loop().time() + max(self.poll_seconds,
                                                                                 self.lease_seconds / 3)
                await self._call(self._release, task.id)
                return
            if self.on_finished is not None:
                self.on_finished(firing, status, asyncio.get_running_loop().time() - started)
        try:
            nxt = next_run(timing, due_at, self.clock.now(), misfire)
        except Exception as exc:  # a stored schedule that cannot be evaluated: this run was its last
            log.error("task %s: its next firing cannot be computed (%s: %s); it ends here", task.id,
                      type(exc).__name__, exc)
            nxt = None
        for attempt in range(5):
            try:
                after = await self._call(store.finish_run, task.id, self.owner, due_at, status, self.clock.now(),
                                         next_run=nxt, error=error, max_failures=self.max_failures)
                break
            except StoreError:
                ended = [r for r in await self._call(store.runs, task.id) if r.due_at == run.due_at]
                if ended and ended[0].status == status:
                    # recorded already: by a process that resumed this run once its transcript was free
                    # (the end is the transcript's, so the same); only this lease is left to give up
                    log.info("task %s: the end of the firing due at %s was recorded by another process", task.id,
                             run.due_at)
                    await self._call(self._release, task.id)
                    return
                if not ended or ended[0].status != "running" or attempt == 4:
                    raise
                # another process holds a lease on it just now (it found the transcript held and gives it
                # back at once): try again, a few times
                await asyncio.sleep(self.poll_seconds)
        if status not in ("ok", "broken"):
            why = error.get("message") if isinstance(error, dict) else error
            log.warning("task %s: the firing due at %s ended %s (%d failed in a row): %s", task.id,
                        due_at.isoformat(), status, after.failures, why)
        if after.status == "dead" and task.status != "dead":
            log.error("task %s is dead after %d failed firings in a row; see chainlang tasks show %s, then "
                      "chainlang tasks retry %s", task.id, after.failures, task.id, task.id)

    async def _renew(self, task_id: str) -> None:
        said = False
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            lease = await self._call(self.store.renew, task_id, self.owner, self.clock.now(),
                                            self.lease_seconds)
            if lease is None and not said:  # taken while this process was paused, or its clock jumped
                log.warning("task %s: another process took its lease; this firing goes on (it holds the transcript), "
                            "and this process records its end", task_id)
            said = said or lease is None


def plan(timing: "Schedule", due: datetime, now: datetime, misfire: str,
         grace: timedelta) -> tuple[datetime, bool]:
    """The moment to fire for a task due at `due`, and whether to skip it instead."""
    from chainlang.schedules import due_firings

    if now - due <= grace:
        return due, False
    if misfire == "skip":
        return due, True
    missed = due_firings(timing, due - timedelta(microseconds=1), now, misfire)
    return (missed[0] if missed else due), False


def next_run(timing: "Schedule", due_at: datetime, now: datetime, misfire: str) -> datetime | None:
    """The next firing after the one due at `due_at` ended at `now`: for `misfire: all` the
    very next (it may be due already), else the first still to come."""
    return timing.after(due_at if misfire == "all" else max(due_at, now))


def _unreadable(task: "TaskRecord") -> str | None:
    """Why the scheduler cannot fire this task's row (None: it can): the store could not read
    it, or it is a schedule due to fire whose timing cannot be read."""
    if task.problem is not None:
        # a row that could never fire (archived, completed, dead: it says so readably) is no trouble here
        return None if task.status in ("completed", "archived", "dead") else task.problem
    if task.kind == "schedule" and task.status in ("pending", "active"):
        try:
            _timing(task)
        except StoreError as exc:
            return str(exc)
    return None


def _timing(task: "TaskRecord") -> tuple["Schedule", str]:
    from chainlang.schedules import MISFIRE, Schedule

    data = task.definition if isinstance(task.definition, dict) else {}
    try:
        timing = Schedule.from_json(dict(data["timing"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"the task {task.id!r} has no readable schedule ({exc}); cancel it and schedule it "
                         "again") from None
    misfire = data.get("misfire", "once")
    return timing, misfire if misfire in MISFIRE else "once"
