"""The run host: the one place a run is opened and the one place it ends.

Every way chainlang runs something goes through here: `chainlang run` and `resume` (the
embedded runner), an emit and a task's firing (runtime.emit), and, on Temporal, the chain
workflow, the emit workflow and the child workflow of a sub-chain. What differs between
them is said once, as data: the `RunSpec` (what runs) and the `RunHost` (what the engine
gives it: where records go, the clock, how a tool is called). `open_run` builds the run's
state, its thread link, its hook actions and the context its references read; `drive`
runs a body under them and maps every way it can end — ok, failed, a limit, a blocked
resume, an interruption, a bug of ours — to one `RunEnd`, recorded as `run_finished`
before anything else happens. (LangGraph's one loop for every invocation mode is the
model: the modes differ in their inputs, never in a copy of the loop.)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, cast

from chainlang.status import EXIT_CODES, Outcome, RunStatus

if TYPE_CHECKING:
    from chainlang.compile import ExecutionGraph
    from chainlang.compile.hooks import HookSet
    from chainlang.journal.records import Record
    from chainlang.registry.registry import Registry
    from chainlang.runtime.hooks import HookActions
    from chainlang.runtime.replay import Replay
    from chainlang.runtime.state import RunState
    from chainlang.runtime.threads import ThreadLink

__all__ = ["EXIT_CODES", "STATE_DIR", "OpenRun", "RunEnd", "RunHost", "RunSpec", "begin", "drive", "exit_code",
           "limits_graph", "open_run", "with_hook_actions"]

STATE_DIR = Path(".chainlang") / "state"

def exit_code(status: str) -> int:
    """The exit code of every way a run, an emit or a resume can end (chainlang.status, §10)."""
    return EXIT_CODES.get(status, 1)


@dataclass
class RunEnd:
    """How a run ended: what its `run_finished` record says (or, for work an engine refused
    before it began, `invalid`)."""

    status: Outcome
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    duration_ms: float = 0.0

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)


@dataclass
class RunSpec:
    """What runs: the chain (or, for an emit, the limits of its hook actions), with the
    project it belongs to. `header` is the run_started record's content (started_at, thread)."""

    run_id: str
    graph: "ExecutionGraph"
    inputs: dict[str, Any]
    header: dict[str, Any]
    root: Path
    registry: "Registry"
    loader: Any  # runtime.prepare.SubChains: the named chains and files the run may call
    hooks: "HookSet | None" = None  # an emit's hooks in force (a chain's are its graph's hook_set)
    replay: "Replay | None" = None
    facts: dict[str, Any] | None = None  # a sub-chain's: its run's facts, given by the parent
    steps_run: int = 0  # a sub-chain's: the run's steps so far
    max_steps: int | None = None  # a sub-chain's: its run's limit (None: the graph's)
    budget: tuple[int | None, int | None, int, int] | None = None  # (max calls, max tokens, used calls, used tokens)

    def graphs(self) -> Iterable["ExecutionGraph"]:
        return [self.graph, *self.loader.graphs.values()]


@dataclass
class RunHost:
    """What the engine gives a run: where its records go, its clock and decider, and, on
    Temporal, how a step's tool is called (`executor`) and how thread values are read."""

    record: Callable[["Record"], Any]
    clock: Any
    decider: Any
    notify: Callable[[str], None]
    commit: Callable[[], None] = lambda: None
    defer: Callable[[], None] = lambda: None  # see RunState.defer
    executor: Callable[[Any], Any] | None = None  # None: tools run in this process (runtime.invoke)
    recorder: type | None = None  # the ThreadRecorder class (None: runtime.threads.ThreadRecorder)
    record_thread: bool | None = None  # add the thread recorder: None decides by the chain (may it attach?)
    references: Any = None  # what {thread.ID.KEY} reads (None: the store, through the thread link)
    run_written: Callable[..., Awaitable[Any]] | None = None
    elapsed: Callable[[], float] | None = None  # the run's duration so far, in ms (None: this process' clock)
    interrupted: str = "the run was interrupted"  # the message of an interruption
    waiter: Any = None  # how a wait waits (runtime/wait_step.py; None: runtime.waiting.StoreWaiter)


