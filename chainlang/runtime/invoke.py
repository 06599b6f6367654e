"""The executor seam: how a step's event is carried out once the pipeline decided to call
it. A tool is called in this process (`LocalExecutor`): an async tool is awaited, guarded
(one that ignores its cancellation is abandoned after GRACE seconds); a sync tool runs
in a worker thread (abandoned, still running, when the step stops waiting for it: see
chainlang.runtime.calls), or inline once it has proven quick (chainlang.runtime.inline). A named chain or `chain.run` runs as a sub-chain of the run
(`run_subchain`). A second engine (§14) replaces this seam, not
the pipeline around it.

Also here: what a tool's exception means (its failure, or the process being stopped).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Protocol

from chainlang.runtime.calls import Call, Watch, guarded, in_thread
from chainlang.runtime.context import Clock, RunContext
from chainlang.runtime.inline import call_inline, inline_ok, note_thread_call
from chainlang.runtime.outcomes import ChainFailed, ChainLoadError, LimitExceeded, ToolFailed, error_of
from chainlang.runtime.state import StepClock
from chainlang.runtime.tool_context import build_tool_context
from chainlang.status import TOOL_ERROR

if TYPE_CHECKING:
    from chainlang.compile import ExecutionGraph
    from chainlang.runtime.events import EventRuntime
    from chainlang.runtime.state import RunState
    from chainlang.runtime.walk import ChainRun


class Executor(Protocol):
    """Carries out one attempt of an event step with its (validated) params."""

    async def call(self, rt: "EventRuntime", params: dict[str, Any], ipath: str, attempt: int,
                   watch: Watch) -> Any: ...


class LocalExecutor:
    """Tools called in this process; sub-chains run by the calling chain's walker."""

    __slots__ = ("chain",)

    def __init__(self, chain: "ChainRun") -> None:
        self.chain = chain

    async def call(self, rt: "EventRuntime", params: dict[str, Any], ipath: str, attempt: int,
                   watch: Watch) -> Any:
        if rt.runs_chain:
            return await run_subchain(self.chain, rt, params, ipath, attempt)
        assert rt.func is not None
        run, chain = self.chain.run, self.chain.graph.name
        if rt.is_async:
            if rt.accepts_ctx:
                params = {**params, "ctx": tool_context(run, chain, rt.spec.name, ipath, attempt,
                                                        allow=self.chain.allow)}
            return await guarded(rt.func(**params), watch)
        if inline_ok(rt.func, bool(rt.spec.effects.get("blocking"))):  # a sync tool proven quick
            if rt.accepts_ctx:
                params = {**params, "ctx": tool_context(run, chain, rt.spec.name, ipath, attempt,
                                                        allow=self.chain.allow)}
            return await call_inline(rt.func, params, watch.deadline, watch.own)
        call = Call(asyncio.get_running_loop())
        if rt.accepts_ctx:
            params = {**params, "ctx": tool_context(run, chain, rt.spec.name, ipath, attempt, call,
                                                    allow=self.chain.allow)}
        call.func, call.kwargs = rt.func, params
        try:
            return await in_thread(call, watch)
        finally:
            if call.took is not None:
                note_thread_call(rt.func, call.took)


class _AskedClock:
    """The run's clock for a tool running in a worker thread: read on the event loop."""

    __slots__ = ("now",)

    def __init__(self, now: Callable[[], Any]) -> None:
        self.now = now


def tool_context(run: "RunState", chain: str | None, name: str, ipath: str, attempt: int,
                 call: Call | None = None, allow: tuple[tuple[str, ...], ...] = ()) -> RunContext:
    """The `ctx` a tool of this run gets (chainlang.runtime.tool_context): progress reports
    recorded as `step_progress`, clock readings as `clock` records, notifications shown.
    For a sync tool (`call`: it runs in a worker thread) what it asks of the run is done
    on the event loop, and not at all once its step is over."""
    from chainlang.journal.records import StepProgress

    def record_progress(message: str, fraction: float | None) -> None:
        run.record(StepProgress(ipath, name, message, fraction))

    clock: Clock = StepClock(run, ipath)
    report: Callable[[str, float | None], None] = record_progress
    notify = run.notify
    if call is not None:
        clock, report, notify = _AskedClock(call.ask(clock.now)), call.relay(record_progress), call.relay(notify)
    return build_tool_context(
        run_id=run.run_id, chain=chain, event=name, step=ipath, attempt=attempt, clock=clock,
        state_dir=run.state_dir, report=report, notify=notify, project=run.project,
        registry=run.base_registry or run.registry, captured=run.captured.get(ipath, {}),
        models=run.models.for_step(ipath, name) if run.models is not None else None,
        decider=run.decider, allow=allow,
    )


def abandoned_text(name: str, watch: Watch) -> str:
    """What a step's error adds when its call had to be abandoned."""
    from chainlang.runtime.calls import GRACE

    if watch.abandoned == "task":
        return f"; {name} ignored its cancellation and was abandoned after {GRACE:g}s"
    if watch.abandoned == "thread":
        return f"; {name} was abandoned, still running in its thread (a thread cannot be stopped)"
    return ""


