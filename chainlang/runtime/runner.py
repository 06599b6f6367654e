"""Running a chain file end to end: check, compile, open the transcript, execute, finish.

This is what `chainlang run` / `chainlang resume` and the Python API (`chainlang.run`,
`chainlang.run_async`, `chainlang.resume`) call. A chain with check errors never starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from chainlang.errors import InputError, UsageError
from chainlang.runtime.admission import RUNS_DIR, new_run_id, parse_now, project_key, run_secrets, take_lock
from chainlang.runtime.host import EXIT_CODES, exit_code  # EXIT_CODES: chainlang.status's, kept importable here
from chainlang.runtime.inputs import check_inputs
from chainlang.runtime.prepare import Prepared, prepare
from chainlang.journal.retention import runs_dir as default_runs_dir
from chainlang.redaction import Redactor
from chainlang.status import Outcome

if TYPE_CHECKING:
    from chainlang.journal.lock import RunLock
    from chainlang.diagnostics import Diagnostic
    from chainlang.registry.registry import Registry
    from chainlang.output.progress import ProgressView
    from chainlang.runtime.engine import Engine, EngineChooser, RunJob
    from chainlang.runtime.host import RunEnd
    from chainlang.runtime.session import Session


@dataclass
class RunResult:
    """How a run ended. `status`: ok, broken (stopped cleanly by a break), failed, limit,
    interrupted (resumable), or invalid (it did not start: see `diagnostics`).

    `outputs` and `error` have the run's secrets masked, as in the transcript; `secrets` is
    the run's redaction service, for whatever else shows the run (the CLI's diagnostics)."""

    run_id: str | None
    status: Outcome
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    transcript: Path | None = None
    duration_ms: float = 0.0
    diagnostics: list["Diagnostic"] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)  # file → SourceFile, for showing diagnostics
    secrets: Redactor = field(default_factory=Redactor, repr=False, compare=False)
    # what the tool of the step that failed the run raised, when it ran in this process (the
    # embedded engine): in memory only, never in the transcript; None on Temporal
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    # the transcript's lines when it was kept in memory (the API's transcripts="memory"; then
    # `transcript` is None), as a file would hold them: `records` decodes them when first read
    record_lines: Sequence[bytes] = field(default=(), repr=False, compare=False)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The transcript's records when it was kept in memory (dicts, each with its seal),
        else []. Decoded on first reading: most callers of a memory run never look."""
        decoded = self.__dict__.get("_records")
        if decoded is None:
            import json

            decoded = self.__dict__["_records"] = [json.loads(line) for line in self.record_lines]
        return decoded

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "broken")

    def raise_for_status(self) -> None:
        """Raise the error of a run that did not succeed; return for `ok` and `broken`.

        `invalid`: ChainInvalid (with the checker's `diagnostics`); `failed`: RunFailed
        (ModelError when a model could not answer) with the step, its error type, and the
        tool's exception as `__cause__` when the tool ran in this process (not on a Temporal
        worker: then only its message, in `error`); `limit`: LimitExceeded; `interrupted`:
        RunInterrupted; `waiting`: RunWaiting. Each carries this result as `.result`."""
        from chainlang.runtime.raising import raise_for_status

        raise_for_status(self)

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)


async def run_async(
    path: str | os.PathLike[str],
    inputs: dict[str, Any] | None = None,
    *,
    now: datetime | str | None = None,
    transcript: str | os.PathLike[str] | None = None,
    tools: Sequence[str] = (),
    registry: "Registry | None" = None,
    progress: "ProgressView | None" = None,
    notify: Callable[[str], None] | None = None,
    decider: Any = None,
    on_transcript: Callable[[Path], None] | None = None,
    thread: str | None = None,
    engine_for: "EngineChooser | None" = None,
    detach: bool = False,
    answers: dict[str, Any] | None = None,
) -> RunResult:
    """Run the chain at `path` and return how it ended (never raises for a failing run;
    raises UsageError for bad paths, tools, inputs or options). `thread` attaches the run
    to a stored thread (as an input `thread_id` does: chainlang.runtime.threads).
    `engine_for` picks the engine from the project's configuration (chainlang.engine.engine_for;
    None: the embedded engine, refusing a project configured for another)."""
    from chainlang.runtime.engine import embedded_only

    prepared = prepare(path, tools, registry)
    engine = (engine_for or embedded_only)(prepared.config)
    return await start_run(prepared, engine, inputs, now=now, transcript=transcript, tools=list(tools),
                           progress=progress, notify=notify, decider=decider, on_transcript=on_transcript,
                           thread=thread, detach=detach, answers=answers)