@dataclass
class OpenRun:
    """A run opened by `open_run`: its state, thread link and hook actions."""

    spec: RunSpec
    host: RunHost
    state: "RunState"
    link: "ThreadLink"
    actions: "HookActions"
    started: float = 0.0  # runtime.outcomes.perf() when it opened
    _token: Any = field(default=None, repr=False)
    _ended: bool = field(default=False, repr=False)

    def elapsed(self) -> float:
        """The run's duration so far, in ms."""
        if self.host.elapsed is not None:
            return self.host.elapsed()
        from chainlang.runtime.outcomes import ms_since

        return ms_since(self.started)

    def close(self) -> None:
        """Let go of what the run holds (the thread link's store, the references' context)."""
        from chainlang.runtime.threads import CURRENT

        if self._token is not None:
            CURRENT.reset(self._token)
            self._token = None
        self.link.close()


@lru_cache(maxsize=64)
def limits_graph(root: Path) -> "ExecutionGraph":
    """The limits an emit's hook actions run under (no chain of their own): the defaults of
    `limits:` (model.nodes.Limits), the one place they are written. One per project for the
    process (an emit built it each time): the graph is frozen and has no steps."""
    from chainlang.compile import ExecutionGraph
    from chainlang.model.bindings import ChainBindings
    from chainlang.model.nodes import Limits

    limits = Limits()
    return ExecutionGraph(file=str(root), name=None, nodes=(), outputs={}, inputs={}, max_steps=limits.max_steps,
                          max_depth=limits.max_depth, timeout=limits.timeout, max_parallel=limits.max_parallel,
                          allow=None, hooks=(), bindings=ChainBindings())


@lru_cache(maxsize=64)
def _state_dir(root: Path) -> Path:
    """The project's state directory (a Path made once per project, not per run)."""
    return root / STATE_DIR


def open_run(spec: RunSpec, host: RunHost) -> OpenRun:
    """Build the run's state, thread link and hook actions, and set the context its
    `{thread.ID.KEY}` references read. Close it with `drive` (or `OpenRun.close`)."""
    from chainlang.runtime.hooks import HookActions
    from chainlang.runtime.models import run_models
    from chainlang.runtime.outcomes import perf
    from chainlang.runtime.state import RunState
    from chainlang.runtime.threads import CURRENT, ThreadLink, ThreadRecorder, may_attach

    graph = spec.graph
    facts = spec.facts
    thread = facts.get("thread") if facts is not None else spec.header.get("thread")
    link = ThreadLink(spec.root, spec.run_id, thread, host.clock, spec.graphs)
    recording = host.record_thread
    if recording is None:
        recording = link.thread is not None or may_attach(graph, spec.registry)
    if facts is None:
        facts = {"id": spec.run_id, "chain": graph.name, "started_at": spec.header["started_at"],
                 "thread": link.thread}
    state = RunState(
        run_id=spec.run_id, registry=spec.registry, record=host.record, commit=host.commit, defer=host.defer,
        decider=host.decider,
        clock=host.clock, state_dir=_state_dir(spec.root),
        interceptors=((host.recorder or ThreadRecorder)(link),) if recording else (),
        facts=facts, max_steps=spec.max_steps if spec.max_steps is not None else graph.max_steps, replay=spec.replay, notify=host.notify, load_chain=spec.loader,
        hooks=spec.hooks, project=spec.root, base_registry=spec.loader.registry, steps_run=spec.steps_run,
    )
    from chainlang.runtime.secret_guard import Exposures, secret_guard

    guard: Exposures | None = secret_guard(spec.registry)  # §16: no secret reaches a model or user.notify unexposed
    if guard is None and host.executor is not None:  # the tools run elsewhere and refuse there, told each step's expose
        guard = Exposures()
    if guard is not None:
        state.interceptors += (guard,)
    if host.executor is not None:
        state.executor = host.executor
    if host.run_written is not None:
        state.run_written = host.run_written
    state.waiter = host.waiter
    if spec.budget is not None:
        max_calls, max_tokens, calls, tokens = spec.budget
    else:
        max_calls, max_tokens, calls, tokens = graph.max_model_calls, graph.max_tokens, 0, 0
    state.models = run_models(state, host.decider, max_calls, max_tokens)
    state.models.budget.calls, state.models.budget.tokens = calls, tokens
    link.facts = state.facts
    actions = state.actions = HookActions(state)
    if host.references is not None:
        state.read_ahead = host.references.ahead
    opened = OpenRun(spec, host, state, link, actions, perf())
    opened._token = CURRENT.set(host.references if host.references is not None else link)
    return opened


