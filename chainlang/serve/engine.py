"""What `chainlang serve` does for a project, apart from HTTP: take an external event
(`accept`), fire a due task (`fire_task`), take up what a stopped serve left (`recover`).

Every event taken is claimed in the store's emits (its `Idempotency-Key`, or one made from
its run id) before its hooks fire, and answered only once its transcript has begun: on a
restart, `recover` resumes each claimed emit from its transcript; a claim whose transcript
never began was never acknowledged, so it is dropped (the sender, who got no answer, may
send it again with the same key).

The hooks in force are loaded once and loaded again when the project changes (`Projects`):
a file of the project, or the hooks stored by `task.register` in another process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from chainlang.pipeline import UsageError

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.runtime.emit import EmitResult, Project
    from chainlang.serve.metrics import Metrics
    from chainlang.serve.scheduler import Firing
    from chainlang.store import Store

__all__ = ["Engine", "Projects", "Reply"]

log = logging.getLogger("chainlang.serve")

_SCAN_EVERY = 1.0  # seconds between two looks at the project's files
_SKIP_DIRS = frozenset({".chainlang", ".git", "node_modules", "__pycache__", ".venv", "venv", "site"})


@dataclass
class Reply:
    """An answer to an HTTP request: its status code and JSON body."""

    code: int
    body: dict[str, Any]


class Projects:
    """The project's hooks in force, loaded again when a file or a stored hook changed."""

    def __init__(self, root: Path, tools: Sequence[str], registry: "Registry | None", store_path: Path) -> None:
        self.root, self.tools, self.registry, self.store_path = root, tuple(tools), registry, store_path
        self._files: tuple[Any, ...] = ()
        self._scanned = 0.0
        self._hooks: Any = None
        self._reader: sqlite3.Connection | None = None
        self.project: "Project | None" = None
        self.loads = 0

    def current(self) -> "Project":
        from chainlang.runtime.emit import load_project

        now = time.monotonic()
        files = self._files
        if now - self._scanned >= _SCAN_EVERY or self.project is None:
            files, self._scanned = self._fingerprint(), now
        hooks = self._stored_hooks()
        if self.project is None or files != self._files or hooks != self._hooks:
            self.project = load_project(self.root, self.tools, self.registry)
            self._files, self._hooks = files, hooks
            self.loads += 1
        return self.project

    def _fingerprint(self) -> tuple[Any, ...]:
        """The modification times of the project's directories and of its files that matter."""
        seen: list[Any] = []
        for directory, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            try:
                seen.append((directory, os.stat(directory).st_mtime_ns))
            except OSError:
                continue
            for name in sorted(files):
                if name.endswith((".yaml", ".yml", ".py", ".toml")):
                    try:
                        info = os.stat(os.path.join(directory, name))
                    except OSError:
                        continue
                    seen.append((name, info.st_mtime_ns, info.st_size))
            if len(seen) > 20_000:
                break
        return tuple(seen)

    def _stored_hooks(self) -> Any:
        """A stamp of the hooks stored in the store: it changes when one is added or cancelled."""
        if self._reader is None:
            if not self.store_path.is_file():
                return None
            try:
                self._reader = sqlite3.connect(f"file:{self.store_path}?mode=ro", uri=True, timeout=5,
                                               check_same_thread=False)
            except sqlite3.Error:
                return None
        try:
            return self._reader.execute("SELECT count(*), max(updated_at) FROM tasks WHERE kind = 'hook' "
                                        "AND status = 'active'").fetchone()
        except sqlite3.Error as exc:
            return ("unreadable", str(exc))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


class _Started:
    """A progress view that notes when the transcript's first record is written, and counts
    the steps that end."""

    def __init__(self, metrics: "Metrics") -> None:
        self.event = asyncio.Event()
        self.metrics = metrics

    def record(self, rec: Any) -> None:
        self.event.set()
        if getattr(rec, "TYPE", None) == "step_finished":
            self.metrics.steps.labels(status=str(getattr(rec, "status", "?"))).inc()

    def note(self, text: str) -> None:
        log.info("%s", text)

    def close(self) -> None:
        self.event.set()


