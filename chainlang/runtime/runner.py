"""Running a chain file end to end: check, compile, open the transcript, execute, finish.

This is what `chainlang run` / `chainlang resume` and the Python API (`chainlang.run`,
`chainlang.run_async`, `chainlang.resume`) call. A chain with check errors never starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from chainlang.api import UsageError
from chainlang.runtime.inputs import check_inputs
from chainlang.runtime.secrets import Redactor

if TYPE_CHECKING:
    from chainlang.api import LoadedFile
    from chainlang.compile import ExecutionGraph
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import Record
    from chainlang.runtime.replay import Replay
    from chainlang.journal.jsonl import Transcript
    from chainlang.diagnostics import Diagnostic
    from chainlang.registry.config import ProjectConfig
    from chainlang.registry.registry import Registry
    from chainlang.runtime.progress import ProgressView

#: exit codes of `chainlang run` (LANGUAGE.md §10)
EXIT_CODES = {"ok": 0, "broken": 0, "failed": 1, "invalid": 1, "interrupted": 1, "limit": 3}

RUNS_DIR = Path(".chainlang") / "runs"
STATE_DIR = Path(".chainlang") / "state"


@dataclass
class RunResult:
    """How a run ended. `status`: ok, broken (stopped cleanly by a break), failed, limit,
    interrupted (resumable), or invalid (it did not start: see `diagnostics`).

    `outputs` and `error` have the run's secrets masked, as in the transcript; `secrets` is
    the run's redaction service, for whatever else shows the run (the CLI's diagnostics)."""

    run_id: str | None
    status: str
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    transcript: Path | None = None
    duration_ms: float = 0.0
    diagnostics: list["Diagnostic"] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)  # file → SourceFile, for showing diagnostics
    secrets: Redactor = field(default_factory=Redactor, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "broken")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)


@dataclass
class Prepared:
    """A checked, compiled chain and what running it needs."""

    path: Path
    graph: "ExecutionGraph | None"  # None when the chain has check errors: it must not run
    registry: "Registry"
    config: "ProjectConfig | None"
    root: Path  # the project directory: chainlang.toml's, else the chain file's
    diagnostics: list["Diagnostic"]
    loader: "SubChains"
    sources: dict[str, Any]
    hooks: int  # hooks declared in the file (not run yet in this version)
    digest: str  # sha256 of the chain file: a resume refuses a file that changed


def prepare(path: str | os.PathLike[str], tools: Sequence[str] = (), registry: "Registry | None" = None) -> Prepared:
    """Load, check and compile the chain at `path`. Raises UsageError for a path or tools
    that cannot be used; check errors are in `diagnostics` (and `graph` is None)."""
    from chainlang.api import context_files, default_registry, load_file
    from chainlang.registry.config import find_project_config
    from chainlang.registry.errors import RegistryError

    from chainlang.api import file_kind

    chain_path = Path(path)
    if chain_path.is_dir():
        raise UsageError(_not_a_chain_file(os.fspath(path)))
    if not chain_path.is_file():
        raise UsageError(f"{path}: not a regular file" if chain_path.exists() else f"{path}: no such chain file")
    if file_kind(str(path)) == "hooks":
        raise UsageError(f"{path} is a hooks file: it has no steps to run (hooks fire around the steps of a chain)")
    start_dir = chain_path.parent
    try:
        config = find_project_config(start_dir)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    registry = registry if registry is not None else default_registry(tools, start_dir)
    main = load_file(str(path))
    context = context_files(start_dir, {os.path.realpath(path)})
    diagnostics, project_registry, named = _check([main], registry, context)
    root = config.root if config is not None else start_dir
    loader = SubChains(registry, project_registry, named, context, root)
    from chainlang.compile import compile_chain

    failed = any(d.severity == "error" for d in diagnostics)
    graph = None if failed else compile_chain(main.chain)
    data = main.source.text.encode("utf-8", "surrogatepass")
    return Prepared(chain_path, graph, project_registry, config, root, diagnostics, loader, {main.path: main.source},
                    len(main.chain.hooks),
                    hashlib.sha256(data).hexdigest())


def _not_a_chain_file(directory: str) -> str:
    """The message for `chainlang run DIR`, naming a chain file in it when there is one."""
    from chainlang.api import file_kind, is_chain_file

    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in islice(entries, 10_000):
                if is_chain_file(entry.name) and file_kind(entry.name) == "chain" and entry.is_file():
                    names.append(entry.name)
    except OSError:
        pass
    shown = directory.rstrip("/" + os.sep) or directory
    if names:
        names.sort()
        more = f" ({len(names)} chain files there)" if len(names) > 1 else ""
        hint = f", e.g. {names[0] if shown == '.' else os.path.join(shown, names[0])}{more}"
    else:
        hint = " (*.chain.yaml or *.chain.yml); there is none directly in it"
    return f"{directory}: is a directory, not a chain file; give the path of one chain file{hint}"


def _check(files: list["LoadedFile"], registry: "Registry", context: list["LoadedFile"]) -> tuple[list["Diagnostic"], "Registry", dict[str, "LoadedFile"]]:
    from chainlang.api import check_project

    diagnostics, project, project_registry = check_project(files, registry, context)
    by_chain = {id(f.chain): f for f in files + context}
    named = {name: by_chain[id(chain)] for name, chain in project.named.items() if id(chain) in by_chain}
    return diagnostics, project_registry, named


class SubChains:
    """Finds, checks (once) and compiles the chains a run calls: named chains of the
    project, and `chain.run` paths (relative to the calling chain, inside the project)."""

    def __init__(self, registry: "Registry", project_registry: "Registry", named: dict[str, "LoadedFile"],
                 context: list["LoadedFile"], root: Path) -> None:
        self.registry = registry
        self.project_registry = project_registry
        self.named = named
        self.context = context
        self.root = root.resolve()
        self.graphs: dict[str, "ExecutionGraph"] = {}

    def __call__(self, target: str, caller: str) -> "ExecutionGraph":
        from chainlang.api import is_chain_file, load_file
        from chainlang.runtime.outcomes import ChainLoadError

        if target in self.named:
            loaded = self.named[target]
            key = os.path.realpath(loaded.path)
        else:
            if not target:
                raise ChainLoadError("chain.run needs a path")
            candidate = (Path(caller).parent / target).resolve()
            if not is_chain_file(candidate.name):
                raise ChainLoadError(f"{target}: chain.run runs chain files (*.chain.yaml or *.chain.yml)")
            if not candidate.is_relative_to(self.root):
                raise ChainLoadError(f"{target}: outside the project ({self.root}); chain.run only runs the project's chains")
            if not candidate.is_file():
                raise ChainLoadError(f"{target}: no such chain file")
            key = str(candidate)
            if key in self.graphs:
                return self.graphs[key]
            try:
                loaded = load_file(key)
            except UsageError as exc:
                raise ChainLoadError(str(exc)) from None
        if key in self.graphs:
            return self.graphs[key]
        others = [f for f in self.context if os.path.realpath(f.path) != key]
        diagnostics, registry, _ = _check([loaded], self.registry, others)
        errors = [d for d in diagnostics if d.severity == "error"]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more; run chainlang check {loaded.path})" if len(errors) > 1 else ""
            raise ChainLoadError(f"{loaded.path}:{first.line}:{first.column}: {first.message}{more}")
        from chainlang.compile import compile_chain

        graph = compile_chain(loaded.chain)
        self.graphs[key] = graph
        return graph


def new_run_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def parse_now(text: str | None) -> datetime | None:
    """`--now`: an ISO 8601 date-time (a date alone means its midnight); naive means UTC."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"--now {text!r}: expected an ISO 8601 date-time such as 2025-01-15T09:30:00+01:00") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


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
) -> RunResult:
    """Run the chain at `path` and return how it ended (never raises for a failing run;
    raises UsageError for bad paths, tools, inputs or options)."""
    prepared = prepare(path, tools, registry)
    redactor = run_secrets(prepared.config)
    if prepared.graph is None:
        return RunResult(None, "invalid", diagnostics=prepared.diagnostics, sources=prepared.sources, secrets=redactor)
    pinned = parse_now(now) if isinstance(now, str) else now
    try:
        values = check_inputs(prepared.graph, dict(inputs or {}))
    except UsageError as exc:  # it quotes the inputs
        redactor.scrub(exc)
        raise
    run_id = new_run_id()
    where = Path(transcript) if transcript is not None else prepared.root / RUNS_DIR / f"{run_id}.jsonl"
    if transcript is not None and where.is_dir():
        raise UsageError(f"--transcript {transcript}: is a directory; give the path of a new file, "
                         f"e.g. {os.path.join(str(transcript), run_id + '.jsonl')}")
    if transcript is not None and where.exists() and where.stat().st_size > 0:
        raise UsageError(f"{where}: the transcript exists already; give a new path (resume a run with chainlang resume)")
    started_at = (pinned or datetime.now().astimezone()).isoformat()
    header = {
        "chain": prepared.graph.name, "file": str(prepared.path.resolve()), "file_sha256": prepared.digest,
        "inputs": values, "now": pinned.isoformat() if pinned else None, "started_at": started_at,
        "tools": list(tools), "resumed": False,
    }
    key = _project_key(prepared.root, create=True)
    lock = _take(where)
    try:
        return await _execute(prepared, run_id, where, header, values, pinned, None, progress, notify, decider,
                              on_transcript, key, lock, redactor)
    finally:
        lock.release()


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
) -> RunResult:
    """Continue the run recorded in `transcript`: finished steps are not run again; the
    clock readings and decisions it recorded are reused."""
    where = Path(transcript)
    if where.is_dir():
        raise UsageError(_not_a_transcript(os.fspath(transcript)))
    if not where.is_file():
        raise UsageError(f"{where}: no such transcript")
    file = _recorded_chain_file(where)
    if not Path(file).is_file():
        raise UsageError(f"cannot resume: {where}: the chain file it ran, {file}, does not exist (any more)")
    lock = _take(where, create=False)
    try:
        return await _resume_locked(where, lock, tools, rerun, skip, registry, progress, notify, decider,
                                    on_transcript)
    finally:
        lock.release()


