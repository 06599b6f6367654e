"""What `chainlang serve` does for the runs waiting inside (LANGUAGE.md §15): it resumes them.

A waiting run holds no process: its wait is a row of the store (store/waits.py). Whoever
settles the row (an event delivered by serve or by `chainlang emit`, a deadline, `chainlang
waits cancel`) leaves a run that must go on; `WaitKeeper` resumes each such run on the
embedded engine (`resume_async(..., detach=True)`: a run that waits again ends as
`waiting` instead of holding a task of serve):

- at once, for the waits serve delivered an event to itself (`settled`);
- every turn of its loop (`run`): the rows settled and not finished (`unfinished_waits`:
  settled by another process, or left by a serve that stopped), so on startup too;
- at a deadline: the loop settles the waits whose deadline passed as `timed_out`
  (compare-and-set: a delivery that won first stays) and resumes their runs. It sleeps
  until the next deadline, at most `CHECK_SECONDS` (a deadline or a delivery written by
  another process is seen within that).

A run whose transcript another live process holds is left to it (a foreground `chainlang
run` watching its row, another serve resuming it); the next turn looks again. At most
`concurrency` runs are resumed at once, never one run twice; a resume that fails is logged
and tried again later (from 5 s, doubling, to 10 min), and never ends serve. A resume runs
its chain as serve keeps it prepared (serve/prepared_chains.py: loaded, checked and compiled
once per content of the file and version of the project); its transcript is read and
verified, and its lock taken, at every resume.

Runs of another engine (Temporal) wait in their workflow, with its own timer: serve neither
resumes them nor times them out; the waits it delivers an event to are handed to that engine
(chainlang.engine.wake_waits: the project's engine signals its workflows).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from chainlang.errors import RunInUse, UsageError
from chainlang.store.base import StoreError

if TYPE_CHECKING:
    from chainlang.serve.prepared_chains import PreparedChains
    from chainlang.serve.projects import Projects
    from chainlang.store import Store
    from chainlang.store.waits import WaitRow

__all__ = ["CHECK_SECONDS", "EMBEDDED", "WaitKeeper"]

log = logging.getLogger("chainlang.serve")

CHECK_SECONDS = 2.0  # the longest sleep of the loop: what other processes settled is seen within it
RETRY_FIRST = 5.0  # seconds before a failed resume is tried again (doubling each time)
RETRY_MOST = 600.0
PASSED_SECONDS = 0.5  # the pause while the earliest deadline has passed but is not serve's to settle
EMBEDDED = "embedded"  # the engine whose waiting runs serve resumes


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class WaitKeeper:
    """Resumes serve's waiting runs whose wait is settled (see the module docstring)."""

    root: Path
    store: "Store"
    tools: tuple[str, ...] = ()
    registry: Any = None
    decider: Any = None
    concurrency: int = 8
    clock: Callable[[], datetime] = _utc_now
    check_seconds: float = CHECK_SECONDS
    resuming: dict[str, "asyncio.Task[None]"] = field(default_factory=dict)  # run id -> its resume
    accepting: bool = True
    _slots: asyncio.Semaphore | None = None
    _retry: dict[str, tuple[float, float]] = field(default_factory=dict)  # run id -> (loop time, next pause)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _trouble: str | None = None
    _telling: set["asyncio.Task[None]"] = field(default_factory=set)  # deliveries handed to another engine
    # the project serve loaded for its events (serve/projects.py; None: one of its own, made at the first resume)
    projects: "Projects | None" = None
    _chains: "PreparedChains | None" = None  # the chains resumed, kept prepared (serve/prepared_chains.py)
    _own_projects: bool = False

    # -- what starts a resume

    def settled(self, rows: Iterable["WaitRow"]) -> None:
        """Waits this serve settled (an event it delivered): resume their runs now; hand
        those of another engine to it."""
        others = []
        for row in rows:
            if row.engine == EMBEDDED:
                self._resume(row)
            else:
                others.append(row)
        if others:
            telling = asyncio.create_task(self._tell(others))
            self._telling.add(telling)
            telling.add_done_callback(self._telling.discard)

    async def _tell(self, rows: list["WaitRow"]) -> None:
        """The seam to the other engines (chainlang.engine.wake_waits: Temporal's workflows are
        signalled). What cannot be told now is logged: the store has the delivery."""
        from chainlang.engine import wake_waits

        try:
            for problem in await wake_waits(self.root, rows):
                log.warning("%s", problem)
        except Exception:  # a bug there must not end serve: the delivery is in the store
            log.exception("could not tell the engine of run(s) %s that their wait is settled",
                          ", ".join(row.run_id for row in rows))

    async def turn(self) -> dict[str, int]:
        """One turn of the loop: settle the waits past their deadline, then resume every run
        whose wait is settled and not finished. How many of each."""
        from chainlang.runtime.wait_step import utc_stamp

        counts = {"timed_out": 0, "resumed": 0}
        due = await asyncio.to_thread(self.store.due_waits, utc_stamp(self.clock()))
        for row in (row for row in due if row.engine == EMBEDDED):  # a workflow has its own timer
            settled = await asyncio.to_thread(self.store.settle_wait, row.run_id, row.step, "timed_out")
            if settled is not None:  # else settled by something else first: the scan below finds it
                counts["timed_out"] += 1
                log.info("run %s: the wait at step %s for %s passed its deadline %s", row.run_id, row.step,
                         row.event, row.deadline)
        for row in await asyncio.to_thread(self.store.unfinished_waits):
            if row.engine == EMBEDDED:
                counts["resumed"] += self._resume(row)
        return counts

    async def run(self, stopping: asyncio.Event) -> None:
        """Turn until `stopping` is set, sleeping until the next deadline (at most
        `check_seconds`). Never ends on an error: logged once while it lasts."""
        while not stopping.is_set() and self.accepting:
            pause = self.check_seconds
            try:
                await self.turn()
                pause = await self._until_next()
                if self._trouble is not None:
                    log.info("waits: the store can be read again; waiting runs are resumed")
                self._trouble = None
            except StoreError as exc:
                self._troubled(f"the store cannot be read: {exc}")
            except Exception as exc:  # a bug must not stop every waiting run for good
                self._troubled(f"resuming the waiting runs failed: {type(exc).__name__}: {exc}", exc)
            self._wake.clear()
            sleeper = asyncio.create_task(self._wake.wait())
            stopper = asyncio.create_task(stopping.wait())
            await asyncio.wait({sleeper, stopper}, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            stopper.cancel()

    def wake_up(self) -> None:
        """Take a turn now (a wait was settled or registered here)."""
        self._wake.set()

    def _troubled(self, why: str, exc: BaseException | None = None) -> None:
        if why != self._trouble:
            log.error("waits: %s (trying again every %gs)", why, self.check_seconds, exc_info=exc)
        self._trouble = why

    async def _until_next(self) -> float:
        """Seconds to the next deadline of a wait, at most `check_seconds`."""
        deadline = await asyncio.to_thread(self.store.next_wait_deadline)
        if deadline is None:
            return self.check_seconds
        try:
            moment = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
        except ValueError:  # a hand-edited row: the next turn settles it as passed
            return 0.0
        left = (moment - self.clock()).total_seconds()
        if left <= 0:  # the turn settled the embedded ones: a passed deadline left is a workflow's (its timer's)
            return min(PASSED_SECONDS, self.check_seconds)
        return min(self.check_seconds, left)

    # -- one resume

    def _resume(self, row: "WaitRow") -> int:
        """Start resuming the run of `row` unless it is being resumed, or failed a moment ago."""
        if not self.accepting or row.run_id in self.resuming:
            return 0
        retry = self._retry.get(row.run_id)
        if retry is not None and asyncio.get_running_loop().time() < retry[0]:
            return 0
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        job = asyncio.create_task(self._resumed(row), name=f"resume {row.run_id}")
        self.resuming[row.run_id] = job
        job.add_done_callback(lambda _: self.resuming.pop(row.run_id, None))
        return 1

    async def _resumed(self, row: "WaitRow") -> None:
        from chainlang.serve.transcript_locks import transcript_holder

        assert self._slots is not None
        async with self._slots:
            where = Path(row.transcript)
            try:
                # a live process holds it (a foreground run watching its row, another serve): its own to go on
                if await asyncio.to_thread(transcript_holder, where) is not None:
                    return
                fresh = await asyncio.to_thread(self.store.get_wait, row.run_id, row.step)
                if fresh is None or fresh.finished_at is not None:  # went on meanwhile
                    return
                result = await self._continue(where)
            except RunInUse:  # taken by another process between the look and the resume
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # UsageError (the chain changed, a transcript gone...), a bug
                self._failed(row, exc)
                return
            self._retry.pop(row.run_id, None)
            status = getattr(result, "status", "?")
            if status != "interrupted":  # it went on past its wait: no one need resume it for that wait again
                try:
                    await asyncio.to_thread(self.store.finish_wait, row.run_id, row.step)
                except Exception as exc:  # the next turn finds the row again; resuming a finished run is a no-op
                    self._troubled(f"could not mark the wait of run {row.run_id} finished", exc)
            log.info("run %s resumed after its wait at step %s (%s): %s", row.run_id, row.step,
                     {"delivered": "event delivered"}.get(row.status, row.status.replace("_", " ")), status)

    async def _continue(self, where: Path) -> Any:
        from chainlang.runtime.resume import resume_async
        from chainlang.runtime.waiting import KEPT_STORE

        # its waits are read through serve's store (this resume's task only: a context variable)
        KEPT_STORE.set((os.path.realpath(self.root), self.store))
        return await resume_async(where, tools=self.tools, registry=self.registry, notify=_quiet_note,
                                  decider=self.decider, detach=True, prepare_chain=self.chains())

    def chains(self) -> "PreparedChains":
        """The chains its resumes run, each prepared once per content and version of the project."""
        if self._chains is None:
            from chainlang.serve.prepared_chains import PreparedChains

            if self.projects is None:
                from chainlang.serve.projects import Projects

                self.projects, self._own_projects = Projects(self.root, self.tools, self.registry, self.store), True
            self._chains = PreparedChains(self.projects, self.tools, self.registry)
        return self._chains

    def _failed(self, row: "WaitRow", exc: BaseException) -> None:
        now = asyncio.get_running_loop().time()
        pause = self._retry.get(row.run_id, (0.0, RETRY_FIRST))[1]
        self._retry[row.run_id] = (now + pause, min(pause * 2, RETRY_MOST))
        said = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        log.error("run %s could not be resumed after its wait at step %s: %s (trying again in %gs; or resume it "
                  "with chainlang resume %s)", row.run_id, row.step, " ".join(said.split()), pause, row.transcript,
                  exc_info=None if isinstance(exc, UsageError) else exc)

    # -- stopping

    async def drain(self, grace: float) -> int:
        """Resume no more; let the resumes under way end within `grace` s, cancel the rest
        (their runs record `interrupted`). How many were cancelled."""
        self.accepting = False
        jobs = set(self.resuming.values())
        if not jobs:
            self._close_projects()
            return 0
        _, pending = await asyncio.wait(jobs, timeout=grace)
        cut = [run_id for run_id, job in self.resuming.items() if job in pending]
        for job in pending:
            job.cancel()
        if pending:
            await asyncio.wait(pending)
            # their waits are finished, so no serve finds them again: say how to go on
            log.warning("stopped the resumed run(s) %s past the grace period: they are recorded interrupted; "
                        "continue each with chainlang resume .chainlang/runs/RUN_ID.jsonl", ", ".join(cut))
        self._close_projects()
        return len(pending)

    def _close_projects(self) -> None:
        if self._own_projects and self.projects is not None:  # serve's own is closed by serve
            self.projects.close()


def _quiet_note(text: str) -> None:
    """What a resume notes (e.g. that serve's --tools differ from the run's): serve's log."""
    log.info("%s", text)