async def run_subchain(caller: "ChainRun", rt: "EventRuntime", params: dict[str, Any], ipath: str,
                       attempt: int = 1) -> Any:
    """A named chain or `chain.run` as a step: its steps run in this run at depth + 1, under
    the allow lists in force; its outputs are the step's result."""
    from chainlang.runtime.walk import ChainRun

    if rt.spec.name == "agent.chain":
        from chainlang.runtime.agent_chain import run_agent_chain

        return await run_agent_chain(caller, rt, params, ipath, attempt)
    target, graph, inputs = subchain_call(caller, rt, params, ipath)
    if caller.run.read_ahead is not None:  # the Temporal engine reads its thread references first
        await caller.run.read_ahead([graph])
    # the hooks in force in the caller stay in force (and the sub-chain's own join them)
    sub = ChainRun(caller.run, graph, inputs, depth=caller.depth + 1, prefix=ipath + "/", allow=caller.allow,
                   depth_limit=caller.depth_limit, hooks=caller.hooks, stack=caller.stack,
                   hook_inputs=caller.hook_inputs)
    status, outputs, error = await sub.execute()
    return subchain_result(graph.name or target, status, outputs, error)


def subchain_call(caller: "ChainRun", rt: "EventRuntime", params: dict[str, Any],
                  ipath: str) -> tuple[str, "ExecutionGraph", dict[str, Any]]:
    """The chain a named chain or `chain.run` step calls: (what the step names, its graph, its
    checked inputs). Raises LimitExceeded past max_depth, ChainFailed when it cannot be
    loaded or its inputs do not fit."""
    from chainlang.errors import UsageError
    from chainlang.runtime.inputs import check_inputs

    run, spec = caller.run, rt.spec
    if caller.depth + 1 > caller.depth_limit:
        raise LimitExceeded("max_depth", f"step {ipath} would run {spec.name} at depth {caller.depth + 1}, "
                                         f"beyond max_depth = {caller.depth_limit}")
    if run.load_chain is None:
        raise RuntimeError("this run cannot load sub-chains")
    if spec.name == "chain.run":
        target, inputs = str(params.get("path", "")), dict(params.get("inputs") or {})
    else:
        target, inputs = spec.name, dict(params)
    try:
        graph = run.load_chain(target, caller.graph.file)
    except ChainLoadError as exc:
        raise ChainFailed(error_of("chain", str(exc))) from None
    try:
        inputs = check_inputs(graph, inputs)
    except UsageError as exc:
        raise ChainFailed(error_of("params", f"{graph.name or target}: {exc}")) from None
    return target, graph, inputs


def subchain_result(name: str, status: str, outputs: dict[str, Any], error: dict[str, Any] | None) -> Any:
    """The step's result of a sub-chain that ended: its outputs, or ChainFailed."""
    if status == "failed":
        where = f" at step {error.get('step')}" if error and error.get("step") else ""
        raise ChainFailed(error_of("chain", f"{name} failed{where}: {(error or {}).get('message', '')}"))
    return outputs


def stops_the_process(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt or SystemExit that came out of a tool call was raised by a
    signal rather than by the tool: by the process's SIGINT or SIGTERM handler (written in
    Python, it is the innermost frame: asyncio.run's Ctrl-C handler, an application's), or
    by Python's default Ctrl-C handler, which raises in whatever code runs (then nothing tells
    it from the tool's own). Under `chainlang run` neither happens: the CLI turns Ctrl-C and
    SIGTERM into a cancellation of the run, so a tool's KeyboardInterrupt is the tool's."""
    import signal
    import threading

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code if tb is not None else None
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):  # pragma: no cover - a platform without it
            continue
        if handler is signal.default_int_handler:
            if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                return True
            continue
        func = getattr(handler, "func", handler)  # functools.partial (asyncio.run's handler)
        func = getattr(func, "__func__", func)  # a bound method
        if code is not None and getattr(func, "__code__", None) is code:
            return True
    return False


def tool_failure(run: "RunState", ipath: str, exc: BaseException) -> dict[str, Any]:
    """The `tool_error` of step `ipath` whose tool raised `exc` in this process; `exc` itself
    is kept on the run (not in the transcript), to be the cause of the API's RunFailed."""
    run.exceptions[ipath] = exc
    return error_of(TOOL_ERROR, tool_message(exc))


def tool_message(exc: BaseException) -> str:
    """The message of a step's `tool_error` for what the tool raised."""
    if isinstance(exc, ToolFailed):  # made where the tool ran: kept exactly
        return exc.message
    if isinstance(exc, SystemExit):
        return f"SystemExit: the tool called sys.exit({exc.code!r}); a tool must not end the process"
    if isinstance(exc, KeyboardInterrupt) and not str(exc):
        return "KeyboardInterrupt: raised by the tool (not a Ctrl-C of the run)"
    text = " ".join(str(exc).split())[:1000]
    if isinstance(exc, ValueError) and text:  # tools raise ValueError with a message meant for users
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