async def _resume_locked(where: Path, lock: "RunLock", tools: Sequence[str] | None, rerun: Iterable[str],
                         skip: Iterable[str], registry: "Registry | None", progress: "ProgressView | None",
                         notify: Callable[[str], None] | None, decider: Any,
                         on_transcript: Callable[[Path], None] | None) -> RunResult:
    from chainlang.journal.records import RecordError
    from chainlang.journal.jsonl import TranscriptError, read_transcript

    file = _recorded_chain_file(where)
    config_dir = Path(file).parent
    if lock.found is None:
        raise UsageError(f"cannot resume: {where}.head is damaged, so records removed from the end of the transcript "
                         "could not be found; the transcript cannot be trusted")
    try:
        recorded = read_transcript(where, key=_project_key(_project_root(config_dir), create=False), head=lock.found)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except TranscriptError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
    header = {k: v for k, v in recorded.started.items() if k not in ("type", "run_id", "seq", "ts")}
    if recorded.finished is not None and recorded.finished.get("status") != "interrupted":
        done = recorded.finished
        return RunResult(recorded.run_id, str(done.get("status")), dict(done.get("outputs") or {}), done.get("error"),
                         where, float(done.get("duration_ms") or 0), [])
    digest = header.get("file_sha256")
    if not isinstance(digest, str) or len(digest) != 64:
        raise UsageError(f"cannot resume: {where}: the run_started record has no file_sha256, so the chain file "
                         "cannot be shown to be the one that ran")
    # never import what the transcript names: tools come from --tools and the project's configuration
    given_tools = list(tools or ())
    recorded_tools = [str(t) for t in header.get("tools") or []]
    if recorded_tools != given_tools:
        shown = ", ".join(recorded_tools) or "none"
        now = ", ".join(given_tools) or "none"
        (notify or (progress.note if progress is not None else _stderr))(
            f"note: the run was started with --tools {shown}; this resume uses --tools {now} (resume imports only "
            "the tools it is given and those of chainlang.toml, never what a transcript names)")
    prepared = prepare(file, given_tools, registry)
    redactor = run_secrets(prepared.config)
    if prepared.graph is None:
        return RunResult(recorded.run_id, "invalid", diagnostics=prepared.diagnostics, transcript=where,
                         sources=prepared.sources, secrets=redactor)
    if digest != prepared.digest:
        raise UsageError(f"cannot resume: {file} changed since the run started; resuming would mix two versions of "
                         "the chain (start a new run instead)")
    try:
        replay = _replay_of(recorded, frozenset(rerun), frozenset(skip))
    except RecordError as exc:
        raise UsageError(f"cannot resume: {where}: {exc}") from None
    unknown = [s for s in list(rerun) + list(skip) if s not in replay.started or s in replay.finished]
    if unknown:
        raise UsageError(f"--rerun/--skip {unknown[0]}: not a step that started and did not finish in this run")
    pinned = parse_now(header["now"]) if isinstance(header.get("now"), str) else None
    values = dict(header.get("inputs") or {})
    resumed = {**header, "resumed": True, "tools": given_tools}
    key = _project_key(prepared.root, create=False)
    return await _execute(prepared, recorded.run_id, where, resumed, values, pinned, replay, progress, notify, decider,
                          on_transcript, key, lock, redactor)


