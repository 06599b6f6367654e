"""The asyncio interpreter: walks a compiled execution graph and records every step.

Semantics (LANGUAGE.md §2–§5, §8–§9; the user-facing text is docs/reference/execution.md):

- Steps of a sequence run one after the other on the event loop; no task is created for
  them. A parallel group (and a `foreach`) runs its branches as tasks of a TaskGroup, at
  most `max_parallel` at a time; when a branch fails (and its `on_error` is `fail`) the
  group cancels its siblings, whose running steps are recorded as `cancelled`.
- A step whose `if` is false is `skipped`. `on_error`: `fail` fails the enclosing chain,
  `continue` records the failure and goes on, `break` stops the chain cleanly (status
  `broken`). `retry` re-runs a failing tool call (errors, timeouts, invalid results).
- Every event step attempt writes `step_started` and `step_finished`; a step that ends
  early is still closed (`skipped`, `failed` or `cancelled`) unless the process dies.
- On resume (`Replay`), a step whose attempt finished is not run again: its recorded
  outcome is used. Blocks are not recorded: they are walked again, and their conditions
  give the same answers because everything they read is recorded.
"""

from __future__ import annotations

import asyncio
import fnmatch
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Coroutine, NoReturn, Protocol

from chainlang.compile import ExecutionGraph, GraphNode, copy_json
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import truthy
from chainlang.runtime.calls import GRACE, Call, Watch, guarded, in_thread
from chainlang.runtime.context import Clock, RunContext
from chainlang.runtime.scope import Binder, Rec, Scope
from chainlang.runtime.transcript import _find_non_json, _is_plain_json, idempotency_key

if TYPE_CHECKING:
    from pathlib import Path

    from chainlang.registry.registry import Registry
    from chainlang.registry.spec import EventSpec
    from chainlang.runtime.decide import Decision

# --------------------------------------------------------------------------- outcomes


