"""`chainlang emit NAME --data JSON [--id KEY]` and `chainlang.emit(...)` (LANGUAGE.md §6.1):
an event from outside fires the matching `post:` hooks of the project.

The hooks in force are the project's hooks files and the hooks registered in Python
(checked first: a hooks file with errors stops the emit with its diagnostics). The data
is validated against the event's declared payload. Each emit writes one transcript
(`run_started` carries the event and its data), and ends when every action it started
has ended. With `--id`, the key is claimed in the project's store before anything runs:
the same key emitted again runs nothing (it reports the earlier emit), or, when that
earlier emit was interrupted, continues it from its transcript.
"""

from __future__ import annotations

from chainlang.status import RESUMABLE, Outcome

import hashlib
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from chainlang.compile.wait_graph import ANSWER_EVENT
from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.compile.hooks import CompiledHook, HookSet
    from chainlang.diagnostics import Diagnostic
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import Record
    from chainlang.output.progress import ProgressView
    from chainlang.registry.registry import Registry
    from chainlang.runtime.replay import Replay
    from chainlang.runtime.engine import Engine, EngineChooser, FireJob
    from chainlang.runtime.host import RunEnd
    from chainlang.redaction import Redactor
    from chainlang.runtime.session import Session

from chainlang.runtime.host import EXIT_CODES, exit_code  # noqa: F401 - every action ended ok (or nothing fired, or a duplicate) → 0


@dataclass
class EmitResult:
    """How an emit ended. `status`: ok (every action ended ok, or no hook fired), failed,
    limit, interrupted (resumable), invalid (the data or a hooks file has errors: nothing
    ran; see `errors` / `diagnostics`) or duplicate (`--id` was processed before: see
    `previous`). `fired` lists each hook that fired or was dropped, with how it ended."""

    run_id: str | None
    event: str
    status: Outcome
    fired: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    transcript: Path | None = None
    duration_ms: float = 0.0
    errors: list[str] = field(default_factory=list)  # why the data does not match the payload schema
    diagnostics: list["Diagnostic"] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)
    previous: dict[str, Any] | None = None  # a duplicate: the earlier emit (run_id, status, transcript)
    delivered: list[dict[str, Any]] = field(default_factory=list)  # the waiting runs it went to (§15)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "duplicate")

    def raise_for_status(self) -> None:
        """Raise the error of an emit that did not succeed; return for `ok` and `duplicate`.

        `invalid`: InputError when the data does not fit the event's payload schema (`errors`),
        else ChainInvalid (the hooks do not check: `diagnostics`); `failed`: RunFailed (an
        action's error, with no `__cause__`: the hooks' tools are not kept); `limit`:
        LimitExceeded; `interrupted`: RunInterrupted; `waiting`: RunWaiting. Each carries
        this result as `.result`."""
        from chainlang.runtime.raising import raise_for_status

        raise_for_status(self)

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)


@dataclass
class Project:
    """The hooks in force in a project, checked and compiled, with what firing them needs."""

    root: Path
    registry: "Registry"
    config: Any
    hooks: "HookSet | None"  # None: the hooks have errors (see diagnostics)
    digest: str  # sha256 of the hooks in force: a resume refuses hooks that changed
    diagnostics: list["Diagnostic"]
    sources: dict[str, Any]
    loader: Any


