"""What `chainlang serve` does for a project, apart from HTTP: take an external event
(`accept`), fire a due task (`fire_task`), take up what a stopped serve left (`recover`).

Every event taken is claimed in the store's emits (its `Idempotency-Key`, or one made from
its run id) before its hooks fire, and answered only once its transcript has begun: on a
restart, `recover` resumes each claimed emit from its transcript; a claim whose transcript
never began was never acknowledged, so it is dropped (the sender, who got no answer, may
send it again with the same key).

An event is delivered to the runs waiting for it (§15, runtime/deliver.py) after its claim and
before its hooks fire and serve answers; serve/waits.py then resumes those runs.

The hooks in force come from `projects.Projects`, which loads them again when the project
changes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from chainlang.engine import engine_for
from chainlang.errors import RunInUse, UsageError
from chainlang.serve.ledger import Ledger

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.serve.projects import Projects
    from chainlang.runtime.emit import EmitResult, Project
    from chainlang.runtime.engine import Engine as RunEngine
    from chainlang.serve.metrics import Metrics
    from chainlang.serve.scheduler import Firing
    from chainlang.serve.waits import WaitKeeper
    from chainlang.store import Store

__all__ = ["Engine", "Reply"]

log = logging.getLogger("chainlang.serve")



class NotDelivered(UsageError):
    """The store failed while delivering an event to the waiting runs: serve answers 503."""


@dataclass
class Reply:
    """An answer to an HTTP request: its status code and JSON body."""

    code: int
    body: dict[str, Any]


class _Started:
    """A progress view that notes when the transcript's first record is written, and counts
    the steps that end."""

    def __init__(self, metrics: "Metrics") -> None:
        self.began = asyncio.Event()
        self.metrics = metrics

    def record(self, rec: Any) -> None:
        self.began.set()
        if getattr(rec, "TYPE", None) == "step_finished":
            self.metrics.steps.labels(status=str(getattr(rec, "status", "?"))).inc()

    def note(self, text: str) -> None:
        log.info("%s", text)

    def close(self) -> None:
        self.began.set()


@dataclass
class Engine:
    """What serve's request handlers share: the project root, the store, the loaded projects."""
    root: Path
    store: "Store"
    projects: Projects
    metrics: "Metrics"
    tools: tuple[str, ...] = ()
    registry: "Registry | None" = None
    decider: Any = None
    jobs: dict[str, asyncio.Task[Any]] = field(default_factory=dict)  # the emits running, by run id
    accepting: bool = True
    ledger: Ledger | None = None
    waits: "WaitKeeper | None" = None  # resumes the waiting runs an event was delivered to (serve/waits.py)
    _key_bytes: bytes | None = None
    _secrets: tuple[Any, Any] | None = None  # (config, its redactor)
    _plans: dict[Any, Any] = field(default_factory=dict)  # (project, task, definition) -> TaskFiring
    _began: dict[str, asyncio.Event] = field(default_factory=dict)  # run id -> set once its transcript began
    _delivered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # run id -> the waits its event went to

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.store)

    @functools.cached_property
    def runs_dir(self) -> Path:
        """Where its runs' transcripts go ([runs] dir), read once."""
        from chainlang.config.project import find_project_config
        from chainlang.errors import ConfigError
        from chainlang.journal.retention import runs_dir

        try:
            config = find_project_config(self.root)
        except ConfigError:
            config = None  # serve reports its configuration's problems elsewhere
        return runs_dir(config, self.root)

    def _key(self) -> bytes:
        from chainlang.runtime.admission import project_key

        if self._key_bytes is None:
            self._key_bytes = project_key(self.root, create=True)
        return self._key_bytes

    def _redactor(self, project: "Project") -> Any:
        from chainlang.runtime.admission import run_secrets

        if self._secrets is None or self._secrets[0] is not project.config:
            self._secrets = (project.config, run_secrets(project.config))
        return self._secrets[1]

    # -- external events

    async def accept(self, name: str, data: Any, key: str | None, wait: bool) -> Reply:
        """Take one external event: check it, claim it, start its hooks; answer once its
        transcript has begun (`wait`: once its hooks' actions have ended)."""
        from chainlang.compile.wait_graph import ANSWER_EVENT
        from chainlang.runtime.admission import new_run_id, take_lock
        from chainlang.runtime.deliver import check_answer
        from chainlang.runtime.emit import check_payload
        from chainlang.store import StoreError
        from chainlang.store.base import check_key

        if not self.accepting:
            return Reply(503, {"error": "serve is stopping; send the event again to the next serve"})
        project = self.projects.current()  # a few microseconds, unless the project changed
        if project.hooks is None:
            problems = [f"{d.file}:{d.line}:{d.column}: {d.message}" for d in project.diagnostics
                        if d.severity == "error"]
            return Reply(503, {"error": "the project's hooks have errors: fix them (chainlang check)",
                               "diagnostics": problems[:20]})
        try:
            problems = check_payload(project, name, data)
        except UsageError as exc:
            spec = project.registry.get(name)
            self.metrics.rejected.labels(reason="unknown_event" if spec is None else "not_external").inc()
            return Reply(404 if spec is None else 400, {"error": str(exc)})
        if problems:
            self.metrics.rejected.labels(reason="invalid").inc()
            return Reply(422, {"error": f"the data is not a valid payload of {name}", "errors": problems[:50]})
        if name == ANSWER_EVENT:  # §15: an answer to no waiting question, or outside its choices: refused
            try:
                problems = await asyncio.to_thread(check_answer, self.store, data)
            except StoreError as exc:
                return Reply(503, {"error": str(exc)})
            if problems:
                self.metrics.rejected.labels(reason="invalid").inc()
                return Reply(422, {"error": "the answer is refused; the run keeps waiting", "errors": problems})
        if key is not None:
            try:
                check_key(key, "Idempotency-Key")
            except StoreError as exc:
                self.metrics.rejected.labels(reason="bad_key").inc()
                return Reply(400, {"error": str(exc)})
        run_id = new_run_id()
        where = self.runs_dir / f"{run_id}.jsonl"
        claim_key = key if key is not None else f"serve:{run_id}"
        # the transcript's lock before the claim: a claimed emit whose lock is free is one that
        # no process runs (its process died), so it can be taken over safely
        try:
            lock = take_lock(where)
        except UsageError as exc:  # a run id in use (never, with 40 random bits), or the disk refuses
            return Reply(503, {"error": str(exc)})
        try:
            assert self.ledger is not None
            claim = await self.ledger.claim(claim_key, name, run_id, str(where), data)
        except StoreError as exc:
            _discard(lock, where)
            return Reply(503, {"error": str(exc)})
        if claim.new and not self.accepting:  # the stop began meanwhile: recorded, the next serve fires it
            lock.release()
            return Reply(202, {"status": "accepted", "event": name, "run_id": run_id, "transcript": str(where),
                               "run": f"/runs/{run_id}", "note": "serve is stopping: the next serve runs it"})
        if claim.new:
            job = self._start(self._emit(project, claim_key, name, data, run_id, where, lock, _Started(self.metrics)),
                              run_id)
        else:
            _discard(lock, where)
            orphan = self._orphan(claim)
            if orphan is None:
                self.metrics.duplicates.inc()
                return Reply(200, {"status": "duplicate", "event": name, "run_id": claim.run_id,
                                   "previous": {"run_id": claim.run_id, "event": claim.event, "status": claim.status,
                                                "transcript": claim.transcript}})
            run_id, where = claim.run_id, Path(claim.transcript)  # its process died: take it over now
            job = self._start(self._take_up(claim, orphan), run_id)
        return await self._answer(job, run_id, where, name, wait)

    def _start(self, work: Any, run_id: str) -> "asyncio.Task[EmitResult | None]":
        job: asyncio.Task[EmitResult | None] = asyncio.create_task(work)
        self.jobs[run_id] = job
        job.add_done_callback(lambda _: self.jobs.pop(run_id, None))
        return job

    async def _answer(self, job: "asyncio.Task[EmitResult | None]", run_id: str, where: Path, name: str,
                      wait: bool) -> Reply:
        """202 once the job's transcript has begun; its result when it ended (or `wait`)."""
        started = self._began.setdefault(run_id, asyncio.Event())
        if not started.is_set() and not job.done():
            # a job that ends before its transcript began answers too; a callback instead of a
            # second task and asyncio.wait: two fewer tasks and their wake-ups per event
            job.add_done_callback(lambda _: started.set())
            await started.wait()
        self._began.pop(run_id, None)
        delivered = self._delivered.pop(run_id, [])
        if wait or job.done():
            try:
                result = await asyncio.shield(job)
            except NotDelivered as exc:
                return Reply(503, {"error": str(exc), "run_id": run_id})
            except UsageError as exc:
                return Reply(500, {"error": str(exc), "run_id": run_id})
            if result is None:  # another process runs it
                return Reply(200, {"status": "duplicate", "event": name, "run_id": run_id})
            return Reply(200, _result_body(result))
        return Reply(202, {"status": "accepted", "event": name, "run_id": run_id, "transcript": str(where),
                           "run": f"/runs/{run_id}", "delivered": delivered})

    async def _emit(self, project: "Project", claim_key: str, name: str, data: Any, run_id: str,
                    where: Path, lock: Any, started: "_Started") -> "EmitResult":
        """Deliver the event to the runs waiting for it, then fire its hooks under the
        transcript lock taken for it; record the end."""
        started.began = self._began.setdefault(run_id, asyncio.Event())
        delivered = await self._deliver(name, data, claim_key, run_id, lock)
        emitted = {"event": name, "data": data, "id": claim_key}
        header = _header(project, run_id, emitted, self.tools)
        began = time.perf_counter()
        self.metrics.active.inc()
        try:
            result = await self._fire(project, run_id, where, header, started, lock)
            result.delivered = delivered
            self.metrics.emitted(name, result, time.perf_counter() - began)
            if result.status != "interrupted":  # else left started: the next serve resumes it
                try:
                    assert self.ledger is not None
                    await self.ledger.finish(claim_key, result.status)
                except Exception as exc:
                    log.error("the emit %s ended %s but the store could not record it: %s", claim_key,
                              result.status, exc)
        finally:
            # the lock goes only once the store knows the end: a claim still 'started' whose lock
            # is free is then always one whose process died (or was cut), never one just ending
            self.metrics.active.dec()
            lock.release()
            self._began.pop(run_id, None)
            self._delivered.pop(run_id, None)
        return result

    async def _deliver(self, name: str, data: Any, claim_key: str, run_id: str, lock: Any) -> list[dict[str, Any]]:
        """§15: the runs waiting for the event get it first, recorded in the store before its
        hooks fire and before serve answers; serve then resumes them. Refused (NotDelivered)
        when the store fails: the claim stays open, so the event is not lost (sent again with
        its Idempotency-Key, or taken up by the next serve, it is delivered then)."""
        assert self.ledger is not None
        try:
            rows = await self.ledger.deliver(name, data, claim_key)
        except Exception as exc:
            lock.release()  # a claim 'started' whose lock is free: taken over by whoever comes next
            self._began.pop(run_id, None)
            log.error("the event %s (%s) could not be delivered to the waiting runs: %s", name, claim_key, exc)
            raise NotDelivered(f"the event could not be delivered to the runs waiting for it: {exc}; it is recorded: "
                               "send it again with the same Idempotency-Key, or the next serve delivers it") from None
        shown = [{"run_id": row.run_id, "step": row.step, "transcript": row.transcript, "engine": row.engine}
                 for row in rows]
        if rows:
            self._delivered[run_id] = shown
            log.info("%s delivered to %d waiting run(s): %s", name, len(rows), ", ".join(r.run_id for r in rows))
            if self.waits is not None:
                self.waits.settled(rows)
        return shown

    async def _fire(self, project: "Project", run_id: str, where: Path, header: dict[str, Any], started: Any,
                    lock: Any, task: tuple[str, Any] | None = None) -> "EmitResult":
        """Fire an event's hooks, or a task's action (`task`: its id and plan), on the project's
        engine: in this process, or on Temporal's workers (the transcript written here as the
        workflow goes)."""
        from chainlang.runtime.emit import fire
        from chainlang.runtime.engine import FireJob

        job = FireJob(project, run_id, header, decider=self.decider, top=task[1].top if task else None,
                      task=(task[0], task[1].digest) if task else None)
        return await fire(self.engine(project), job, where, self._key(), lock, self._redactor(project),
                          progress=started, notify=log.info)

    @staticmethod
    def engine(project: "Project") -> "RunEngine":
        """The engine that fires the project's hooks (chosen from its configuration)."""
        return engine_for(project.config)

    def _orphan(self, claim: Any) -> Any:
        """The lock of a claimed emit that nobody runs (its process died), else None."""
        from chainlang.journal.lock import RunInUse, RunLock

        if claim.status != "started" or claim.run_id in self.jobs:
            return None
        try:
            lock = RunLock.acquire(Path(claim.transcript), create=True)
        except (RunInUse, OSError):
            return None
        # the claim was read before the lock was taken: the process that ran it may have
        # recorded its end and let the lock go in between. Read again, now that no one can
        # (an end is recorded before the lock is released): still started means it died.
        try:
            fresh = self.store.get_emit(claim.key)
        except Exception:  # StoreError: cannot tell, so do not take it over now (recover tries again)
            fresh = None
        if fresh is None or fresh.status != "started":
            lock.release()
            return None
        return lock

    async def _take_up(self, claim: Any, lock: Any) -> "EmitResult | None":
        """Continue an emit whose process died: resume it from its transcript, or, when that
        never began, fire it from the payload kept with its claim. None: another process
        took it up first."""
        from chainlang.runtime.emit import EmitResult
        from chainlang.runtime.engine import EngineUnavailable

        where = Path(claim.transcript)
        project = self.projects.current()
        if where.is_file() and where.stat().st_size > 0:
            # the engine ends it: continued from its transcript here, or, on Temporal, where it went on
            lock.release()  # a resume takes it again (a process that takes it in between resumes it instead)
            started = _Started(self.metrics)
            started.began = self._began.setdefault(claim.run_id, asyncio.Event())
            assert self.ledger is not None
            try:
                result = await self.engine(project).ended(
                    project, claim.run_id, claim.event, where, tools=self.tools, registry=self.registry,
                    notify=log.info, decider=self.decider, progress=started)
            except RunInUse:
                return None  # another process took it up first
            except EngineUnavailable:
                raise  # left started: the next recover asks again
            except UsageError as exc:
                log.error("could not resume the emit %s: %s", claim.key, exc)
                await self.ledger.finish(claim.key, "failed")
                raise
            if isinstance(result, EmitResult):
                await self.ledger.finish(claim.key, result.status)
                self.metrics.emitted(result.event, result, 0.0)
                return result
            return None
        if claim.data is None:  # a claim of an older chainlang, without its payload: it cannot be fired
            lock.release()
            assert self.ledger is not None
            await self.ledger.finish(claim.key, "failed")
            log.error("the emit %s never began and its payload was not kept; send it again with a new key", claim.key)
            return None
        if project.hooks is None:
            lock.release()
            return None
        return await self._emit(project, claim.key, claim.event, claim.data, claim.run_id, where, lock,
                                _Started(self.metrics))

    # -- scheduled tasks

    async def fire_task(self, firing: "Firing") -> tuple[str, Any]:
        """Run one firing of a scheduled task (or resume it); its final status and error.
        `ELSEWHERE` when another live process holds its transcript: that process runs it
        (this one lost the lease to it, or took over the lease of one paused) and records its end."""
        from chainlang.runtime.admission import take_lock
        from chainlang.serve.scheduler import ELSEWHERE
        from chainlang.serve.transcript_locks import transcript_holder
        from chainlang.tasks.firing import DUE_EVENT

        where = Path(firing.run.transcript)
        began = time.perf_counter()
        self.metrics.active.inc()
        try:
            if firing.resumed and await asyncio.to_thread(transcript_holder, where) is not None:
                return ELSEWHERE, None
            if firing.resumed and where.is_file() and where.stat().st_size > 0:
                project = self.projects.current()
                try:  # the engine ends it: continued from its transcript, or, on Temporal, where it went on
                    result: Any = await self.engine(project).ended(
                        project, firing.run.run_id, DUE_EVENT, where, tools=self.tools, registry=self.registry,
                        notify=log.info, decider=self.decider)
                except UsageError:
                    if await asyncio.to_thread(transcript_holder, where) is not None:
                        return ELSEWHERE, None  # taken by another process since it was looked at
                    raise
            else:
                project = self.projects.current()
                if project.hooks is None:
                    return "failed", {"type": "invalid", "message": "the project's hooks have errors"}
                plan = await self._plan(project, firing.task)
                if not plan.ok:
                    shown = "; ".join(f"{d.line}:{d.column}: {d.message}" for d in plan.diagnostics
                                      if d.severity == "error")
                    return "failed", {"type": "invalid", "message": f"the task's action does not check: {shown}"}
                data = {"task_id": firing.task.id, "due_at": firing.run.due_at, "late_ms": round(firing.late_ms, 3)}
                header = _header(project, firing.run.run_id, {"event": DUE_EVENT, "data": data,
                                                              "task": firing.task.id}, self.tools)
                header["file_sha256"] = plan.digest
                # the scheduler's lock, held until the store knows the end; else (a resumed firing whose
                # transcript never began) taken here
                try:
                    lock = firing.lock if firing.lock is not None else take_lock(where)
                except UsageError:
                    if await asyncio.to_thread(transcript_holder, where) is not None:
                        return ELSEWHERE, None
                    raise
                try:
                    result = await self._fire(project, firing.run.run_id, where, header, _Started(self.metrics),
                                              lock, (firing.task.id, plan))
                finally:
                    if lock is not firing.lock:
                        lock.release()
        except UsageError as exc:
            return "failed", {"type": "usage", "message": str(exc)}
        finally:
            self.metrics.active.dec()
        self.metrics.fired(result.status, time.perf_counter() - began, firing.late_ms / 1000)
        return result.status, result.error

    async def prepare_task(self, task: Any) -> None:
        """Check and compile a task's action before its moment (the scheduler claims ahead)."""
        project = self.projects.current()
        if project.hooks is not None:
            await self._plan(project, task)

    async def _plan(self, project: "Project", task: Any) -> Any:
        """The task's firing checked and compiled, kept while the project and task are unchanged."""
        import json

        from chainlang.tasks.firing import task_firing

        key = (id(project), task.id, json.dumps(task.definition, sort_keys=True))
        found = self._plans.get(key)
        if found is None:
            found = await asyncio.to_thread(task_firing, project, task)
            if len(self._plans) >= 1000:
                self._plans.clear()
            self._plans[key] = found
        return found

    # -- after a stop

    async def recover(self) -> dict[str, int]:
        """Take up the emits whose process died (those nobody holds): resume each from its
        transcript, or fire it from its kept payload when its transcript never began. Safe
        beside other serve processes on the store: one that runs an emit holds its lock."""
        from chainlang.runtime.emit import EmitResult

        counts = {"resumed": 0, "busy": 0, "failed": 0}
        for claim in await asyncio.to_thread(self.store.started_emits):
            if not self.accepting:  # stopping: the next serve takes up the rest
                break
            lock = self._orphan(claim)
            if lock is None:
                counts["busy"] += 1
                continue
            try:
                result = await self._start(self._take_up(claim, lock), claim.run_id)
            except UsageError:
                counts["failed"] += 1
                continue
            counts["resumed" if isinstance(result, EmitResult) else "busy"] += 1
        return counts

    async def drain(self, grace: float) -> int:
        """Stop taking events; let the running ones end within `grace` s; cancel the rest
        (they record `interrupted` and stay claimed, to be resumed). How many were cancelled."""
        self.accepting = False
        jobs = set(self.jobs.values())
        if not jobs:
            return 0
        _, pending = await asyncio.wait(jobs, timeout=grace)
        for job in pending:
            job.cancel()
        if pending:
            await asyncio.wait(pending)
        return len(pending)

    # -- reading runs

    def run_info(self, run_id: str) -> dict[str, Any] | None:
        """What `GET /runs/ID` answers: the run's state read from its transcript (see
        chainlang.report.status; `status: unreadable` for a transcript it cannot read)."""
        from chainlang.report.status import run_info

        return run_info(self.runs_dir, run_id)


@functools.lru_cache(maxsize=64)
def _resolved(root: Path) -> str:
    return str(root.resolve())


def _discard(lock: Any, where: Path) -> None:
    """Give up a transcript lock taken for a run that will not happen (and its head file)."""
    from chainlang.runtime.emit import release_unused

    release_unused(lock, where)


def _header(project: "Project", run_id: str, emitted: dict[str, Any], tools: Sequence[str]) -> dict[str, Any]:
    return {"chain": None, "file": _resolved(project.root), "file_sha256": project.digest, "inputs": {},
            "now": None, "started_at": datetime.now().astimezone().isoformat(), "tools": list(tools),
            "resumed": False, "emit": emitted}


def _result_body(result: "EmitResult") -> dict[str, Any]:
    body: dict[str, Any] = {"status": result.status, "event": result.event, "run_id": result.run_id,
                            "fired": result.fired, "transcript": str(result.transcript) if result.transcript else None,
                            "duration_ms": result.duration_ms}
    body["delivered"] = list(result.delivered)
    if result.error:
        body["error"] = result.error
    if result.errors:
        body["errors"] = result.errors
    return body