class StepFailed(Exception):
    """A step (or block) failed and its `on_error` is `fail`: the enclosing chain fails."""

    def __init__(self, path: str, event: str | None, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.path = path
        self.event = event
        self.error = error


class ChainBroken(Exception):
    """`on_error: break` or a decide `break`: the chain stops cleanly."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


class LimitExceeded(Exception):
    """A limit of §8 stopped the run (exit code 3)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


class ResumeBlocked(Exception):
    """Resuming would re-run a non-idempotent step that started but did not finish."""

    def __init__(self, path: str, event: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.event = event
        self.message = message


def error_of(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "message": message, **extra}


# --------------------------------------------------------------------------- services


class Emit(Protocol):
    """Writes one transcript record (and shows it); returns the record as written."""

    def __call__(self, type: str, **fields: Any) -> dict[str, Any]: ...


class Hooks(Protocol):
    """The seam where `pre:` and `post:` hooks run around each event step (a later release
    runs them; `NoHooks` is the default). `pre` may change the params or cancel the step
    (return None); `post` sees the result."""

    active: bool

    async def pre(self, event: str, params: dict[str, Any], path: str) -> dict[str, Any] | None: ...

    async def post(self, event: str, params: dict[str, Any], result: Any, path: str) -> None: ...


class NoHooks:
    active = False

    async def pre(self, event: str, params: dict[str, Any], path: str) -> dict[str, Any] | None:
        return params

    async def post(self, event: str, params: dict[str, Any], result: Any, path: str) -> None:
        return None


@dataclass
class Replay:
    """What an earlier attempt of this run recorded (from its transcript), for resume."""

    finished: dict[str, dict[str, Any]] = field(default_factory=dict)  # step path → step_finished record
    started: dict[str, dict[str, Any]] = field(default_factory=dict)  # step path → last step_started record
    decisions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # step path → decide records
    clock: dict[str, list[str]] = field(default_factory=dict)  # step path → clock readings
    rerun: frozenset[str] = frozenset()  # unfinished non-idempotent steps the user says to run again
    skip: frozenset[str] = frozenset()  # ... or to skip


class StepClock:
    """The run's clock as one step reads it: every reading is recorded (`clock` record with
    the step path), and on resume the readings recorded for the step are given back first."""

    __slots__ = ("run", "step")

    def __init__(self, run: "RunState", step: str) -> None:
        self.run = run
        self.step = step

    def now(self) -> Any:
        from datetime import datetime

        replayed = self.run.replay.clock.get(self.step) if self.run.replay else None
        if replayed:
            return datetime.fromisoformat(replayed.pop(0))
        value = self.run.clock.now()
        self.run.emit("clock", value=value.isoformat(), step=self.step)
        return value


class _AskedClock:
    """The run's clock for a tool running in a worker thread: read on the event loop."""

    __slots__ = ("now",)

    def __init__(self, now: Callable[[], Any]) -> None:
        self.now = now


@dataclass
class EventRuntime:
    """One event as the interpreter calls it, prepared once per run (not per step)."""

    spec: "EventSpec"
    func: Callable[..., Any] | None
    is_async: bool
    accepts_ctx: bool
    check_params: Callable[[Any], list[str]]
    check_result: Callable[[Any], list[str]] | None

    @property
    def direct(self) -> bool:
        """An async tool without `ctx`: awaited as it is."""
        return self.is_async and not self.accepts_ctx and self.func is not None


@dataclass
class RunState:
    """Everything one run shares: the services, the counters, the compiled sub-chains."""

    run_id: str
    registry: "Registry"
    emit: Emit
    decider: Any  # a chainlang.runtime.decide.Decider
    clock: Clock
    state_dir: "Path"
    facts: dict[str, Any]
    max_steps: int
    hooks: Hooks = field(default_factory=NoHooks)
    replay: Replay | None = None
    notify: Callable[[str], None] = lambda text: None
    load_chain: Callable[[str, str], ExecutionGraph] | None = None  # (name or path, caller file) → graph
    steps_run: int = 0
    events: dict[str, EventRuntime] = field(default_factory=dict)
    binders: dict[int, Binder] = field(default_factory=dict)


# --------------------------------------------------------------------------- the interpreter


class ChainRun:
    """One chain being run: the top-level chain, or a sub-chain at `depth` > 0."""

    def __init__(self, run: RunState, graph: ExecutionGraph, inputs: dict[str, Any], *, depth: int = 0,
                 prefix: str = "", allow: tuple[tuple[str, ...], ...] = (), depth_limit: int | None = None) -> None:
        self.run = run
        self.graph = graph
        self.depth = depth
        self.prefix = prefix  # "4/" for the steps of a sub-chain called by step 4
        self.allow = allow + ((graph.allow,) if graph.allow is not None else ())
        self.depth_limit = min(graph.max_depth, depth_limit) if depth_limit is not None else graph.max_depth
        self.default_parallel = graph.max_parallel
        self.scope = Scope(run_binder(run, graph), inputs, run.facts)
        self._allowed: dict[str, bool] = {}

    async def execute(self) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        """Run the steps, then render the outputs: (status, outputs, error). Raises
        LimitExceeded and ResumeBlocked; a failure or a break is a status."""
        status, error = "ok", None
        try:
            if self.graph.timeout is not None:
                try:
                    async with asyncio.timeout(self.graph.timeout):
                        await self.sequence(self.graph.nodes, self.scope, self.prefix, "")
                except TimeoutError:
                    where = (f"chain {self.graph.name}" if self.graph.name
                             else "the run" if self.depth == 0 else f"sub-chain {self.graph.file}")
                    raise LimitExceeded("timeout", f"{where} took longer than its limit timeout "
                                                   f"({_seconds(self.graph.timeout)})") from None
            else:
                await self.sequence(self.graph.nodes, self.scope, self.prefix, "")
        except StepFailed as exc:
            status, error = "failed", {**exc.error, "step": exc.path, **({"event": exc.event} if exc.event else {})}
        except ChainBroken as exc:
            status, error = "broken", {"type": "break", "message": exc.reason, "step": exc.path}
        outputs: dict[str, Any] = {}
        for name, value in self.graph.outputs.items():
            try:
                outputs[name] = value.render(self.scope)
            except ExprEvalError as exc:
                outputs[name] = None
                if status == "ok":
                    status, error = "failed", error_of("expression", f"output '{name}': {exc.message}")
        return status, outputs, error

    # -- structure

    async def sequence(self, nodes: tuple[GraphNode, ...], scope: Scope, prefix: str, parent_path: str) -> None:
        for node in nodes:
            await self.start(node, scope, prefix + node.path[len(parent_path):] if prefix else node.path)

    def start(self, node: GraphNode, scope: Scope, ipath: str) -> Coroutine[Any, Any, None]:
        """The coroutine that runs `node`: an event step with nothing around it (no if, no
        foreach, on_error fail) goes straight to `event`, one frame less per step."""
        if node.plain:
            return self.event(node, scope, ipath)
        return self.node(node, scope, ipath)

    @staticmethod
    def instance_path(node: GraphNode, prefix: str, parent_path: str) -> str:
        """The path of this execution of `node`: its static path, with the iteration of each
        enclosing foreach (`3[0].1`) and the calling step of a sub-chain (`4/1`)."""
        if not prefix:
            return node.path
        return prefix + node.path[len(parent_path):]

    async def node(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        try:
            if node.condition is not None and node.kind != "if":
                if not truthy(self.evaluate(node, node.condition, scope, "if", ipath)):
                    self.skip(node, scope, ipath, "its if is false")
                    return
            if node.foreach is not None:
                await self.foreach(node, scope, ipath)
            elif node.kind == "event":
                await self.event(node, scope, ipath)
            else:
                await self.block(node, scope, ipath)
        except StepFailed as exc:
            if node.on_error == "fail":
                raise
            known = scope.paths.get(node.path)
            if known is None or known.status != "failed":  # an event step records its own failure
                scope.record(node.path, node.event, node.id, Rec("failed", None, exc.error))
            if node.on_error == "break":
                raise ChainBroken(ipath, f"step {ipath} failed and its on_error is break: {exc.error['message']}") from None

    def evaluate(self, node: GraphNode, fn: Callable[[Any], Any], scope: Scope, what: str, ipath: str) -> Any:
        try:
            return fn(scope)
        except ExprEvalError as exc:
            text = node.condition_text if what == "if" else node.foreach_text
            raise StepFailed(ipath, node.event, error_of(
                "expression", f"{what} `{_short(text or '', 80)}` (line {node.line}): {exc.message}")) from None

    def skip(self, node: GraphNode, scope: Scope, ipath: str, why: str) -> None:
        rec = Rec("skipped")
        scope.record(node.path, node.event, node.id, rec)
        if node.kind == "event":
            replayed = self.run.replay.finished.get(ipath) if self.run.replay else None
            if replayed is None:
                self.run.emit("step_started", step=ipath, event=node.event, attempt=1, params=None)
                self.run.emit("step_finished", step=ipath, event=node.event, status="skipped", result=None,
                              error=None, duration_ms=0, attempt=1, reason=why)

    async def block(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        prefix = ipath if ipath != node.path else ""
        start = time.perf_counter()
        try:
            if node.timeout is not None:
                async with asyncio.timeout(node.timeout):
                    result = await self.block_body(node, scope, prefix, ipath)
            else:
                result = await self.block_body(node, scope, prefix, ipath)
        except TimeoutError:
            raise StepFailed(ipath, None, error_of("timeout", f"block {ipath} took longer than its timeout "
                                                              f"({_seconds(node.timeout or 0)})")) from None
        scope.record(node.path, None, node.id, Rec("ok", result, None, None, _ms(start)))

    async def block_body(self, node: GraphNode, scope: Scope, prefix: str, ipath: str) -> Any:
        if node.kind == "steps":
            await self.sequence(node.children, scope, prefix, node.path)
            return self.last_result(node.children, scope)
        if node.kind == "parallel":
            limit = node.max_parallel or self.default_parallel
            scopes = await self.concurrently(
                [(child, self.instance_path(child, prefix, node.path)) for child in node.children], scope, limit)
            return [self.last_result((child,), sub) for child, sub in zip(node.children, scopes)]
        # if / then / else
        assert node.condition is not None
        branch = node.children if truthy(self.evaluate(node, node.condition, scope, "if", ipath)) else node.else_
        await self.sequence(branch, scope, prefix, node.path)
        return self.last_result(branch, scope)

    @staticmethod
    def last_result(nodes: tuple[GraphNode, ...], scope: Scope) -> Any:
        """A block's result: the result of its last step (null when that did not run)."""
        if not nodes:
            return None
        rec = scope.find_path(nodes[-1].path)
        return None if rec is None else rec.result

    async def concurrently(self, jobs: list[tuple[GraphNode, str]], scope: Scope, limit: int,
                           loop: tuple[str, list[Any]] | None = None, on_error: str = "fail") -> list[Scope]:
        """Run `jobs` as tasks, at most `limit` at a time, each in a child scope that is
        merged back in order; the first failure cancels the others."""
        if loop is None:
            scopes = [scope.child() for _ in jobs]
        else:
            scopes = [scope.child(loop[0], item) for item in loop[1]]

        async def one(i: int) -> None:
            node, ipath = jobs[i]
            if loop is None:
                await self.start(node, scopes[i], ipath)
                return
            # one item of a foreach: `on_error: continue` goes on with the other items
            try:
                if node.kind == "event":
                    await self.event(node, scopes[i], ipath)
                else:
                    await self.node(node, scopes[i], ipath)
            except StepFailed as exc:
                if on_error != "continue":
                    raise
                if scopes[i].paths.get(node.path) is None:
                    scopes[i].record(node.path, node.event, None, Rec("failed", None, exc.error))

        try:
            async with asyncio.TaskGroup() as group:
                if len(jobs) <= limit and loop is None:
                    for (node, ipath), sub in zip(jobs, scopes):
                        group.create_task(self.start(node, sub, ipath))
                elif len(jobs) <= limit:
                    for i in range(len(jobs)):
                        group.create_task(one(i))
                else:
                    pending = iter(range(len(jobs)))

                    async def worker() -> None:
                        for i in pending:
                            await one(i)

                    for _ in range(limit):
                        group.create_task(worker())
        except BaseExceptionGroup as group_error:
            for sub in scopes:  # what ran stays visible (to a block's on_error: continue, and after)
                scope.merge(sub)
            raise _first(group_error) from None
        for sub in scopes:
            scope.merge(sub)
        return scopes

    async def foreach(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        assert node.foreach is not None
        items = self.evaluate(node, node.foreach, scope, "foreach", ipath)
        if not isinstance(items, list):
            raise StepFailed(ipath, node.event, error_of(
                "foreach", f"foreach `{_short(node.foreach_text or '', 80)}` (line {node.line}) gave "
                           f"{_kind(items)}, not a list"))
        limit = node.max_parallel or self.default_parallel
        start = time.perf_counter()
        if node.kind == "event":
            jobs = [(node, f"{ipath}[{i}]") for i in range(len(items))]
            scopes = await self.concurrently(jobs, scope, limit, (node.as_, items), node.on_error)
            recs = [sub.paths.get(node.path) for sub in scopes]
        else:
            gate: dict[str, Any] = {} if node.kind == "if" else {"condition": None, "condition_text": None}
            body = _replace(node, foreach=None, foreach_text=None, id=None, on_error="fail", **gate)
            jobs = [(body, f"{ipath}[{i}]") for i in range(len(items))]
            scopes = await self.concurrently(jobs, scope, limit, (node.as_, items), node.on_error)
            recs = [sub.paths.get(node.path) for sub in scopes]
        results = [rec.result if rec is not None else None for rec in recs]
        failed = next((rec for rec in recs if rec is not None and rec.status == "failed"), None)
        status = "failed" if failed is not None else "ok"
        scope.record(node.path, node.event, node.id,
                     Rec(status, results, failed.error if failed else None, None, _ms(start)))

    # -- event steps

    async def event(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        """Run one event step (or one item of a foreach: `scope` then holds the loop variable)."""
        run = self.run
        name = node.event or ""
        replay = run.replay
        if replay is not None:
            done = replay.finished.get(ipath)
            if done is not None and not self.retries_left(ipath, done):
                self.replayed(node, scope, ipath, done)
                return
            if ipath in replay.skip and ipath in replay.started:
                self.finish_unstarted(node, scope, ipath, replay.started[ipath].get("params"), "skipped",
                                      "skipped on resume (--skip)")
                return
        if self.allow and not self.allowed(name):
            self.fail_early(node, scope, ipath, error_of(
                "not_allowed", f"{name} is not in the allow list of this chain"
                               + (" or of a chain that called it" if len(self.allow) > 1 else "")))
        rt = run.events.get(name)
        if rt is None:
            try:
                rt = self.runtime(name)
            except EventUnavailable as exc:
                self.fail_early(node, scope, ipath, error_of("unavailable", str(exc)))
        try:
            params = {key: value.render(scope) for key, value in node.params.items()}
        except ExprEvalError as exc:
            self.fail_early(node, scope, ipath, error_of("expression", f"params (line {node.line}): {exc.message}"))
        if run.hooks.active:
            changed = await run.hooks.pre(name, params, ipath)
            if changed is None:
                self.finish_unstarted(node, scope, ipath, params, "cancelled", "a pre hook cancelled it")
                return
            params = changed
        problems = rt.check_params(params)
        if problems or node.decide is not None:
            decision = await self.decide(node, rt, ipath, params, problems, scope)
            if decision.action == "skip":
                self.finish_unstarted(node, scope, ipath, params, "skipped", decision.reason)
                return
            if decision.action == "break":
                self.finish_unstarted(node, scope, ipath, params, "skipped", decision.reason, broke=True)
                raise ChainBroken(ipath, f"the decide model answered break at step {ipath} ({name}): {decision.reason}")
            params = decision.params or {}
            problems = rt.check_params(params)
            if problems:
                self.fail_early(node, scope, ipath, error_of(
                    "params", f"{name}: the params are invalid after the decision: " + "; ".join(problems[:3])),
                    params)
        await self.attempts(node, rt, scope, ipath, params)

    def retries_left(self, ipath: str, done: dict[str, Any]) -> bool:
        """A failed attempt that was to be retried when the run was interrupted (in the wait
        before the next attempt): the resume goes on with the next attempt."""
        if done.get("status") != "failed":
            return False
        started = self.run.replay.started.get(ipath) if self.run.replay else None
        error = done.get("error") or {}
        attempt, most = done.get("attempt"), (started or {}).get("max_attempts")
        return (isinstance(attempt, int) and isinstance(most, int) and attempt < most
                and error.get("type") in _RETRIED)

    def replayed(self, node: GraphNode, scope: Scope, ipath: str, done: dict[str, Any]) -> None:
        started = self.run.replay.started.get(ipath) if self.run.replay else None
        params = started.get("params") if started else None
        rec = Rec(done["status"], done.get("result"), done.get("error"), params, done.get("duration_ms", 0))
        if started is not None and "max_attempts" in started:  # it reached its tool: an executed step
            self.run.steps_run += 1
        scope.record(node.path, node.event, node.id, rec)
        if done.get("broke"):
            raise ChainBroken(ipath, f"the decide model answered break at step {ipath} ({node.event}): "
                                     f"{done.get('reason', '')}")
        if rec.status == "failed":
            raise StepFailed(ipath, node.event, rec.error or error_of("failed", "failed"))

    def fail_early(self, node: GraphNode, scope: Scope, ipath: str, error: dict[str, Any], params: Any = None) -> NoReturn:
        """A failure before the tool was called (params, decide): recorded as one attempt."""
        self.run.emit("step_started", step=ipath, event=node.event, attempt=1, params=params)
        self.run.emit("step_finished", step=ipath, event=node.event, status="failed", result=None, error=error,
                      duration_ms=0, attempt=1)
        scope.record(node.path, node.event, node.id, Rec("failed", None, error, params))
        raise StepFailed(ipath, node.event, error)

    def finish_unstarted(self, node: GraphNode, scope: Scope, ipath: str, params: Any, status: str, why: str,
                         **extra: Any) -> None:
        self.run.emit("step_started", step=ipath, event=node.event, attempt=1, params=params)
        self.run.emit("step_finished", step=ipath, event=node.event, status=status, result=None, error=None,
                      duration_ms=0, attempt=1, reason=why, **extra)
        scope.record(node.path, node.event, node.id, Rec(status, None, None, params))

    async def attempts(self, node: GraphNode, rt: EventRuntime, scope: Scope, ipath: str, params: dict[str, Any]) -> None:
        run = self.run
        name = rt.spec.name
        retry = node.retry
        tries = retry.attempts if retry is not None else 1
        first = 1
        if run.replay is not None:
            first = self.resume_attempt(rt, ipath)
        run.steps_run += 1  # an executed step: its event is called (once, however many attempts)
        if run.steps_run > run.max_steps:
            raise LimitExceeded("max_steps", f"the run executed more than max_steps = {run.max_steps} steps "
                                             f"(at step {ipath}, {name})")
        for attempt in range(first, tries + 1):
            run.emit("step_started", step=ipath, event=name, attempt=attempt, max_attempts=tries, params=params)
            start = time.perf_counter()
            deadline = None
            watch = Watch()  # whether the call had to be abandoned
            try:
                # the tool gets its own copy: what it does to its params changes no recorded value
                if node.timeout is not None:
                    deadline = asyncio.timeout(node.timeout)
                    async with deadline:
                        result = await self.call(rt, copy_json(params), ipath, attempt, watch)
                elif rt.direct:  # the common case, without the detour through call()
                    result = await guarded(rt.func(**copy_json(params)), watch)  # type: ignore[misc]
                else:
                    result = await self.call(rt, copy_json(params), ipath, attempt, watch)
                if rt.check_result is None and _is_plain_json(result, tuples=False):
                    error = None
                else:
                    result, problem = self.check_result(rt, result)
                    error = None if problem is None else error_of("result", problem)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling() == 0:  # the tool raised it: not a cancellation
                    error = error_of("tool_error", _tool_message(exc) or "CancelledError")
                else:
                    run.emit("step_finished", step=ipath, event=name, status="cancelled", result=None,
                             error=error_of("cancelled", "cancelled: another branch failed or the run stopped"
                                            + _abandoned(name, watch), **_abandoned_field(watch)),
                             duration_ms=_ms(start), attempt=attempt)
                    scope.record(node.path, name, node.id, Rec("cancelled", None, None, params, _ms(start)))
                    raise
            except TimeoutError as exc:
                if deadline is not None and deadline.expired():
                    error = error_of("timeout", f"{name} took longer than its timeout ({_seconds(node.timeout or 0)})"
                                     + _abandoned(name, watch), **_abandoned_field(watch))
                else:  # raised by the tool itself (a socket timeout...)
                    error = error_of("tool_error", _tool_message(exc))
            except LimitExceeded as exc:
                self.finish(node, scope, ipath, params, start, attempt, None, error_of("limit", exc.message))
                raise
            except ResumeBlocked:
                raise  # the step stays open: resuming again (with --rerun/--skip) re-enters it
            except ChainFailed as exc:  # a sub-chain failed: not retried (its own steps retry)
                self.finish(node, scope, ipath, params, start, attempt, None, exc.error)
                raise StepFailed(ipath, name, exc.error) from None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # any other exception of a tool is its failure, not the run's end
                error = error_of("tool_error", _tool_message(exc))
            if error is None:
                duration = round((time.perf_counter() - start) * 1000, 3)
                try:
                    run.emit("step_finished", step=ipath, event=name, status="ok", result=result, error=None,
                             duration_ms=duration, attempt=attempt)
                except TypeError as exc:  # a value the encoder refuses: the result is at fault, not the run
                    error = error_of("result", f"{name} returned a result that cannot be written as JSON: {exc}")
                else:
                    scope.record(node.path, name, node.id, Rec("ok", result, None, params, duration))
                    if run.hooks.active:
                        await run.hooks.post(name, params, result, ipath)
                    return
            self.finish(node, scope, ipath, params, start, attempt, None, error)
            if attempt < tries and retry is not None:
                await asyncio.sleep(_delay(retry, attempt))
                continue
            raise StepFailed(ipath, name, error)

    def finish(self, node: GraphNode, scope: Scope, ipath: str, params: Any, start: float, attempt: int,
               result: Any, error: dict[str, Any] | None) -> None:
        duration = _ms(start)
        status = "ok" if error is None else "failed"
        self.run.emit("step_finished", step=ipath, event=node.event, status=status, result=result, error=error,
                      duration_ms=duration, attempt=attempt)
        scope.record(node.path, node.event, node.id, Rec(status, result, error, params, duration))

    def resume_attempt(self, rt: EventRuntime, ipath: str) -> int:
        """On resume: the attempt to start with. An attempt that started and did not finish
        is run again (same attempt number, so the same idempotency key) if the event is
        idempotent, a chain, or the user said so; otherwise the run stops here."""
        replay = self.run.replay
        assert replay is not None
        started = replay.started.get(ipath)
        if started is None:
            return 1
        attempt = int(started.get("attempt", 1))
        if ipath in replay.finished:  # that attempt failed and is to be retried
            return attempt + 1
        # no end recorded, or `cancelled` (interrupted mid-call: its effect is just as unknown)
        if rt.spec.idempotent or rt.spec.kind == "chain" or rt.spec.name == "chain.run" or ipath in replay.rerun:
            return attempt
        raise ResumeBlocked(ipath, rt.spec.name, (
            f"step {ipath} ({rt.spec.name}) started but did not finish before the run was interrupted, and "
            f"{rt.spec.name} is not idempotent: it may or may not have taken effect. Check, then resume with "
            f"--rerun {ipath} to run it again or --skip {ipath} to go on without it"))

    async def call(self, rt: EventRuntime, params: dict[str, Any], ipath: str, attempt: int, watch: Watch) -> Any:
        """Call the step's tool: an async tool is awaited (guarded: one that ignores its
        cancellation is abandoned after GRACE seconds); a sync tool runs in a worker thread
        (abandoned, still running, when the step stops waiting for it)."""
        spec = rt.spec
        if spec.kind == "chain" or spec.name == "chain.run":
            return await self.subchain(spec, params, ipath)
        assert rt.func is not None
        if rt.is_async:
            if rt.accepts_ctx:
                params = {**params, "ctx": self.context(spec, ipath, attempt)}
            return await guarded(rt.func(**params), watch)
        call = Call(asyncio.get_running_loop())  # every sync tool gets a thread (`blocking=True` or not)
        if rt.accepts_ctx:
            params = {**params, "ctx": self.context(spec, ipath, attempt, call)}
        call.func, call.kwargs = rt.func, params
        return await in_thread(call, watch)

    def context(self, spec: "EventSpec", ipath: str, attempt: int, call: Call | None = None) -> RunContext:
        """The tool's `ctx`. For a sync tool (`call`: it runs in a worker thread) what it
        asks of the run is done on the event loop, and not at all once the call is abandoned."""
        run = self.run
        name = spec.name

        def progress(message: str, fraction: float | None = None) -> None:
            if fraction is not None and not (isinstance(fraction, (int, float)) and 0 <= fraction <= 1):
                fraction = None
            run.emit("step_progress", step=ipath, event=name, message=str(message)[:1000], fraction=fraction)

        clock: Clock = StepClock(run, ipath)
        report: Callable[..., None] = progress
        notify = run.notify
        if call is not None:
            clock, report, notify = _AskedClock(call.ask(clock.now)), call.relay(progress), call.relay(notify)
        return RunContext(
            run_id=run.run_id, chain=self.graph.name, step=ipath, event=name, attempt=attempt,
            idempotency_key=idempotency_key(run.run_id, ipath, attempt), clock=clock,
            state_dir=run.state_dir, progress=report, notify=notify,
        )

    def check_result(self, rt: EventRuntime, result: Any) -> tuple[Any, str | None]:
        """The result as recorded (tuples become lists, as in the transcript), and what is
        wrong with it, if anything."""
        if not _is_plain_json(result, tuples=False):
            found = _find_non_json(result, [])
            if found is not None:
                where, why = found
                at = "".join(f"[{p!r}]" for p in where)
                return None, f"{rt.spec.name} returned a value that is not JSON: result{at} {why}"
            result = copy_json(result)  # JSON with tuples in it
        if rt.check_result is not None:
            problems = rt.check_result(result)
            if problems:
                return None, (f"{rt.spec.name} returned a result that does not match its result schema: "
                              + "; ".join(problems[:3]))
        return result, None

    async def subchain(self, spec: "EventSpec", params: dict[str, Any], ipath: str) -> Any:
        run = self.run
        if self.depth + 1 > self.depth_limit:
            raise LimitExceeded("max_depth", f"step {ipath} would run {spec.name} at depth {self.depth + 1}, "
                                             f"beyond max_depth = {self.depth_limit}")
        if run.load_chain is None:
            raise RuntimeError("this run cannot load sub-chains")
        if spec.name == "chain.run":
            target, inputs = str(params.get("path", "")), dict(params.get("inputs") or {})
        else:
            target, inputs = spec.name, dict(params)
        try:
            graph = run.load_chain(target, self.graph.file)
        except ChainLoadError as exc:
            raise ChainFailed(error_of("chain", str(exc))) from None
        from chainlang.api import UsageError
        from chainlang.runtime.runner import check_inputs

        try:
            inputs = check_inputs(graph, inputs)
        except UsageError as exc:
            raise ChainFailed(error_of("params", f"{graph.name or target}: {exc}")) from None
        sub = ChainRun(run, graph, inputs, depth=self.depth + 1, prefix=ipath + "/", allow=self.allow,
                       depth_limit=self.depth_limit)
        status, outputs, error = await sub.execute()
        if status == "failed":
            where = f" at step {error.get('step')}" if error and error.get("step") else ""
            raise ChainFailed(error_of("chain", f"{graph.name or target} failed{where}: "
                                                f"{(error or {}).get('message', '')}"))
        return outputs

    async def decide(self, node: GraphNode, rt: EventRuntime, ipath: str, params: dict[str, Any],
                     problems: list[str], scope: Scope) -> "Decision":
        from chainlang.runtime.decide import DecideError, DecideRequest, Decision, DecisionNeeded

        run = self.run
        recorded = run.replay.decisions.get(ipath) if run.replay else None
        if recorded:
            rec = recorded.pop(0)
            if rec.get("action") == "fail":  # nothing could decide: the step failed, and fails again
                self.fail_early(node, scope, ipath, error_of("decide", str(rec.get("reason", ""))), params)
            try:
                return Decision.from_record({k: rec[k] for k in ("action", "params", "reason", "source") if k in rec})
            except ValueError as exc:
                self.fail_early(node, scope, ipath, error_of("decide", f"the recorded decision cannot be used: {exc}"),
                                params)
        condition = node.decide
        decision: Decision | None = None
        asked: dict[str, Any] = {"condition": condition, "errors": problems, "params": params}
        if condition is not None and node.decide_expr is not None:
            try:
                holds = truthy(node.decide_expr(scope))
            except ExprEvalError as exc:
                self.fail_early(node, scope, ipath, error_of(
                    "expression", f"decide `{_short(condition, 80)}` (line {node.line}): {exc.message}"), params)
            if not holds:
                decision = Decision("skip", None, f"condition `{_short(condition, 80)}` is false", "embedded")
            elif not problems:
                decision = Decision("continue", params, f"condition `{_short(condition, 80)}` is true", "embedded")
            condition = None  # judged here; what is left is repairing the params
        if decision is None:
            request = DecideRequest(
                event=rt.spec.name, description=rt.spec.description, params_schema=rt.spec.params_schema,
                params=params, errors=problems, condition=condition,
                context={"inputs": scope.inputs, "run": run.facts, **scope.visible()} if condition else {},
            )
            try:
                decision = await run.decider.decide(request)
            except DecisionNeeded as exc:
                run.emit("decide", step=ipath, event=rt.spec.name, asked=asked, action="fail", reason=str(exc),
                         source="fallback")
                self.fail_early(node, scope, ipath, error_of("decide", str(exc)), params)
            except DecideError as exc:  # e.g. the model's API key variable is not set
                self.fail_early(node, scope, ipath, error_of("decide", f"{rt.spec.name}: the decide model cannot be "
                                                                       f"used: {exc}"), params)
        record = decision.to_record()
        run.emit("decide", step=ipath, event=rt.spec.name, asked=asked, **record)
        return decision

    # -- registry

    def runtime(self, name: str) -> EventRuntime:
        rt = self.run.events.get(name)
        if rt is None:
            rt = prepare_event(self.run.registry, name)
            self.run.events[name] = rt
        return rt

    def allowed(self, name: str) -> bool:
        if not self.allow:
            return True
        known = self._allowed.get(name)
        if known is None:
            known = all(any(fnmatch.fnmatchcase(name, p) for p in patterns) for patterns in self.allow)
            self._allowed[name] = known
        return known


class ChainFailed(Exception):
    """A sub-chain failed: the calling step fails with this error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


class ChainLoadError(Exception):
    """A sub-chain cannot be run (not found, outside the project, check errors)."""


class EventUnavailable(Exception):
    """The event has no implementation this run can call."""


def prepare_event(registry: "Registry", name: str) -> EventRuntime:
    """Resolve an event's implementation and build its validators, once per run."""
    from chainlang.registry.errors import ImplementationError

    spec = registry.get(name)
    if spec is None:
        raise EventUnavailable(f"{name} is not a known event")
    func = None
    is_async = accepts = False
    if spec.kind == "tool" and name != "chain.run":
        try:
            spec = spec.resolved()
        except ImplementationError as exc:
            raise EventUnavailable(str(exc)) from None
        func, is_async, accepts = spec.func, spec.is_async, spec.accepts_ctx
    elif spec.kind == "external":
        raise EventUnavailable(f"{name} is an external event: it has no tool behind it and cannot be a step "
                               f"(fire it with chainlang emit {name} --data JSON)")
    return EventRuntime(
        spec=spec, func=func, is_async=is_async, accepts_ctx=accepts,
        check_params=schema_checker(spec.params_schema),
        check_result=schema_checker(spec.result_schema) if spec.result_schema else None,
    )


def schema_checker(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """`check(value)` → the validation messages (empty when valid). A compiled exact fast
    path answers "valid" for the common schemas; jsonschema explains what is not."""
    from chainlang.runtime.decide import validate_params

    from chainlang.schema_fastpath import compile_fast_check

    fast = compile_fast_check(schema)
    if fast is None:
        return lambda value: validate_params(schema, value)
    is_valid = fast

    def check(value: Any) -> list[str]:
        if is_valid(value):
            return []
        return validate_params(schema, value)
    return check


def apply_input_defaults(graph: ExecutionGraph, inputs: dict[str, Any]) -> dict[str, Any]:
    out = dict(inputs)
    for name, schema in graph.inputs.items():
        if name not in out and isinstance(schema, dict) and "default" in schema:
            out[name] = copy_json(schema["default"])
    return out


def run_binder(run: RunState, graph: ExecutionGraph) -> Binder:
    binder = run.binders.get(id(graph))
    if binder is None:
        events: dict[str, list[str]] = {}
        ids: set[str] = set()
        stack = list(reversed(graph.nodes))
        while stack:
            node = stack.pop()
            if node.kind == "event" and node.event:
                events.setdefault(node.event, []).append(node.path)
            if node.id:
                ids.add(node.id)
            stack.extend(reversed(node.else_))
            stack.extend(reversed(node.children))
        registry = run.registry
        binder = Binder(events, ids, lambda name: name in registry)
        run.binders[id(graph)] = binder
    return binder


# --------------------------------------------------------------------------- helpers


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception a failed group stands for: a limit first, then a blocked resume, a
    failure, a break; anything else (a bug, a cancellation) as it is."""
    flat: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            flat.append(exc)

    walk(group)
    for kind in (LimitExceeded, ResumeBlocked, StepFailed, ChainBroken):
        for exc in flat:
            if isinstance(exc, kind):
                return exc
    return flat[0]


def _replace(node: GraphNode, **changes: Any) -> GraphNode:
    import dataclasses

    return dataclasses.replace(node, **changes)


_RETRIED = frozenset({"tool_error", "timeout", "result"})  # the failures `retry` tries again
MAX_RETRY_DELAY = 3600.0  # seconds: no wait between two attempts is longer, whatever the backoff


def _delay(retry: Any, attempt: int) -> float:
    """The wait after failed attempt `attempt`: delay × backoff^(attempt-1), at most max_delay."""
    try:
        delay = float(retry.delay) * (float(retry.backoff) ** (attempt - 1))
    except OverflowError:
        delay = math.inf
    if retry.max_delay is not None:
        delay = min(delay, float(retry.max_delay))
    return max(0.0, min(delay, MAX_RETRY_DELAY))


def _abandoned(name: str, watch: Watch) -> str:
    """What the step's error adds when its call had to be abandoned."""
    if watch.abandoned == "task":
        return f"; {name} ignored its cancellation and was abandoned after {_seconds(GRACE)}"
    if watch.abandoned == "thread":
        return f"; {name} was abandoned, still running in its thread (a thread cannot be stopped)"
    return ""


def _abandoned_field(watch: Watch) -> dict[str, Any]:
    return {"abandoned": True} if watch.abandoned else {}


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    from chainlang.expr.values import kind_of

    kind = kind_of(value)
    return {"null": "null", "object": "an object", "string": "a string", "number": "a number",
            "boolean": "a boolean"}.get(kind, kind)


def _tool_message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:1000]
    if isinstance(exc, ValueError) and text:  # tools raise ValueError with a message meant for users
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "ChainBroken",
    "ChainFailed",
    "ChainLoadError",
    "ChainRun",
    "EventUnavailable",
    "Hooks",
    "LimitExceeded",
    "NoHooks",
    "Replay",
    "ResumeBlocked",
    "RunState",
    "StepFailed",
]