def _replay_of(recorded: "Transcript", rerun: frozenset[str], skip: frozenset[str]) -> "Replay":
    """What resume needs of a verified transcript, as typed records."""
    from chainlang.journal.records import Clock, Decide, StepFinished, StepStarted, decode
    from chainlang.runtime.replay import Replay

    replay = Replay(rerun=rerun, skip=skip)
    for step, entry in recorded.steps.items():
        started = decode(entry.started)
        assert isinstance(started, StepStarted)
        replay.started[step] = started
        finished = decode(entry.finished) if entry.finished is not None else None
        # a cancelled attempt was interrupted mid-call: resumed like one without an end
        if isinstance(finished, StepFinished) and finished.status != "cancelled":
            replay.finished[step] = finished
    for step, decisions in recorded.decisions.items():
        replay.decisions[step] = [d for d in map(decode, decisions) if isinstance(d, Decide)]
    for rec in recorded.records:
        if rec["type"] == "clock":
            clock = decode(rec)
            if isinstance(clock, Clock) and clock.step is not None:
                replay.clock.setdefault(clock.step, []).append(clock.value)
    return replay


def _recorded_chain_file(where: Path) -> str:
    """The chain file named by the first record (not trusted yet: it only says which
    project's key verifies the transcript)."""
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
    return file


