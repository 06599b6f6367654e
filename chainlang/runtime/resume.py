"""`chainlang resume`: continue a run from its transcript, once its integrity is shown
(sealed lines, sealed head, the chain file's hash), holding the run's lock. Finished
steps are not run again; the clock readings and decisions it recorded are reused.
"""

from __future__ import annotations

from chainlang.status import RESUMABLE

import os
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from chainlang.errors import UsageError
from chainlang.runtime.prepare import prepare
from chainlang.runtime.admission import parse_now, project_key, run_secrets, take_lock
from chainlang.runtime.runner import RunResult, execute, scripted_answers
from chainlang.runtime.session import log_note

if TYPE_CHECKING:
    from chainlang.runtime.emit import EmitResult
    from chainlang.journal.jsonl import Transcript
    from chainlang.journal.lock import RunLock
    from chainlang.registry.registry import Registry
    from chainlang.output.progress import ProgressView
    from chainlang.runtime.engine import Engine
    from chainlang.runtime.prepare import Prepared
    from chainlang.runtime.replay import Replay


async def resume_async(
    transcript: str | os.PathLike[str],
    *,
    tools: Sequence[str] | None = None,
    rerun: Iterable[str] = (),
    skip: Iterable[str] = (),
    registry: "Registry | None" = None,
    progress: "ProgressView | None" = None,
    notify: Callable[[str], None] | None = None,
    decider: Any = None,
    on_transcript: Callable[[Path], None] | None = None,
    engine: "Engine | None" = None,
    detach: bool = False,
    answers: dict[str, Any] | None = None,
    prepare_chain: "Callable[[str], Prepared] | None" = None,
) -> "RunResult | EmitResult":
    """Continue the run recorded in `transcript`: finished steps are not run again; the
    clock readings and decisions it recorded are reused. The transcript of an emit gives
    an EmitResult. `engine`: the embedded engine (None: it, refusing a project configured
    for another; chainlang.engine.resume_async asks the project's engine). `prepare_chain`:
    the chain file prepared with these `tools` and `registry` by a process that keeps chains
    loaded (serve/prepared_chains.py); None: loaded, checked and compiled here."""
    where = Path(transcript)
    if where.is_dir():
        raise UsageError(not_a_transcript(os.fspath(transcript)))
    if not where.is_file():
        raise UsageError(f"{where}: no such transcript")
    file, emitted = recorded_start(where)
    if emitted and not Path(file).is_dir():
        raise UsageError(f"cannot resume: {where}: the project it was emitted in, {file}, does not exist (any more)")
    if not emitted and not Path(file).is_file():
        raise UsageError(f"cannot resume: {where}: the chain file it ran, {file}, does not exist (any more)")
    config_dir = Path(file) if emitted else Path(file).parent
    found = _config_at(config_dir)  # read once: the engine's check here, the transcript's key under the lock
    if engine is None:
        from chainlang.runtime.engine import embedded_only

        engine = embedded_only(None if isinstance(found, UsageError) else found)
    lock = take_lock(where, create=False)
    try:
        return await _resume_locked(where, lock, tools, rerun, skip, registry, progress, notify, decider,
                                    on_transcript, engine, detach, answers, prepare_chain, (config_dir, found))
    finally:
        lock.release()


