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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from chainlang.api import UsageError

if TYPE_CHECKING:
    from chainlang.api import LoadedFile
    from chainlang.compile import ExecutionGraph
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
    interrupted (resumable), or invalid (it did not start: see `diagnostics`)."""

    run_id: str | None
    status: str
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    transcript: Path | None = None
    duration_ms: float = 0.0
    diagnostics: list["Diagnostic"] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)  # file → SourceFile, for showing diagnostics

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
    if not chain_path.is_file():
        raise UsageError(f"{path}: no such chain file")
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
    graph = None if failed else compile_chain(main.chain, lambda name: name in project_registry)
    data = main.source.text.encode("utf-8", "surrogatepass")
    return Prepared(chain_path, graph, project_registry, config, root, diagnostics, loader, {main.path: main.source},
                    len(main.chain.hooks),
                    hashlib.sha256(data).hexdigest())


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
        from chainlang.runtime.engine import ChainLoadError

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

        graph = compile_chain(loaded.chain, lambda name: name in registry)
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


def check_inputs(graph: "ExecutionGraph", given: dict[str, Any]) -> dict[str, Any]:
    """The chain's inputs: defaults filled, each validated against its schema. UsageError
    names every problem (unknown or missing inputs, invalid values)."""
    from chainlang.runtime.decide import validate_params
    from chainlang.runtime.engine import apply_input_defaults
    from chainlang.suggest import did_you_mean

    from chainlang.runtime.transcript import _find_non_json

    problems: list[str] = []
    for name, value in given.items():
        try:
            found = _find_non_json(value, [])
        except RecursionError:
            found = ([], "is nested too deeply")
        if found is not None:
            problems.append(f"input '{name}': {found[1]} (inputs must be JSON values)")
    for name in given:
        if name not in graph.inputs:
            hint = did_you_mean(name, list(graph.inputs))
            declared = ", ".join(sorted(graph.inputs)) or "none"
            problems.append(f"unknown input '{name}' (declared: {declared})" + (f"; {hint}" if hint else ""))
    inputs = apply_input_defaults(graph, {k: v for k, v in given.items() if k in graph.inputs})
    for name, schema in graph.inputs.items():
        if name not in inputs:
            problems.append(f"missing input '{name}': give it with --input {name}=VALUE")
            continue
        for message in validate_params(schema if isinstance(schema, dict) else {}, inputs[name]):
            problems.append(f"input '{name}': {message}")
    if problems:
        raise UsageError("; ".join(problems))
    return inputs


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
    if prepared.graph is None:
        return RunResult(None, "invalid", diagnostics=prepared.diagnostics, sources=prepared.sources)
    pinned = parse_now(now) if isinstance(now, str) else now
    values = check_inputs(prepared.graph, dict(inputs or {}))
    run_id = new_run_id()
    where = Path(transcript) if transcript is not None else prepared.root / RUNS_DIR / f"{run_id}.jsonl"
    if transcript is not None and where.exists() and where.stat().st_size > 0:
        raise UsageError(f"{where}: the transcript exists already; give a new path (resume a run with chainlang resume)")
    started_at = (pinned or datetime.now().astimezone()).isoformat()
    header = {
        "chain": prepared.graph.name, "file": str(prepared.path.resolve()), "file_sha256": prepared.digest,
        "inputs": values, "now": pinned.isoformat() if pinned else None, "started_at": started_at,
        "tools": list(tools), "resumed": False,
    }
    return await _execute(prepared, run_id, where, header, values, pinned, None, progress, notify, decider,
                          on_transcript)


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
    from chainlang.runtime.engine import Replay
    from chainlang.runtime.transcript import TranscriptError, read_transcript

    where = Path(transcript)
    try:
        recorded = read_transcript(where)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except TranscriptError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
    header = {k: v for k, v in recorded.started.items() if k not in ("type", "run_id", "seq", "ts")}
    if recorded.finished is not None and recorded.finished.get("status") != "interrupted":
        done = recorded.finished
        return RunResult(recorded.run_id, str(done.get("status")), dict(done.get("outputs") or {}), done.get("error"),
                         where, float(done.get("duration_ms") or 0), [])
    file = header.get("file")
    if not isinstance(file, str) or not file:
        raise UsageError(f"{where}: the run_started record names no chain file")
    given_tools = list(tools) if tools is not None else [str(t) for t in header.get("tools") or []]
    prepared = prepare(file, given_tools, registry)
    if prepared.graph is None:
        return RunResult(recorded.run_id, "invalid", diagnostics=prepared.diagnostics, transcript=where,
                         sources=prepared.sources)
    if header.get("file_sha256") and header["file_sha256"] != prepared.digest:
        raise UsageError(f"cannot resume: {file} changed since the run started; resuming would mix two versions of "
                         "the chain (start a new run instead)")
    replay = Replay(rerun=frozenset(rerun), skip=frozenset(skip))
    for step, entry in recorded.steps.items():
        replay.started[step] = entry.started
        # a cancelled attempt was interrupted mid-call: resumed like one without an end
        if entry.finished is not None and entry.finished.get("status") != "cancelled":
            replay.finished[step] = entry.finished
    for step, decisions in recorded.decisions.items():
        replay.decisions[step] = list(decisions)
    for rec in recorded.records:
        if rec["type"] == "clock" and isinstance(rec.get("step"), str):
            replay.clock.setdefault(rec["step"], []).append(rec["value"])
    unknown = [s for s in list(rerun) + list(skip) if s not in replay.started or s in replay.finished]
    if unknown:
        raise UsageError(f"--rerun/--skip {unknown[0]}: not a step that started and did not finish in this run")
    pinned = parse_now(header["now"]) if isinstance(header.get("now"), str) else None
    values = dict(header.get("inputs") or {})
    resumed = {**header, "resumed": True, "tools": given_tools}
    return await _execute(prepared, recorded.run_id, where, resumed, values, pinned, replay, progress, notify, decider,
                          on_transcript)


async def _execute(prepared: Prepared, run_id: str, where: Path, header: dict[str, Any], inputs: dict[str, Any],
                   pinned: datetime | None, replay: Any, progress: "ProgressView | None",
                   notify: Callable[[str], None] | None, decider: Any,
                   on_transcript: Callable[[Path], None] | None) -> RunResult:
    from chainlang.runtime.context import FixedClock, SystemClock
    from chainlang.runtime.decide import decider_from_config
    from chainlang.registry.errors import ConfigError
    from chainlang.runtime.engine import ChainRun, LimitExceeded, ResumeBlocked, RunState
    from chainlang.runtime.transcript import TranscriptWriter

    if decider is None:
        try:
            decider = decider_from_config(prepared.config)
        except ConfigError as exc:  # a half-configured [decide]
            raise UsageError(str(exc)) from None
    api_key = _api_key(prepared.config)
    try:
        writer = TranscriptWriter(where, run_id, [api_key] if api_key else [])
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: cannot write the transcript: {getattr(exc, 'strerror', None) or exc}") from None
    if on_transcript is not None:
        on_transcript(where)
    view = progress
    # notifications go through the progress view, so they appear in order with the steps
    notify = notify or (view.note if view is not None else _stderr)
    if prepared.hooks:
        notify(f"note: {prepared.path} declares {prepared.hooks} hook(s); this version checks hooks "
               "but does not run them yet")

    write = writer.write_checked  # every value is JSON by construction (inputs and results are checked)

    def emit(type: str, **fields: Any) -> dict[str, Any]:
        return write(type, fields)

    if view is not None:
        show = view.record

        def emit(type: str, **fields: Any) -> dict[str, Any]:  # noqa: F811 - the same, shown live
            rec = write(type, fields)
            show(rec)
            return rec

    graph = prepared.graph
    assert graph is not None
    state = RunState(
        run_id=run_id, registry=prepared.registry, emit=emit, decider=decider,
        clock=FixedClock(pinned) if pinned else SystemClock(), state_dir=prepared.root / STATE_DIR,
        facts={"id": run_id, "chain": graph.name, "started_at": header["started_at"]},
        max_steps=graph.max_steps, replay=replay,
        notify=notify,
        load_chain=prepared.loader,
    )
    start = time.perf_counter()
    status, error = "failed", None
    outputs: dict[str, Any] = {}
    try:
        emit("run_started", **header)
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
            _finish(emit, status, outputs, error, start)
            raise
        except BaseException as exc:  # a bug, or KeyboardInterrupt outside the loop: still end the transcript
            status, error = "failed", {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}
            _finish(emit, status, outputs, error, start)
            raise
        _finish(emit, status, outputs, error, start)
    finally:
        writer.close()
        if view is not None:
            view.close()
    return RunResult(run_id, status, outputs, error, where, round((time.perf_counter() - start) * 1000, 3))


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _finish(emit: Callable[..., Any], status: str, outputs: dict[str, Any], error: dict[str, Any] | None,
            start: float) -> None:
    emit("run_finished", status=status, outputs=outputs, error=error,
         duration_ms=round((time.perf_counter() - start) * 1000, 3))


def _api_key(config: "ProjectConfig | None") -> str | None:
    decide = config.decide if config is not None else None
    if decide is None or not decide.api_key_env:
        return None
    value = os.environ.get(decide.api_key_env)
    return value if value and len(value) >= 4 else None


def run(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
    """`run_async` for code that has no event loop running (on a loop of its own, which
    waits for nothing a tool left behind: see calls.run_loop)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(run_async(path, inputs, **options))


def resume(transcript: str | os.PathLike[str], **options: Any) -> RunResult:
    """`resume_async` for code that has no event loop running (as `run`)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_async(transcript, **options))


__all__ = ["RunResult", "run", "run_async", "resume", "resume_async", "prepare", "check_inputs", "parse_now"]