def _project_root(start: Path) -> Path:
    from chainlang.registry.config import find_project_config
    from chainlang.registry.errors import RegistryError

    try:
        config = find_project_config(start)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    return config.root if config is not None else start


def _project_key(root: Path, *, create: bool) -> bytes:
    from chainlang.journal.integrity import IntegrityError, load_key

    try:
        return load_key(root, create=create)
    except IntegrityError as exc:
        raise UsageError(f"cannot {'run' if create else 'resume'}: {exc}") from None


def _take(where: Path, *, create: bool = True) -> "RunLock":
    from chainlang.journal.lock import RunInUse, RunLock

    try:
        return RunLock.acquire(where, create=create)
    except FileNotFoundError:
        raise UsageError(f"cannot resume: {where}.head is missing: it holds the sealed end of the transcript, "
                         "without which records removed from its end could not be found (a transcript is copied "
                         "or moved together with its .head file)") from None
    except RunInUse as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot lock the transcript: {exc.strerror or exc}") from None


async def _execute(prepared: Prepared, run_id: str, where: Path, header: dict[str, Any], inputs: dict[str, Any],
                   pinned: datetime | None, replay: Any, progress: "ProgressView | None",
                   notify: Callable[[str], None] | None, decider: Any,
                   on_transcript: Callable[[Path], None] | None, key: bytes, lock: "RunLock",
                   redactor: Redactor) -> RunResult:
    from chainlang.runtime.context import FixedClock, SystemClock
    from chainlang.runtime.outcomes import ms_since
    from chainlang.runtime.decide import close_decider, decider_from_config
    from chainlang.registry.errors import ConfigError
    from chainlang.journal.records import RunFinished, RunStarted, decode
    from chainlang.runtime.outcomes import LimitExceeded, ResumeBlocked
    from chainlang.runtime.state import RunState
    from chainlang.journal.jsonl import TranscriptWriter
    from chainlang.runtime.walk import ChainRun

    made_here = decider is None  # then the run closes it (a model's pooled connections); a given one is the caller's
    if decider is None:
        try:
            decider = decider_from_config(prepared.config)
        except ConfigError as exc:  # a half-configured [decide]
            raise UsageError(str(exc)) from None
    try:
        # one redaction service for the run: the writer masks every record (so every line shown of one), the
        # view what it shows, `tell` the notifications, and the result what the CLI prints
        writer = TranscriptWriter(where, run_id, redactor, key=key, lock=lock)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: cannot write the transcript: {getattr(exc, 'strerror', None) or exc}") from None
    if on_transcript is not None:
        on_transcript(where)
    view = progress
    use_secrets = getattr(view, "use_secrets", None)  # the views of chainlang.runtime.progress have it
    if use_secrets is not None:
        use_secrets(redactor)
    # notifications go through the progress view, so they appear in order with the steps
    shown = notify or (view.note if view is not None else _stderr)

    def tell(text: str) -> None:
        shown(redactor.mask(text))

    if prepared.hooks:
        tell(f"note: {prepared.path} declares {prepared.hooks} hook(s); this version checks hooks "
               "but does not run them yet")

    append = writer.append  # every value is JSON by construction (inputs and results are checked)
    record: Callable[["Record"], Any] = append
    if view is not None:
        show = view.record

        def record(rec: "Record") -> Any:  # the same, shown live
            written = append(rec)
            show(written)
            return written

    graph = prepared.graph
    assert graph is not None
    state = RunState(
        run_id=run_id, registry=prepared.registry, record=record, decider=decider,
        clock=FixedClock(pinned) if pinned else SystemClock(), state_dir=prepared.root / STATE_DIR,
        facts={"id": run_id, "chain": graph.name, "started_at": header["started_at"]},
        max_steps=graph.max_steps, replay=replay,
        notify=tell,
        load_chain=prepared.loader,
    )
    start = time.perf_counter()
    status, error = "failed", None
    outputs: dict[str, Any] = {}
    try:
        started = decode({"type": "run_started", **header})
        assert isinstance(started, RunStarted)
        record(started)
        chain = ChainRun(state, graph, inputs)
        try:
            status, outputs, error = await chain.execute()
        except LimitExceeded as exc:
            status, error = "limit", {"type": "limit", "limit": exc.limit, "message": exc.message}
        except ResumeBlocked as exc:
            status, error = "interrupted", {"type": "unsafe_resume", "message": exc.message, "step": exc.path,
                                            "event": exc.event}
        except asyncio.CancelledError:
            status, error = "interrupted", {"type": "interrupted", "message": "the run was interrupted; continue it "
                                            f"with: chainlang resume {where}"}
            record(RunFinished(status, outputs, error, ms_since(start)))
            raise
        except BaseException as exc:  # a bug, or KeyboardInterrupt outside the loop: still end the transcript
            status, error = "failed", {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}
            record(RunFinished(status, outputs, error, ms_since(start)))
            redactor.scrub(exc)  # whoever prints it prints no secret
            raise
        record(RunFinished(status, outputs, error, ms_since(start)))
    finally:
        writer.close()
        if view is not None:
            view.close()
        if made_here:
            await close_decider(decider)
    if redactor:  # as the transcript has them
        outputs, error = redactor.redact(outputs), redactor.redact(error)
    return RunResult(run_id, status, outputs, error, where, round((time.perf_counter() - start) * 1000, 3),
                     secrets=redactor)