@dataclass
class Engine:
    root: Path
    store: "Store"
    projects: Projects
    metrics: "Metrics"
    tools: tuple[str, ...] = ()
    registry: "Registry | None" = None
    decider: Any = None
    jobs: dict[str, asyncio.Task[Any]] = field(default_factory=dict)  # the emits running, by run id
    accepting: bool = True

    @property
    def runs_dir(self) -> Path:
        return self.root / ".chainlang" / "runs"

    def _key(self) -> bytes:
        from chainlang.runtime.runner import _project_key

        return _project_key(self.root, create=True)

    # -- external events

    async def accept(self, name: str, data: Any, key: str | None, wait: bool) -> Reply:
        """Take one external event: check it, claim it, start its hooks; answer once its
        transcript has begun (`wait`: once its hooks' actions have ended)."""
        from chainlang.runtime.emit import check_payload
        from chainlang.runtime.runner import new_run_id
        from chainlang.store import StoreError
        from chainlang.store.base import check_key

        if not self.accepting:
            return Reply(503, {"error": "serve is stopping; send the event again to the next serve"})
        project = await asyncio.to_thread(self.projects.current)
        if project.hooks is None:
            problems = [f"{d.file}:{d.line}:{d.column}: {d.message}" for d in project.diagnostics
                        if d.severity == "error"]
            return Reply(503, {"error": "the project's hooks have errors: fix them (chainlang check)",
                               "diagnostics": problems[:20]})
        try:
            problems = check_payload(project, name, data)
        except UsageError as exc:
            spec = project.registry.get(name)
            return Reply(404 if spec is None else 400, {"error": str(exc)})
        if problems:
            self.metrics.rejected.labels(reason="invalid").inc()
            return Reply(422, {"error": f"the data is not a valid payload of {name}", "errors": problems[:50]})
        if key is not None:
            try:
                check_key(key, "Idempotency-Key")
            except StoreError as exc:
                return Reply(400, {"error": str(exc)})
        run_id = new_run_id()
        where = self.runs_dir / f"{run_id}.jsonl"
        claim_key = key if key is not None else f"serve:{run_id}"
        try:
            claim = await asyncio.to_thread(self.store.claim_emit, claim_key, name, run_id, str(where))
        except StoreError as exc:
            return Reply(503, {"error": str(exc)})
        if not claim.new:
            self.metrics.duplicates.inc()
            return Reply(200, {"status": "duplicate", "event": name, "run_id": claim.run_id,
                               "previous": {"run_id": claim.run_id, "event": claim.event, "status": claim.status,
                                            "transcript": claim.transcript}})
        started = _Started(self.metrics)
        job = asyncio.create_task(self._emit(project, claim_key, key, name, data, run_id, where, started))
        self.jobs[run_id] = job
        job.add_done_callback(lambda _: self.jobs.pop(run_id, None))
        waiter = asyncio.create_task(started.event.wait())
        await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if wait or job.done():
            try:
                result = await asyncio.shield(job)
            except UsageError as exc:
                return Reply(500, {"error": str(exc), "run_id": run_id})
            return Reply(200, _result_body(result))
        return Reply(202, {"status": "accepted", "event": name, "run_id": run_id, "transcript": str(where),
                           "run": f"/runs/{run_id}"})

    async def _emit(self, project: "Project", claim_key: str, key: str | None, name: str, data: Any, run_id: str,
                    where: Path, started: _Started) -> "EmitResult":
        from chainlang.runtime.emit import fire
        from chainlang.runtime.runner import _take, run_secrets

        emitted = {"event": name, "data": data, "id": claim_key}
        header = _header(project, run_id, emitted, self.tools)
        began = time.perf_counter()
        lock = _take(where)
        try:
            result = await fire(project, run_id, where, header, None, None, started, log.info, self.decider,
                                self._key(), lock, run_secrets(project.config))
        finally:
            lock.release()
        self.metrics.emitted(name, result, time.perf_counter() - began)
        await asyncio.to_thread(self._finish_emit, claim_key, result.status)
        return result

    def _finish_emit(self, claim_key: str, status: str) -> None:
        from chainlang.store import StoreError

        if status == "interrupted":  # left started: the next serve resumes it
            return
        try:
            self.store.finish_emit(claim_key, status)
        except StoreError as exc:
            log.error("the emit %s ended %s but the store could not record it: %s", claim_key, status, exc)

    # -- scheduled tasks

    async def fire_task(self, firing: "Firing") -> tuple[str, Any]:
        """Run one firing of a scheduled task (or resume it); its final status and error."""
        from chainlang.runtime.emit import fire
        from chainlang.runtime.resume import resume_async
        from chainlang.runtime.runner import _take, run_secrets
        from chainlang.tasks.firing import DUE_EVENT, task_firing

        where = Path(firing.run.transcript)
        began = time.perf_counter()
        try:
            if firing.resumed and where.is_file() and where.stat().st_size > 0:
                result: Any = await resume_async(where, tools=self.tools, registry=self.registry,
                                                 notify=log.info, decider=self.decider)
            else:
                project = await asyncio.to_thread(self.projects.current)
                if project.hooks is None:
                    return "failed", {"type": "invalid", "message": "the project's hooks have errors"}
                plan = await asyncio.to_thread(task_firing, project, firing.task)
                if not plan.ok:
                    shown = "; ".join(f"{d.line}:{d.column}: {d.message}" for d in plan.diagnostics
                                      if d.severity == "error")
                    return "failed", {"type": "invalid", "message": f"the task's action does not check: {shown}"}
                data = {"task_id": firing.task.id, "due_at": firing.run.due_at, "late_ms": round(firing.late_ms, 3)}
                header = _header(project, firing.run.run_id, {"event": DUE_EVENT, "data": data,
                                                              "task": firing.task.id}, self.tools)
                header["file_sha256"] = plan.digest
                lock = _take(where)
                try:
                    result = await fire(project, firing.run.run_id, where, header, None, None,
                                        _Started(self.metrics), log.info,
                                        self.decider, self._key(), lock, run_secrets(project.config), plan.top)
                finally:
                    lock.release()
        except UsageError as exc:
            return "failed", {"type": "usage", "message": str(exc)}
        self.metrics.fired(result.status, time.perf_counter() - began, firing.late_ms / 1000)
        return result.status, result.error

    # -- after a stop

    async def recover(self) -> dict[str, int]:
        """Take up the emits a stopped serve left: resume those whose transcript began, drop
        the claims of those that never began (they were never acknowledged)."""
        from chainlang.runtime.resume import resume_async
        from chainlang.store import StoreError

        counts = {"resumed": 0, "dropped": 0, "busy": 0, "failed": 0}
        for claim in await asyncio.to_thread(self.store.started_emits):
            where = Path(claim.transcript)
            if not where.is_file() or where.stat().st_size == 0:
                await asyncio.to_thread(self.store.drop_emit, claim.key, "its transcript never began (serve "
                                        "stopped before answering the sender)")
                counts["dropped"] += 1
                continue
            try:
                result = await resume_async(where, tools=self.tools, registry=self.registry, notify=log.info,
                                            decider=self.decider)
            except UsageError as exc:
                if "in use by" in str(exc):
                    counts["busy"] += 1  # another process is running it
                    continue
                log.error("could not resume the emit %s: %s", claim.key, exc)
                counts["failed"] += 1
                try:
                    await asyncio.to_thread(self.store.finish_emit, claim.key, "failed")
                except StoreError:
                    pass
                continue
            counts["resumed"] += 1  # resuming recorded its end in the store (its header has the key)
            from chainlang.runtime.emit import EmitResult

            if isinstance(result, EmitResult):
                self.metrics.emitted(result.event, result, 0.0)
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
        """What `GET /runs/ID` answers: the run's state read from its transcript."""
        import re

        from chainlang.journal.reader import TranscriptError, read_transcript

        if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,99}", run_id):
            return None
        where = self.runs_dir / f"{run_id}.jsonl"
        if not where.is_file():
            return None
        try:
            transcript = read_transcript(where)
        except TranscriptError as exc:
            return {"run_id": run_id, "status": "unreadable", "error": str(exc)}
        started, finished = transcript.started, transcript.finished
        emitted = started.get("emit") or {}
        body: dict[str, Any] = {"run_id": run_id, "transcript": str(where),
                                "status": finished.get("status") if finished else "running",
                                "started_at": started.get("started_at"), "event": emitted.get("event"),
                                "chain": started.get("chain"), "records": len(transcript.records)}
        if emitted.get("task"):
            body["task_id"] = emitted["task"]
        if finished:
            body["duration_ms"] = finished.get("duration_ms")
            body["error"] = finished.get("error")
            body["fired"] = (finished.get("outputs") or {}).get("fired")
        return body


def _header(project: "Project", run_id: str, emitted: dict[str, Any], tools: Sequence[str]) -> dict[str, Any]:
    return {"chain": None, "file": str(project.root.resolve()), "file_sha256": project.digest, "inputs": {},
            "now": None, "started_at": datetime.now().astimezone().isoformat(), "tools": list(tools),
            "resumed": False, "emit": emitted}


def _result_body(result: "EmitResult") -> dict[str, Any]:
    body: dict[str, Any] = {"status": result.status, "event": result.event, "run_id": result.run_id,
                            "fired": result.fired, "transcript": str(result.transcript) if result.transcript else None,
                            "duration_ms": result.duration_ms}
    if result.error:
        body["error"] = result.error
    if result.errors:
        body["errors"] = result.errors
    return body