async def start_run(
    prepared: Prepared,
    engine: "Engine",
    inputs: dict[str, Any] | None = None,
    *,
    now: datetime | str | None = None,
    transcript: str | os.PathLike[str] | None = None,
    runs_dir: Path | None = None,
    tools: list[str] | None = None,
    progress: "ProgressView | None" = None,
    notify: Callable[[str], None] | None = None,
    decider: Any = None,
    on_transcript: Callable[[Path], None] | None = None,
    thread: str | None = None,
    detach: bool = False,
    answers: dict[str, Any] | None = None,
    key: bytes | None = None,
    memory: bool = False,
) -> RunResult:
    """Run a prepared chain (checked and compiled once, perhaps for many runs: the Python
    API's loaded project) on `engine`: admit it (inputs, secrets, thread, transcript, lock)
    and execute it. `runs_dir`: where a transcript goes when `transcript` is not given
    (default: the project's .chainlang/runs); `key`: the project's transcript key when
    the caller read it already; `tools`: the tools references the transcript records;
    `memory`: the transcript's records are kept in memory (RunResult.records), no file."""
    redactor = run_secrets(prepared.config)
    if prepared.graph is None:
        return RunResult(None, "invalid", diagnostics=prepared.diagnostics, sources=prepared.sources, secrets=redactor)
    pinned = parse_now(now) if isinstance(now, str) else now
    try:
        values = check_inputs(prepared.graph, dict(inputs or {}))
    except UsageError as exc:  # it quotes the inputs
        redactor.scrub(exc)
        if isinstance(exc, InputError):  # and so do its fields, which the CLI shows
            exc.mask(redactor.mask)
        raise
    from chainlang.runtime.prepare import secrets_of
    from chainlang.runtime.secret_refs import CURRENT as SECRETS

    secrets_read = secrets_of(prepared, redactor)  # before anything is written: a missing one stops the run here
    from chainlang.runtime.engine import RunJob
    from chainlang.runtime.threads import attachment

    scripted = scripted_answers(prepared, answers)
    from chainlang.config.engine_kind import engine_kind

    attached = attachment(prepared.root, thread, values)
    run_id = new_run_id()
    where = (Path(transcript) if transcript is not None
             else (runs_dir if runs_dir is not None else default_runs_dir(prepared.config, prepared.root))
             / f"{run_id}.jsonl")
    if transcript is not None and where.is_dir():
        raise UsageError(f"transcript {transcript}: is a directory; give the path of a new file, "
                         f"e.g. {os.path.join(str(transcript), run_id + '.jsonl')}")
    if transcript is not None and where.exists() and where.stat().st_size > 0:
        raise UsageError(f"{where}: the transcript exists already; give a new path (an interrupted run is "
                         "continued by resuming its transcript)")
    started_at = (pinned or datetime.now().astimezone()).isoformat()
    header = {
        "chain": prepared.graph.name, "file": prepared.resolved or str(prepared.path.resolve()), "file_sha256": prepared.digest,
        "inputs": values, "now": pinned.isoformat() if pinned else None, "started_at": started_at,
        "tools": list(tools or ()), "resumed": False,
    }
    if attached is not None:
        header["thread"] = attached
    if scripted and engine_kind(prepared.config) != "embedded":
        raise UsageError("--answer works on the embedded engine; answer a run on Temporal with chainlang emit "
                         "user.answered (or serve's pages)")
    if memory and (transcript is not None or detach or engine_kind(prepared.config) != "embedded"):
        raise UsageError("a run whose transcript is kept in memory cannot be given a transcript path, cannot be "
                         "detached at a wait (nothing could resume it), and runs on the embedded engine only")
    if key is None:
        key = project_key(prepared.root, create=True)
    # on the loop: made in a worker thread instead, the lock and the transcript's two files cost
    # about 0.8 ms more CPU per run here (two thread hops) than the ~0.2 ms they block the loop
    lock = None if memory else take_lock(where)
    read = SECRETS.set(secrets_read)  # what {secrets.NAME} references read
    try:
        job = RunJob(prepared, run_id, header, values, pinned, None, decider, detach, scripted)
        return await execute(engine, job, where, progress, notify, on_transcript, key, lock, redactor,
                             memory=memory)
    finally:
        SECRETS.reset(read)
        if lock is not None:
            lock.release()