def _stderr(text: str) -> None:
    from chainlang.diagnostics import visible
    from chainlang.runtime.secrets import escape_surrogates

    print(escape_surrogates(visible(" ".join(text.splitlines()))), file=sys.stderr, flush=True)


def run_secrets(config: "ProjectConfig | None") -> Redactor:
    """The run's redaction service: the secrets it knows of when it starts (the decide
    model's API key, read from the variable that `api_key_env` names)."""
    key = _api_key(config)
    return Redactor([key] if key else [])


def _not_a_transcript(where: str) -> str:
    """The message for `chainlang resume DIR`, naming the newest transcript in it when there is one."""
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
    hint = f", e.g. the newest one there: chainlang resume {newest[1]}" if newest else " (.chainlang/runs/RUN_ID.jsonl)"
    return f"{where}: is a directory, not a transcript; give one transcript file{hint}"


def _api_key(config: "ProjectConfig | None") -> str | None:
    decide = config.decide if config is not None else None
    if decide is None or not decide.api_key_env:
        return None
    value = os.environ.get(decide.api_key_env)
    return value if value and len(value) >= 4 else None


def run(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
    """`run_async` for code that has no event loop running."""
    return asyncio.run(run_async(path, inputs, **options))


def resume(transcript: str | os.PathLike[str], **options: Any) -> RunResult:
    """`resume_async` for code that has no event loop running."""
    return asyncio.run(resume_async(transcript, **options))


__all__ = ["RunResult", "run", "run_async", "resume", "resume_async", "prepare", "check_inputs", "parse_now"]