def project_config(directory: Path) -> Any:
    """The configuration of the project a transcript names (None: none, or a chainlang.toml
    that cannot be read, which the resume itself then reports)."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        return find_project_config(directory)
    except RegistryError:
        return None


async def _resume_locked(where: Path, lock: "RunLock", tools: Sequence[str] | None, rerun: Iterable[str],
                         skip: Iterable[str], registry: "Registry | None", progress: "ProgressView | None",
                         notify: Callable[[str], None] | None, decider: Any,
                         on_transcript: Callable[[Path], None] | None, engine: "Engine",
                         detach: bool = False, answers: dict[str, Any] | None = None,
                         prepare_chain: "Callable[[str], Prepared] | None" = None,
                         known: "tuple[Path, Any] | None" = None) -> "RunResult | EmitResult":
    from chainlang.journal.jsonl import TranscriptError, read_transcript
    from chainlang.journal.records import fields

    file, emitted = recorded_start(where)  # read again under the lock
    config_dir = Path(file) if emitted else Path(file).parent
    if lock.found is None:
        raise UsageError(f"cannot resume: {where}.head is damaged, so records removed from the end of the transcript "
                         "could not be found; the transcript cannot be trusted")
    found = known[1] if known is not None and known[0] == config_dir else _config_at(config_dir)
    if isinstance(found, UsageError):
        raise found
    root = found.root if found is not None else config_dir
    try:
        recorded = read_transcript(where, key=project_key(root, create=False), head=lock.found)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except TranscriptError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
    started = recorded.started
    header = fields(started)  # what the resumption's own run_started records again
    if emitted:
        from chainlang.runtime.emit import resume_emit

        if answers:
            raise UsageError("--answer: an emit's hook actions ask no questions (they cannot wait); it answers "
                             "the user.ask steps of a chain's run")

        return await resume_emit(where, lock, recorded, header, list(tools or ()), frozenset(rerun), frozenset(skip),
                                 registry, progress, notify, decider, engine)
    if recorded.finished is not None and recorded.finished.status not in RESUMABLE:
        done = recorded.finished
        return RunResult(recorded.run_id, done.status, dict(done.outputs), done.error, where, float(done.duration_ms),
                         [])
    digest = started.file_sha256
    if len(digest) != 64:
        raise UsageError(f"cannot resume: {where}: the run_started record has no file_sha256, so the chain file "
                         "cannot be shown to be the one that ran")
    # never import what the transcript names: tools come from --tools and the project's configuration
    given_tools = list(tools or ())
    recorded_tools = [str(t) for t in started.tools]
    if recorded_tools != given_tools:
        shown = ", ".join(recorded_tools) or "none"
        now = ", ".join(given_tools) or "none"
        (notify or (progress.note if progress is not None else log_note))(
            f"note: the run was started with --tools {shown}; this resume uses --tools {now} (resume imports only "
            "the tools it is given and those of chainlang.toml, never what a transcript names)")
    prepared = prepare(file, given_tools, registry) if prepare_chain is None else prepare_chain(file)
    redactor = run_secrets(prepared.config)
    if prepared.graph is None:
        return RunResult(recorded.run_id, "invalid", diagnostics=prepared.diagnostics, transcript=where,
                         sources=prepared.sources, secrets=redactor)
    if digest != prepared.digest:
        raise UsageError(f"cannot resume: {file} changed since the run started; resuming would mix two versions of "
                         "the chain (start a new run instead)")
    replay = replay_for(recorded, where, frozenset(rerun), frozenset(skip))
    scripted = scripted_answers(prepared, answers)
    pinned = parse_now(started.now) if started.now is not None else None
    values = dict(started.inputs)
    resumed = {**header, "resumed": True, "tools": given_tools}
    key = project_key(prepared.root, create=False)
    from chainlang.runtime.prepare import secrets_of
    from chainlang.runtime.secret_refs import CURRENT as SECRETS

    read = SECRETS.set(secrets_of(prepared, redactor))  # a missing secret stops it before it continues
    try:
        from chainlang.runtime.engine import RunJob

        job = RunJob(prepared, recorded.run_id, resumed, values, pinned, replay, decider, detach, scripted)
        return await execute(engine, job, where, progress, notify, on_transcript, key, lock, redactor)
    finally:
        SECRETS.reset(read)


def replay_for(recorded: "Transcript", where: Path, rerun: frozenset[str], skip: frozenset[str]) -> "Replay":
    """What resume needs of a verified transcript (of a run or an emit), once `--rerun` and
    `--skip` are shown to name steps that started and did not finish."""
    replay = _replay_of(recorded, rerun, skip)
    unknown = [s for s in list(rerun) + list(skip) if s not in replay.started or s in replay.finished]
    if unknown:
        raise UsageError(f"--rerun/--skip {unknown[0]}: not a step that started and did not finish in this run")
    return replay


def _replay_of(recorded: "Transcript", rerun: frozenset[str], skip: frozenset[str]) -> "Replay":
    """What resume needs of a verified transcript (its records typed by the reader)."""
    from chainlang.journal.records import (Clock, HookDropped, HookFinished, HookFired, ModelCall, StepFinished,
                                           WaitFinished, WaitStarted)
    from chainlang.runtime.replay import Replay

    replay = Replay(rerun=rerun, skip=skip)
    for step, entry in recorded.steps.items():
        replay.started[step] = entry.started
        # a cancelled attempt was interrupted mid-call: resumed like one without an end
        if entry.finished is not None and entry.finished.status != "cancelled":
            replay.finished[step] = entry.finished
    for step, decisions in recorded.decisions.items():
        replay.decisions[step] = list(decisions)
    for line in recorded.records:
        rec = line.record
        if isinstance(rec, Clock):
            if rec.step is not None:
                replay.clock.setdefault(rec.step, []).append(rec.value)
                replay.clock_at.setdefault(rec.step, line.envelope.ts)
        elif isinstance(rec, StepFinished) and rec.status != "cancelled":
            # an attempt that ended: its answers were its own; a retry (or a rerun) asks again
            replay.model_calls.pop(rec.step, None)
            replay.finished_at[rec.step] = line.envelope.ts  # the last one: when a retry's wait began
        elif isinstance(rec, ModelCall):
            replay.add_model_call(rec)
        elif isinstance(rec, HookFired):
            replay.hooks_fired.add((rec.step or "", rec.hook))
        elif isinstance(rec, HookFinished):
            replay.hooks_finished[(rec.step or "", rec.hook)] = rec
            replay.hooks_ended.add((rec.step or "", rec.hook))
        elif isinstance(rec, HookDropped):
            replay.hooks_ended.add((rec.step or "", rec.hook))
        elif isinstance(rec, WaitStarted):
            replay.waits_started[rec.step] = rec
        elif isinstance(rec, WaitFinished):
            replay.waits_finished[rec.step] = rec
    return replay


def recorded_start(where: Path) -> tuple[str, bool]:
    """The chain file (or, for an emit, the project directory) named by the first record,
    and whether it records an emit (not trusted yet: it only says which project's key
    verifies the transcript)."""
    import json

    try:
        with open(where, "rb") as f:
            first = f.readline(1 << 20)
        record = json.loads(first.decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"cannot resume: {where}:1: not a run_started record") from None
    file = record.get("file") if isinstance(record, dict) and record.get("type") == "run_started" else None
    if not isinstance(file, str) or not file:
        raise UsageError(f"cannot resume: {where}:1: the run_started record names no chain file")
    return file, isinstance(record.get("emit"), dict)


def _config_at(start: Path) -> Any:
    """The configuration of the project at `start` (None: none), or the UsageError saying
    why its chainlang.toml cannot be used."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        return find_project_config(start)
    except RegistryError as exc:
        return UsageError(str(exc))


def not_a_transcript(where: str, command: str = "resume") -> str:
    """The message for `chainlang resume DIR` (or report), naming the newest transcript in it
    when there is one."""
    newest: tuple[float, str] | None = None
    try:
        with os.scandir(where) as entries:
            for entry in islice(entries, 10_000):
                if entry.name.endswith(".jsonl") and entry.is_file():
                    stamp = entry.stat().st_mtime
                    if newest is None or stamp > newest[0]:
                        newest = (stamp, os.path.join(where.rstrip("/" + os.sep) or where, entry.name))
    except OSError:
        pass
    hint = f", e.g. the newest one there: chainlang {command} {newest[1]}" if newest else " (.chainlang/runs/RUN_ID.jsonl)"
    return f"{where}: is a directory, not a transcript; give one transcript file{hint}"


def resume(transcript: str | os.PathLike[str], **options: Any) -> "RunResult | EmitResult":
    """`resume_async` for code that has no event loop running (as `run`: see calls.run_loop)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_async(transcript, **options))


__all__ = ["resume", "resume_async"]