def load_project(start: Path, tools: Sequence[str] = (), registry: "Registry | None" = None) -> Project:
    """The project's hooks in force (hooks files and Python registrations), checked."""
    from chainlang.compile.hooks import compile_hooks
    from chainlang.config.project import find_project_config
    from chainlang.pipeline import check_project, context_files, default_registry, python_hook_files
    from chainlang.runtime.prepare import SubChains
    from chainlang.tasks.stored import stored_hook_files

    config = find_project_config(start)  # a ConfigError (a UsageError) for a chainlang.toml it cannot use
    root = Path(config.root) if config is not None else start
    registry = registry if registry is not None else default_registry(tools, start)
    context = context_files(start, set(), stored_hook_files)  # the hooks task.register stored are in force too
    hook_files = [f for f in context if f.chain.kind == "hooks"] + python_hook_files(registry)
    others = [f for f in context if f.chain.kind != "hooks"]
    diagnostics, project, project_registry = check_project(hook_files, registry, others)
    digest = hashlib.sha256()
    for f in hook_files:
        digest.update(f.path.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(f.source.text.encode("utf-8", "surrogatepass") + b"\0")
    failed = any(d.severity == "error" for d in diagnostics)
    hooks = None if failed else compile_hooks((h, f.chain) for f in hook_files for h in f.chain.hooks)
    by_chain = {id(f.chain): f for f in context}
    named = {name: by_chain[id(chain)] for name, chain in project.named.items() if id(chain) in by_chain}
    loader = SubChains(registry, project_registry, named, context, root)
    return Project(root, project_registry, config, hooks, digest.hexdigest(), diagnostics,
                   {f.path: f.source for f in hook_files}, loader)


def finite_float(text: str) -> float:
    """A JSON number as a float (json.loads' parse_float), unless it is too large for one:
    1e999 would be infinity, which is not JSON, and no transcript could record it."""
    import math

    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def check_payload(project: Project, name: str, data: Any) -> list[str]:
    """Why `data` is not a valid payload of external event `name` (empty: it is). Raises
    UsageError when `name` is not an external event of the project."""
    from chainlang.runtime.events import schema_checker

    spec = project.registry.get(name)
    if spec is None:
        guess = project.registry.suggest(name)
        hint = f"did you mean {guess}?" if guess else "declare it under events: in a hooks file of the project"
        raise UsageError(f"{name}: not an event of this project ({project.root}); {hint}")
    if spec.kind != "external":
        raise UsageError(f"{name} is a {spec.kind}, not an external event: emit fires events that come from outside "
                         f"(declared under events:); run a chain to call {name}")
    if spec.source.startswith("stdlib/") and name != ANSWER_EVENT:  # user.answered comes from outside (§15)
        raise UsageError(f"{name} is fired by chainlang itself (chainlang serve fires task.due when a scheduled "
                         "task is due); it cannot be emitted")
    if not isinstance(data, dict):
        return [f"the data must be a JSON object (the payload of {name}), not {type(data).__name__}"]
    return schema_checker(spec.params_schema)(data)


async def emit_async(
    name: str,
    data: Any,
    *,
    id: str | None = None,
    project: str | os.PathLike[str] | None = None,
    tools: Sequence[str] = (),
    registry: "Registry | None" = None,
    now: datetime | str | None = None,
    transcript: str | os.PathLike[str] | None = None,
    progress: "ProgressView | None" = None,
    notify: Callable[[str], None] | None = None,
    decider: Any = None,
    on_transcript: Callable[[Path], None] | None = None,
    engine_for: "EngineChooser | None" = None,
    loaded: "Project | None" = None,
    key: bytes | None = None,
) -> EmitResult:
    """Fire external event `name` with `data` in the project at `project` (default: the
    working directory, or the directory of the chainlang.toml above it). Raises UsageError
    for an unknown event, bad options or an unusable store; a failing action is a status.
    `engine_for` picks the engine (chainlang.engine.engine_for; None: the embedded one).
    `loaded`: the project's hooks checked already (the Python API's open project), instead
    of reading them again; `key`: the project's transcript key when the caller read it already."""
    from chainlang.journal.retention import runs_dir
    from chainlang.runtime.admission import new_run_id, parse_now, project_key, run_secrets, take_lock
    from chainlang.runtime.engine import FireJob, embedded_only
    from chainlang.runtime.session import log_note

    if loaded is None:
        start = Path(project) if project is not None else Path.cwd()
        if not start.is_dir():
            raise UsageError(f"{start}: not a directory (the project to emit in)")
        loaded = load_project(start, tools, registry)
    if loaded.hooks is None:
        return EmitResult(None, name, "invalid", diagnostics=loaded.diagnostics, sources=loaded.sources)
    problems = check_payload(loaded, name, data)
    if not problems and name == ANSWER_EVENT:  # §15: an answer outside the question's choices is refused
        problems = _answer_problems(loaded.root, data)
    if problems:
        return EmitResult(None, name, "invalid", errors=problems, diagnostics=loaded.diagnostics)
    engine = (engine_for or embedded_only)(loaded.config)
    pinned = parse_now(now) if isinstance(now, str) else now
    run_id = new_run_id()
    where = Path(transcript) if transcript is not None else runs_dir(loaded.config, loaded.root) / f"{run_id}.jsonl"
    earlier = None
    options = {"tools": tools, "registry": registry, "progress": progress, "notify": notify, "decider": decider}
    if id is not None:  # a key seen before: nothing new is written (a resumed emit records its end itself)
        earlier = _lookup(loaded.root, id)
        if earlier is not None:
            again = await _again(earlier, name, loaded, engine, options)
            if again is not None:
                return again
            run_id, where = earlier.run_id, Path(earlier.transcript)  # its process died before it began
            data = earlier.data
    if _holds_records(where):
        raise UsageError(f"{where}: the transcript exists already; give a new path")
    if key is None:
        key = project_key(loaded.root, create=True)
    lock = take_lock(where)  # before the claim: a claimed emit whose lock is free is one no process runs
    if id is not None and (earlier is None or earlier.run_id != run_id):
        try:
            claim = _claim(loaded.root, id, name, run_id, where, data)
        except BaseException:
            release_unused(lock, where)
            raise
        if not claim.new:  # another emit claimed it in between
            release_unused(lock, where)
            return await _again(claim, name, loaded, engine, options) or EmitResult(
                claim.run_id, name, "duplicate", transcript=Path(claim.transcript),
                previous={"run_id": claim.run_id, "event": claim.event, "status": claim.status,
                          "transcript": claim.transcript})
    try:  # §15: the runs waiting for it get it first, recorded in the store before anything runs
        delivered = deliver_to_waits(loaded.root, name, data, id if id is not None else run_id, loaded.config)
        for problem in await engine.wake(loaded.root, delivered):  # runs on Temporal get a signal
            (notify or (progress.note if progress is not None else log_note))(problem)
    except BaseException:
        release_unused(lock, where)
        raise
    header = {"chain": None, "file": _resolved(loaded.root), "file_sha256": loaded.digest, "inputs": {},
              "now": pinned.isoformat() if pinned else None,
              "started_at": (pinned or datetime.now().astimezone()).isoformat(), "tools": list(tools),
              "resumed": False, "emit": {"event": name, "data": data, **({"id": id} if id is not None else {})}}
    if on_transcript is not None:
        on_transcript(where)
    try:
        result = await fire(engine, FireJob(loaded, run_id, header, pinned, decider=decider), where, key, lock,
                            run_secrets(loaded.config), progress=progress, notify=notify)
        if id is not None:  # before the lock goes: a claim 'started' with a free lock is one whose process died
            _finish(loaded.root, id, result.status)
    finally:
        lock.release()
    result.delivered = delivered
    return result


def _holds_records(where: Path) -> bool:
    """Whether a file is at `where` and not empty (one stat(2))."""
    try:
        return os.stat(where).st_size > 0
    except (FileNotFoundError, NotADirectoryError):
        return False


@lru_cache(maxsize=64)
def _resolved(root: Path) -> str:
    """The project's directory as the header records it: resolved once per process (a
    realpath is a system call per component of the path), not once per emit."""
    return str(root.resolve())


def _answer_problems(root: Path, data: Any) -> list[str]:
    from chainlang.runtime.deliver import check_answer
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        return check_answer(store, data)


def deliver_to_waits(root: Path, name: str, data: Any, emit_id: str, config: Any = ...) -> list[dict[str, Any]]:
    """Deliver the event to the waits it matches (runtime/deliver.py): the runs it went to.
    `config`: the project's (None: it has no chainlang.toml; not given: read again)."""
    from chainlang.runtime.deliver import deliver_event, waits_store

    store = waits_store(root, event=name) if config is ... else waits_store(root, config, event=name)
    if store is None:
        return []
    rows = deliver_event(store, name, data, emit_id)
    return [{"run_id": row.run_id, "step": row.step, "transcript": row.transcript, "engine": row.engine}
            for row in rows]




async def fire(engine: "Engine", job: "FireJob", where: Path, key: bytes, lock: "RunLock", redactor: "Redactor", *,
               progress: "ProgressView | None" = None, notify: Callable[[str], None] | None = None) -> EmitResult:
    """Open the transcript of one admitted emit (or task firing) and let `engine` fire its
    hooks; wait for their actions."""
    from chainlang.runtime.runner import close_made_decider
    from chainlang.runtime.session import Session

    made = job.decider is None
    if made:
        job.decider = engine.decider(job.project.config)  # before the transcript: a bad [decide] writes nothing
    try:
        session = Session(where, job.run_id, redactor, key, lock, progress, notify)
        try:
            end = await engine.fire(job, session)
        finally:
            session.close()
    finally:
        if made:
            await close_made_decider(job.decider)
    fired = list(end.outputs.get("fired") or [])
    return EmitResult(job.run_id, job.event, end.status, redactor.redact(fired), redactor.redact(end.error), where,
                      end.duration_ms)


async def fire_job(job: "FireJob", session: "Session") -> "RunEnd":
    """The embedded engine's firing: the hooks of one emit, in this process, their secrets
    read first (a missing one: no hook fires, the emit fails before its first step)."""
    from chainlang.journal.records import RunFinished, RunStarted, decode
    from chainlang.runtime.context import FixedClock, SystemClock
    from chainlang.runtime.host import RunEnd
    from chainlang.runtime.secret_refs import CURRENT as SECRETS

    secrets, missing = _emit_secrets(job.project, session.redactor, job.top)
    read = SECRETS.set(secrets)  # what {secrets.NAME} references read
    try:
        if missing is not None:
            end = RunEnd("failed", {"fired": []}, {"type": "secret", "message": missing})
            started = decode({"type": "run_started", **job.header})
            assert isinstance(started, RunStarted)
            session.record(started)
            session.record(RunFinished("failed", end.outputs, end.error, 0.0))
            return end
        return await fire_hooks(
            job.project, job.run_id, job.header, session.record, FixedClock(job.pinned) if job.pinned else SystemClock(),
            job.decider, session.tell, replay=job.replay, commit=session.commit, defer=session.writer.defer_next,
            top=job.top,
            interrupted=f"the emit was interrupted; continue it with: chainlang resume {session.where}")
    finally:
        SECRETS.reset(read)


def _emit_secrets(project: Project, redactor: "Redactor",
                  top: "tuple[CompiledHook, ...] | None") -> tuple[Any, str | None]:
    """The secrets of an emit (chainlang.runtime.secret_refs): those the hooks in force (and the
    named chains they call) and the hooks fired for it (a task's action) reference, read now;
    and why one cannot be read (None: all were)."""
    from chainlang.runtime.secret_refs import RunSecrets

    secrets = RunSecrets(project.config, redactor)
    names = set(project.loader.hook_secrets())
    for hook in top or ():
        names |= {b.name for b in hook.bindings.refs.values() if b.kind == "secret"}
    try:
        secrets.read_ahead(names)
    except UsageError as exc:
        return secrets, str(exc)
    return secrets, None


async def fire_hooks(project: Project, run_id: str, header: dict[str, Any], record: Callable[["Record"], Any],
                     clock: Any, decider: Any, notify: Callable[[str], None], *, replay: "Replay | None" = None,
                     commit: Callable[[], None] = lambda: None, defer: Callable[[], None] = lambda: None,
                     top: "tuple[CompiledHook, ...] | None" = None,
                     interrupted: str = "the emit was interrupted", executor: Any = None,
                     recorder: Any = None, references: Any = None, elapsed: Any = None) -> "RunEnd":
    """Fire the hooks of one emit (`header["emit"]`) and wait for their actions, every
    record to `record`, from `run_started` to `run_finished`; its outputs are the hooks
    that fired ({"fired": [...]}). The engines differ in `executor` (None: the tools in this
    process; the Temporal workflow's runs them as activities), `recorder` (the
    ThreadRecorder class), `references` (what `{thread.ID.KEY}` reads: the store, or the
    Temporal workflow's values read ahead) and `elapsed` (the workflow's clock)."""
    from chainlang.journal.records import HookDropped, HookFinished, HookFired
    from chainlang.runtime.hooks import fire_post
    from chainlang.runtime.host import RunEnd, RunHost, RunSpec, begin, drive, limits_graph, open_run
    from chainlang.runtime.walk import ChainRun

    emitted = header["emit"]
    name, data = str(emitted["event"]), emitted["data"]
    fired: dict[str, dict[str, Any]] = {}  # top-level firings (of the emitted event), by hook key

    def recorded(rec: "Record") -> None:
        record(rec)
        if getattr(rec, "step", "x") is None:  # a firing of the emitted event itself
            if isinstance(rec, HookFired):
                fired[rec.hook] = {"hook": rec.hook, "status": "running"}
            elif isinstance(rec, HookFinished):
                fired[rec.hook] = {"hook": rec.hook, "status": rec.status, "error": rec.error,
                                   "duration_ms": rec.duration_ms}
            elif isinstance(rec, HookDropped):
                fired[rec.hook] = {"hook": rec.hook, "status": "dropped", "reason": rec.reason,
                                   "message": rec.message}

    def shape(end: RunEnd) -> RunEnd:
        """An emit's outputs are the hooks it fired; one that failed fails the emit."""
        failed = [key for key, item in fired.items() if item["status"] == "failed"]
        if end.status == "ok" and failed:  # an action, or a condition that could not be evaluated
            end.status = "failed"
            end.error = {"type": "hook", "message": f"{len(failed)} hook(s) failed: " + ", ".join(failed)}
        end.outputs = {"fired": list(fired.values())}
        return end

    # an emit's hook actions: their chains' own budgets; a hook action's thread.match may attach the emit
    spec = RunSpec(run_id, limits_graph(project.root), {}, header, project.root, project.registry, project.loader,
                   hooks=project.hooks, replay=replay, budget=(None, None, 0, 0))
    host = RunHost(record=recorded, clock=clock, decider=decider, notify=notify, commit=commit, defer=defer,
                   executor=executor, recorder=recorder, record_thread=True, references=references,
                   elapsed=elapsed, interrupted=interrupted)
    run = begin(open_run(spec, host))
    hooks = top if top is not None else project.hooks.matching("post", name) if project.hooks is not None else ()
    top_run = ChainRun(run.state, spec.graph, {})

    async def body() -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        fire_post(top_run, hooks, name, None, None, None, payload=data, external=True)
        return "ok", {}, None

    try:
        return await drive(run, body, shape=shape)
    finally:
        top_run.release()  # it runs no steps of its own; its actions have ended


async def resume_emit(where: Path, lock: "RunLock", recorded: Any, header: dict[str, Any], tools: list[str],
                      rerun: frozenset[str], skip: frozenset[str], registry: "Registry | None",
                      progress: "ProgressView | None", notify: Callable[[str], None] | None,
                      decider: Any, engine: "Engine") -> EmitResult:
    """Continue an interrupted emit from its (verified) transcript: firings that finished or
    were dropped are not run again; one that fired and did not finish runs again, its
    finished steps taken from the transcript."""
    from chainlang.runtime.admission import parse_now, project_key, run_secrets
    from chainlang.runtime.engine import FireJob
    from chainlang.runtime.resume import replay_for

    emitted = header.get("emit") or {}
    name = str(emitted.get("event", ""))
    if recorded.finished is not None and recorded.finished.status not in RESUMABLE:
        done = recorded.finished
        if isinstance(emitted.get("id"), str):  # its process may have died before the store heard of its end
            try:
                _finish(Path(str(header.get("file"))), emitted["id"], done.status)
            except UsageError:
                pass  # no store (any more), or no such claim: the transcript is the record
        return EmitResult(recorded.run_id, name, done.status, list(done.outputs.get("fired") or []),
                          done.error, where, float(done.duration_ms))
    loaded = load_project(Path(str(header.get("file"))), tools, registry)
    if loaded.hooks is None:
        return EmitResult(recorded.run_id, name, "invalid", diagnostics=loaded.diagnostics, sources=loaded.sources,
                          transcript=where)
    top, digest = None, loaded.digest
    if isinstance(emitted.get("task"), str):  # a firing of a scheduled task (chainlang serve)
        firing = _task_firing(loaded, emitted["task"])
        if not firing.ok:
            return EmitResult(recorded.run_id, name, "invalid", diagnostics=firing.diagnostics, transcript=where)
        top, digest = firing.top, firing.digest
    if header.get("file_sha256") != digest:
        raise UsageError(f"cannot resume: the hooks of {loaded.root} changed since the event was emitted; resuming "
                         "would mix two versions of them (emit the event again instead)")
    replay = replay_for(recorded, where, rerun, skip)
    pinned = parse_now(header["now"]) if isinstance(header.get("now"), str) else None
    resumed = {**header, "resumed": True, "tools": tools}
    key = project_key(loaded.root, create=False)
    job = FireJob(loaded, recorded.run_id, resumed, pinned, replay, decider, top)
    result = await fire(engine, job, where, key, lock, run_secrets(loaded.config), progress=progress, notify=notify)
    if isinstance(emitted.get("id"), str):
        _finish(loaded.root, emitted["id"], result.status)
    return result


def _task_firing(project: Project, task_id: str) -> Any:
    from chainlang.store import StoreError
    from chainlang.tasks.firing import task_firing
    from chainlang.tasks.stored import project_store

    try:
        with project_store(project.root) as store:
            task = store.get_task(task_id)
    except StoreError as exc:
        raise UsageError(f"cannot resume the firing of the task {task_id}: {exc}") from None
    if task is None or task.kind != "schedule":
        raise UsageError(f"cannot resume: the task {task_id} is no longer in the project's store")
    return task_firing(project, task)


def _lookup(root: Path, key: str) -> Any:
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    try:
        with project_store(root) as store:
            return store.get_emit(key)
    except StoreError as exc:
        raise UsageError(f"--id {key}: {exc}") from None


def release_unused(lock: "RunLock", where: Path) -> None:
    """Release a transcript lock taken for an emit that will not run, and its head file."""
    from chainlang.journal.lock import head_path

    lock.release()
    if not where.exists():
        try:
            head_path(where).unlink()
        except OSError:
            pass


def _claim(root: Path, key: str, event: str, run_id: str, where: Path, data: Any = None) -> Any:
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    try:
        with project_store(root) as store:
            return store.claim_emit(key, event, run_id, str(where), data)
    except StoreError as exc:
        raise UsageError(f"--id {key}: {exc}") from None


def _finish(root: Path, key: str, status: str) -> None:
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    try:
        with project_store(root) as store:
            store.finish_emit(key, status)
    except StoreError as exc:
        raise UsageError(f"--id {key}: the emit ran (status {status}) but the store could not record it: {exc}") from None


async def _again(claim: Any, name: str, project: Project, engine: "Engine",
                 options: dict[str, Any]) -> EmitResult | None:
    """The key was claimed before: report that emit, or take it over if its process died.
    None: it died before its transcript began, and its payload was kept: the caller fires
    it now, under the claim's run id (on Temporal, a workflow started already under that id
    is followed instead: chainlang.engine.temporal.submit). One that began is the engine's
    to end (`Engine.ended`: continued here, or, on Temporal, its end waited for)."""
    previous = {"run_id": claim.run_id, "event": claim.event, "status": claim.status, "transcript": claim.transcript}
    duplicate = EmitResult(claim.run_id, name, "duplicate", transcript=Path(claim.transcript), previous=previous)
    if claim.status != "started":
        return duplicate
    from chainlang.journal.lock import RunInUse, RunLock

    where = Path(claim.transcript)
    try:  # a live emit holds the transcript's lock: then it is running, not interrupted
        RunLock.acquire(where, create=not where.is_file()).release()
    except (RunInUse, OSError):
        return duplicate
    if not where.is_file() or where.stat().st_size == 0:
        return None if claim.data is not None and claim.event == name else duplicate
    ended = await engine.ended(project, claim.run_id, name, where, **options)
    assert isinstance(ended, EmitResult)
    _finish(project.root, claim.key, ended.status)
    return ended


def emit(name: str, data: Any, **options: Any) -> EmitResult:
    """`emit_async` for code that has no event loop running."""
    from chainlang.runtime.calls import run_loop

    return run_loop(emit_async(name, data, **options))


__all__ = ["EmitResult", "emit", "emit_async", "load_project"]