def begin(run: OpenRun) -> OpenRun:
    """Record the run's `run_started` (its spec's header); a run that cannot is closed."""
    from chainlang.journal.records import RunStarted, decode

    try:
        started = decode({"type": "run_started", **run.spec.header})
        assert isinstance(started, RunStarted)
        run.host.record(started)
    except BaseException:
        run.close()
        raise
    return run


Body = Callable[[], Awaitable[tuple[Any, dict[str, Any], dict[str, Any] | None]]]


async def drive(run: OpenRun, body: Body, *, shape: Callable[[RunEnd], RunEnd] | None = None, record: bool = True) -> RunEnd:
    """Run `body()` (the chain's walk, or an emit's firing) beside the hook actions it starts
    and end the run: every way it can end becomes one RunEnd, recorded as `run_finished`
    (`record`: false for a sub-chain, whose end is its parent's step). `shape` adjusts the
    end before it is recorded (an emit's outputs are the hooks it fired). An interruption
    and a bug of ours are recorded too, then raised: the caller's caller decides."""
    from chainlang.journal.records import RunFinished
    from chainlang.runtime.outcomes import LimitExceeded, ResumeBlocked, RunWaiting

    from chainlang.runtime import live_run

    actions = run.actions
    live = live_run.enter(run)  # run.status, run.duration_ms, run.failures; a finally's interruption test

    def finish(end: RunEnd) -> RunEnd:
        if shape is not None:
            end = shape(end)
        end.duration_ms = run.elapsed()
        if record and not run._ended:
            run._ended = True
            run.host.record(RunFinished(cast(RunStatus, end.status), end.outputs, end.error, end.duration_ms))
        return end

    try:
        try:
            status, outputs, error = await with_hook_actions(actions, body())
        except LimitExceeded as exc:
            return finish(RunEnd("limit", {}, {"type": "limit", "limit": exc.limit, "message": exc.message}))
        except RunWaiting as exc:  # --detach: the run holds no process while it waits (§15)
            await actions.cancel_all()
            error = {"type": "waiting", "message": f"{exc}; it goes on when the event comes or its deadline passes",
                     "step": exc.path, "event": exc.event, "deadline": exc.deadline}
            if exc.question is not None:
                error["question"] = exc.question
            return finish(RunEnd("waiting", {}, error))
        except ResumeBlocked as exc:
            return finish(RunEnd("interrupted", {}, {"type": "unsafe_resume", "message": exc.message,
                                                     "step": exc.path, "event": exc.event}))
        except asyncio.CancelledError:
            await actions.cancel_all()  # without an end recorded: a resume runs them again
            finish(RunEnd("interrupted", {}, {"type": "interrupted", "message": run.host.interrupted}))
            raise
        except BaseException as exc:  # a bug, or KeyboardInterrupt outside the loop: the transcript still ends
            await actions.cancel_all()
            finish(RunEnd("failed", {}, {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}))
            raise
        return finish(RunEnd(status, outputs, error))
    finally:
        live_run.leave(live)
        run.close()
        # the state and its actions refer to each other: once the run has ended (its actions
        # too), so that reference counting frees them (ChainRun.release says why)
        run.state.actions = None
        if run.state.models is not None:
            run.state.models.close()


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
    finally:
        actions.main = None  # ended; its context refers back to the run (a cycle)
    await actions.drain()
    stop = actions.stop
    if stop is None:
        return outcome
    if isinstance(stop, BaseException):
        raise stop
    status, outputs = "failed", (outcome[1] if outcome is not None else {})
    return status, outputs, stop
