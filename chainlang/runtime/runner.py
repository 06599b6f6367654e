"""Running a chain file end to end: check, compile, open the transcript, execute, finish.

This is what `chainlang run` / `chainlang resume` and the Python API (`chainlang.run`,
`chainlang.run_async`, `chainlang.resume`) call. A chain with check errors never starts.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from chainlang.pipeline import UsageError
from chainlang.runtime.inputs import check_inputs
from chainlang.runtime.prepare import Prepared, prepare
from chainlang.runtime.secrets import Redactor

if TYPE_CHECKING:
    from chainlang.runtime.hooks import HookActions
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import Record
    from chainlang.diagnostics import Diagnostic
    from chainlang.config.project import ProjectConfig
    from chainlang.registry.registry import Registry
    from chainlang.output.progress import ProgressView

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


def new_run_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(5)}"  # 40 random bits: no two alike in a second of a busy serve


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
    thread: str | None = None,
) -> RunResult:
    """Run the chain at `path` and return how it ended (never raises for a failing run;
    raises UsageError for bad paths, tools, inputs or options). `thread` attaches the run
    to a stored thread (as an input `thread_id` does: chainlang.runtime.threads)."""
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
    from chainlang.runtime.prepare import secrets_of
    from chainlang.runtime.secret_refs import CURRENT as SECRETS

    secrets_read = secrets_of(prepared, redactor)  # before anything is written: a missing one stops the run here
    from chainlang.runtime.threads import attachment

    attached = attachment(prepared.root, thread, values)
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
    if attached is not None:
        header["thread"] = attached
    key = _project_key(prepared.root, create=True)
    lock = _take(where)
    read = SECRETS.set(secrets_read)  # what {secrets.NAME} references read
    try:
        return await _execute(prepared, run_id, where, header, values, pinned, None, progress, notify, decider,
                              on_transcript, key, lock, redactor)
    finally:
        SECRETS.reset(read)
        lock.release()


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
    from chainlang.runtime.hooks import HookActions
    from chainlang.runtime.threads import CURRENT, ThreadLink, ThreadRecorder, may_attach
    from chainlang.runtime.models import run_models

    made_here = decider is None  # then the run closes it (a model's pooled connections); a given one is the caller's
    if decider is None:
        try:
            decider = decider_from_config(prepared.config)
        except ConfigError as exc:  # a half-configured [decide]
            raise UsageError(str(exc)) from None
    try:
        # one redaction service for the run: the writer masks every record it writes, the view what it
        # shows (it gets the typed records, unmasked), `tell` the notifications, and the result what the CLI prints
        writer = TranscriptWriter(where, run_id, redactor, key=key, lock=lock)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: cannot write the transcript: {getattr(exc, 'strerror', None) or exc}") from None
    if on_transcript is not None:
        on_transcript(where)
    view = progress
    use_secrets = getattr(view, "use_secrets", None)  # the views of chainlang.output.progress have it
    if use_secrets is not None:
        use_secrets(redactor)
    # notifications go through the progress view, so they appear in order with the steps
    shown = notify or (view.note if view is not None else _stderr)

    def tell(text: str) -> None:
        shown(redactor.mask(text))

    append = writer.append  # every value is JSON by construction (inputs and results are checked)
    record: Callable[["Record"], Any] = append
    if view is not None:
        show = view.record

        def record(rec: "Record") -> Any:  # noqa: F811 - the same, shown live
            written = append(rec)
            show(rec)  # the typed record: the view masks what it shows with the run's redactor
            return written

    graph = prepared.graph
    assert graph is not None
    engine = prepared.config.engine if prepared.config is not None else None
    if engine is not None and engine.kind == "temporal":
        return await _on_temporal(prepared, run_id, header, inputs, pinned, writer, view, tell, where, redactor,
                                  decider if made_here else None)
    # the project's threads: the one the run is attached to, recording its steps' results there
    clock = FixedClock(pinned) if pinned else SystemClock()
    link = ThreadLink(prepared.root, run_id, header.get("thread"), clock,
                      lambda: [graph, *prepared.loader.graphs.values()])
    state = RunState(
        run_id=run_id, registry=prepared.registry, record=record, commit=writer.commit, decider=decider,
        clock=clock, state_dir=prepared.root / STATE_DIR,
        interceptors=(ThreadRecorder(link),) if link.thread or may_attach(graph, prepared.registry) else (),
        facts={"id": run_id, "chain": graph.name, "started_at": header["started_at"], "thread": link.thread},
        max_steps=graph.max_steps, replay=replay,
        notify=tell,
        load_chain=prepared.loader, project=prepared.root, base_registry=prepared.loader.registry,
    )
    state.models = run_models(state, decider, graph.max_model_calls, graph.max_tokens)
    link.facts = state.facts
    start = time.perf_counter()
    status, error = "failed", None
    outputs: dict[str, Any] = {}
    actions = state.actions = HookActions(state)
    linked = CURRENT.set(link)  # what {thread.ID.KEY} references read
    try:
        started = decode({"type": "run_started", **header})
        assert isinstance(started, RunStarted)
        record(started)
        chain = ChainRun(state, graph, inputs)
        try:
            status, outputs, error = await with_hook_actions(actions, chain.execute())
        except LimitExceeded as exc:
            status, error = "limit", {"type": "limit", "limit": exc.limit, "message": exc.message}
        except ResumeBlocked as exc:
            status, error = "interrupted", {"type": "unsafe_resume", "message": exc.message, "step": exc.path,
                                            "event": exc.event}
        except asyncio.CancelledError:
            await actions.cancel_all()  # without an end recorded: a resume runs them again
            status, error = "interrupted", {"type": "interrupted", "message": "the run was interrupted; continue it "
                                            f"with: chainlang resume {where}"}
            record(RunFinished(status, outputs, error, ms_since(start)))
            raise
        except BaseException as exc:  # a bug, or KeyboardInterrupt outside the loop: still end the transcript
            await actions.cancel_all()
            status, error = "failed", {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}
            record(RunFinished(status, outputs, error, ms_since(start)))
            redactor.scrub(exc)  # whoever prints it prints no secret
            raise
        record(RunFinished(status, outputs, error, ms_since(start)))
    finally:
        CURRENT.reset(linked)
        link.close()
        writer.close()
        if view is not None:
            view.close()
        if made_here:
            await close_decider(decider)
    if redactor:  # as the transcript has them
        outputs, error = redactor.redact(outputs), redactor.redact(error)
    return RunResult(run_id, status, outputs, error, where, round((time.perf_counter() - start) * 1000, 3),
                     secrets=redactor)


async def _on_temporal(prepared: Prepared, run_id: str, header: dict[str, Any], inputs: dict[str, Any],
                       pinned: datetime | None, writer: Any, view: "ProgressView | None",
                       tell: Callable[[str], None], where: Path, redactor: Redactor, decider: Any) -> RunResult:
    """The run on Temporal's workers (chainlang.engine.temporal): the same records, written here."""
    from chainlang.engine.temporal.submit import follow_run
    from chainlang.runtime.decide import close_decider

    try:
        if decider is not None:
            await close_decider(decider)  # the workers decide; this process asks no model
        status, outputs, error, ms = await follow_run(
            prepared, run_id, header, inputs, pinned.isoformat() if pinned else None, writer,
            view.record if view is not None else None, tell)
    finally:
        writer.close()
        if view is not None:
            view.close()
    if redactor:
        outputs, error = redactor.redact(outputs), redactor.redact(error)
    return RunResult(run_id, status, outputs, error, where, round(ms, 3), secrets=redactor)