async def execute(engine: "Engine", job: "RunJob", where: Path, progress: "ProgressView | None",
                  notify: Callable[[str], None] | None, on_transcript: Callable[[Path], None] | None, key: bytes,
                  lock: "RunLock | None", redactor: Redactor, *, memory: bool = False) -> RunResult:
    """Open the transcript of an admitted run (new, or a resume's) and let `engine` run it."""
    from chainlang.runtime.session import Session

    from chainlang.runtime.raising import KEPT, kept_exception

    made = job.decider is None  # then closed here (a model's pooled connections); a given one is the caller's
    if made:
        job.decider = engine.decider(job.prepared.config)  # before the transcript: a bad [decide] writes nothing
    kept: dict[str, BaseException] = {}  # filled by the tools that raise in this process (run_chain)
    sharing = KEPT.set(kept)
    try:
        if memory:
            session = Session(where, job.run_id, redactor, key, None, progress, notify, memory=True)
        else:
            session = Session(where, job.run_id, redactor, key, lock, progress, notify)
        if on_transcript is not None:
            on_transcript(where)
        try:
            end = await engine.run(job, session)
        except BaseException as exc:
            redactor.scrub(exc)  # whoever prints it prints no secret
            raise
        finally:
            session.close()
    finally:
        KEPT.reset(sharing)
        if made:
            await close_made_decider(job.decider)
    outputs, error = end.outputs, end.error
    exception = kept_exception(kept, error) if end.status == "failed" else None
    if redactor:  # as the transcript has them
        outputs, error = redactor.redact(outputs), redactor.redact(error)
        if exception is not None:
            redactor.scrub(exception)
    if memory:
        from chainlang.journal.in_memory import MemoryTranscript

        assert isinstance(session.writer, MemoryTranscript)
        return RunResult(job.run_id, end.status, outputs, error, None, end.duration_ms, secrets=redactor,
                         exception=exception, record_lines=session.writer.lines)
    return RunResult(job.run_id, end.status, outputs, error, where, end.duration_ms, secrets=redactor,
                     exception=exception)


async def run_chain(job: "RunJob", session: "Session") -> "RunEnd":
    """The embedded engine's run: the chain's walk in this process, through the run host."""
    from chainlang.runtime.context import FixedClock, SystemClock
    from chainlang.runtime.host import RunHost, RunSpec, begin, drive, open_run
    from chainlang.runtime.walk import ChainRun
    from chainlang.runtime.waiting import StoreWaiter

    prepared = job.prepared
    graph = prepared.graph
    assert graph is not None
    spec = RunSpec(job.run_id, graph, job.inputs, job.header, prepared.root, prepared.registry, prepared.loader,
                   replay=job.replay)
    host = RunHost(record=session.record, commit=session.commit, defer=session.writer.defer_next,
                   clock=FixedClock(job.pinned) if job.pinned else SystemClock(), decider=job.decider,
                   notify=session.tell,
                   interrupted=("the run was interrupted (its transcript was kept in memory: it cannot be resumed)"
                                if session.memory else
                                f"the run was interrupted; continue it with: chainlang resume {session.where}"),
                   waiter=StoreWaiter(prepared.root, session.where, job.detach, answers=job.answers))
    run = begin(open_run(spec, host))
    from chainlang.runtime.raising import KEPT

    kept = KEPT.get()
    if kept is not None:  # the tools' exceptions go to execute's RunResult (as RunFailed.__cause__)
        run.state.exceptions = kept
    return await drive(run, lambda: ChainRun(run.state, graph, job.inputs).execute())


def scripted_answers(prepared: "Prepared", answers: dict[str, Any] | None) -> Any:
    """`answers` (user.ask step id or path -> answer) checked against the user.ask steps of
    the chain and the chains it calls (runtime/scripted_answers.py); None when there are none."""
    if not answers:
        return None
    from chainlang.runtime.scripted_answers import ScriptedAnswers, reachable

    graph = prepared.graph
    assert graph is not None
    graphs, written = reachable(graph, prepared.registry, prepared.loader)
    scripted = ScriptedAnswers(answers)
    scripted.check(graphs, f"chain {graph.name or graph.file} (and the chains it calls)", written)
    return scripted


def made_decider(config: Any) -> Any:
    """The decider of the project's [decide] configuration; a half-configured one is a UsageError.
    A project without a model shares one per process (runtime/modelless.py)."""
    from chainlang.runtime.modelless import shared_modelless

    shared = shared_modelless(config)
    if shared is not None:
        return shared
    from chainlang.errors import ConfigError
    from chainlang.runtime.decide import decider_from_config

    try:
        return decider_from_config(config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


async def close_made_decider(decider: Any) -> None:
    """Close a decider a run made (a model's pooled connections). The shared decider of a
    project without a model has nothing to close (no `aclose`): then the deciders' modules,
    and jsonschema with them, are not imported for it."""
    if getattr(decider, "aclose", None) is None:
        return
    from chainlang.runtime.decide import close_decider

    await close_decider(decider)


def run(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
    """`run_async` for code that has no event loop running (on a loop of its own, which
    waits for nothing a tool left behind: see calls.run_loop)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(run_async(path, inputs, **options))


__all__ = ["EXIT_CODES", "RUNS_DIR", "RunResult", "check_inputs", "execute", "new_run_id", "parse_now", "run",
           "run_async", "run_chain", "run_secrets", "scripted_answers", "start_run"]