async def with_hook_actions(actions: "HookActions", body: Any) -> Any:
    """Run `body` (the chain, or an emit's firing) as a task beside the post-hook actions it
    starts, and wait for those before returning what it returned. An action that must stop
    the run (`on_error: fail`, a limit, an unsafe resume) cancels the body: its reason is
    raised (a limit, a blocked resume) or becomes the failure returned."""
    main = asyncio.ensure_future(body)
    actions.main = main
    try:
        outcome = await main
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if actions.stop is None or (task is not None and task.cancelling()):
            raise  # the run itself is interrupted
        outcome = None
    except BaseException:
        await actions.cancel_all()
        raise
    await actions.drain()
    stop = actions.stop
    if stop is None:
        return outcome
    if isinstance(stop, BaseException):
        raise stop
    status, outputs = "failed", (outcome[1] if outcome is not None else {})
    return status, outputs, stop


def _stderr(text: str) -> None:
    from chainlang.diagnostics import visible
    from chainlang.runtime.secrets import escape_surrogates

    print(escape_surrogates(visible(" ".join(text.splitlines()))), file=sys.stderr, flush=True)


def run_secrets(config: "ProjectConfig | None") -> Redactor:
    """The run's redaction service: the secrets it knows of when it starts (the API keys of
    the model tiers and of [decide], and the declared [secrets] that can be read)."""
    from chainlang.config.secrets import known_secret_values

    return Redactor(known_secret_values(config))


def run(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None, **options: Any) -> RunResult:
    """`run_async` for code that has no event loop running (on a loop of its own, which
    waits for nothing a tool left behind: see calls.run_loop)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(run_async(path, inputs, **options))


__all__ = ["RunResult", "run", "run_async", "check_inputs", "parse_now"]
