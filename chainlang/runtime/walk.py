"""The walker: runs a compiled chain's structure — sequences, parallel groups, `foreach`,
`if` — over the step pipeline (chainlang.runtime.step) for its event steps.

Semantics (LANGUAGE.md §2–§5, §8; the user-facing text is docs/reference/execution.md):

- Steps of a sequence run one after the other on the event loop; no task is created for
  them. A parallel group (and a `foreach`) runs its branches as tasks of a TaskGroup, at
  most `max_parallel` at a time; when a branch fails (and its `on_error` is `fail`) the
  group cancels its siblings, whose running steps are recorded as `cancelled`.
- A step whose `if` is false is `skipped`. `on_error`: `fail` fails the enclosing chain,
  `continue` records the failure and goes on, `break` stops the chain cleanly (status
  `broken`).
- On resume, blocks are not recorded: they are walked again, and their conditions give
  the same answers because everything they read is recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from chainlang.compile import ExecutionGraph, GraphNode
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import truthy
from chainlang.journal.records import StepFinished, StepStarted
from chainlang.runtime.hooks import HookDispatch
from chainlang.runtime.flow import FLOW_KINDS, run_flow
from chainlang.runtime.live_run import LIMIT_DEADLINES
from chainlang.runtime.interceptors import AllowList
from chainlang.runtime.outcomes import (
    ChainBroken,
    LimitExceeded,
    StepFailed,
    error_of,
    first_of_group,
    kind_text,
    ms_since,
    perf,
    seconds,
    short,
)
from chainlang.runtime.scope import Binder, HookContext, Rec, Scope
from chainlang.runtime.threads import reading  # thread[EXPR] on Temporal: fetched, then evaluated
from chainlang.runtime.state import RunState
from chainlang.runtime.step import StepPipeline
from chainlang.runtime.loops import run_repeat
from chainlang.runtime.error_hooks import on_failure
from chainlang.runtime.wait_step import run_wait
from chainlang.status import BREAK, BROKEN, FAILED, OK, RunStatus

if TYPE_CHECKING:
    from chainlang.compile.hooks import HookSet


StepRunner = Callable[[GraphNode, Scope, str], Coroutine[Any, Any, None]]  # how a chain runs one step


async def _steps_over(node: GraphNode, scope: Scope, ipath: str) -> None:
    raise RuntimeError(f"step {ipath}: its chain's steps are over (ChainRun.release)")


class ChainRun:
    """One chain being run: the top-level chain, or a sub-chain at `depth` > 0."""

    def __init__(self, run: RunState, graph: ExecutionGraph, inputs: dict[str, Any], *, depth: int = 0,
                 prefix: str = "", allow: tuple[tuple[str, ...], ...] = (), depth_limit: int | None = None,
                 strip: str = "", hook: HookContext | None = None, hooks: "HookSet | None" = None,
                 stack: tuple[str, ...] = (), hook_inputs: dict[int, dict[str, Any]] | None = None) -> None:
        self.run = run
        self.graph = graph
        self.depth = depth
        self.prefix = prefix  # "4/" for the steps of a sub-chain called by step 4
        self.strip = strip  # what the prefix replaces in the static paths ("hook:ID." for a hook's action)
        self.allow = allow + ((graph.allow,) if graph.allow is not None and graph.allow not in allow else ())
        self.depth_limit = min(graph.max_depth, depth_limit) if depth_limit is not None else graph.max_depth
        self.default_parallel = graph.max_parallel
        self.scope = Scope(run_binder(run, graph), inputs, run.facts, hook=hook)
        # the hooks in force (the run's, and a sub-chain's own), and the hooks whose actions this chain is inside
        self.hooks = hooks if hooks is not None else run.hooks
        # the inputs of the chain that declares each hook (by its bindings, which copies share)
        self.hook_inputs = hook_inputs if hook_inputs is not None else {}
        if graph.hook_set:
            self.hooks = run.merged_hooks(self.hooks, graph.hook_set)
            self.hook_inputs = {**self.hook_inputs, **{id(h.bindings): inputs for h in graph.hook_set.hooks}}
        self.stack = stack
        # the allow lists in force are one more interceptor, ahead of the run's own; hooks fire through one
        allowed = (AllowList(self.allow),) if self.allow else ()
        fire = (HookDispatch(self),) if self.hooks else ()
        self.interceptors = allowed + run.interceptors + fire
        # error: hooks fire when a step fails; `release` puts _steps_over in its place
        self.event: StepRunner = on_failure(self, StepPipeline(self))

    async def execute(self) -> tuple[RunStatus, dict[str, Any], dict[str, Any] | None]:
        """Run the steps, then render the outputs: (status, outputs, error). Raises
        LimitExceeded and ResumeBlocked; a failure or a break is a status. Once, then the
        chain is released (see `release`)."""
        try:
            return await self._steps_and_outputs()
        finally:
            self.release()

    def release(self) -> None:
        """The chain's steps are over: let go of its step pipeline and interceptors, which
        refer back to it. The run's objects are then freed by reference counting as soon
        as it ends, not left for the garbage collector, whose passes over many runs at once
        cost more than the runs (benchmarks/runs_bench.py). What outlives the steps (the
        post-hook actions they started, the scope the outputs read) needs neither."""
        self.event = _steps_over
        self.interceptors = ()

    async def _steps_and_outputs(self) -> tuple[RunStatus, dict[str, Any], dict[str, Any] | None]:
        status: RunStatus = OK
        error: dict[str, Any] | None = None
        try:
            if self.graph.timeout is not None:
                try:
                    async with asyncio.timeout(self.graph.timeout) as deadline:
                        # a finally tells this limit from other cancellations by it (runtime/live_run.py)
                        token = LIMIT_DEADLINES.set(LIMIT_DEADLINES.get() + (deadline,))
                        try:
                            await self.sequence(self.graph.nodes, self.scope, self.prefix, self.strip)
                        finally:
                            LIMIT_DEADLINES.reset(token)
                except TimeoutError:
                    where = (f"chain {self.graph.name}" if self.graph.name
                             else "the run" if self.depth == 0 else f"sub-chain {self.graph.file}")
                    raise LimitExceeded("timeout", f"{where} took longer than its limit timeout "
                                                   f"({seconds(self.graph.timeout)})") from None
            else:
                await self.sequence(self.graph.nodes, self.scope, self.prefix, self.strip)
        except StepFailed as exc:
            status, error = FAILED, {**exc.error, "step": exc.path, **({"event": exc.event} if exc.event else {})}
        except ChainBroken as exc:
            status, error = BROKEN, error_of(BREAK, exc.reason, step=exc.path)
        outputs: dict[str, Any] = {}
        for name, value in self.graph.outputs.items():
            try:
                outputs[name] = await reading(value.render, self.scope)
            except ExprEvalError as exc:
                outputs[name] = None
                if status == OK:
                    status, error = FAILED, error_of("expression", f"output '{name}': {exc.message}")
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
                if not truthy(await reading(self.evaluate, node, node.condition, scope, "if", ipath)):
                    self.skip(node, scope, ipath, "its if is false")
                    return
            if node.foreach is not None:
                await self.foreach(node, scope, ipath)
            elif node.kind == "event":
                await self.event(node, scope, ipath)
            elif node.kind in FLOW_KINDS:  # try, switch, fail: runtime/flow.py
                await run_flow(self, node, scope, ipath)
            elif node.kind == "wait":  # wait, user.ask: runtime/wait_step.py
                await run_wait(self, node, scope, ipath)
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
                "expression", f"{what} `{short(text or '', 80)}` (line {node.line}): {exc.message}")) from None

    def skip(self, node: GraphNode, scope: Scope, ipath: str, why: str) -> None:
        rec = Rec("skipped")
        scope.record(node.path, node.event, node.id, rec)
        if node.kind == "event":
            replayed = self.run.replay.finished.get(ipath) if self.run.replay else None
            if replayed is None:
                event = node.event or ""
                self.run.record(StepStarted(ipath, event, 1, None))
                self.run.record(StepFinished(ipath, event, "skipped", None, None, 0, 1, why))

    async def block(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        prefix = ipath if ipath != node.path else ""
        start = perf()
        try:
            if node.timeout is not None:
                async with asyncio.timeout(node.timeout):
                    result = await self.block_body(node, scope, prefix, ipath)
            else:
                result = await self.block_body(node, scope, prefix, ipath)
        except TimeoutError:
            raise StepFailed(ipath, None, error_of("timeout", f"block {ipath} took longer than its timeout "
                                                              f"({seconds(node.timeout or 0)})")) from None
        scope.record(node.path, None, node.id, Rec("ok", result, None, None, ms_since(start)))

    async def block_body(self, node: GraphNode, scope: Scope, prefix: str, ipath: str) -> Any:
        if node.kind == "repeat":  # runtime/loops.py
            return await run_repeat(self, node, scope, ipath)
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
        holds = truthy(await reading(self.evaluate, node, node.condition, scope, "if", ipath))
        branch = node.children if holds else node.else_
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
            raise first_of_group(group_error) from None
        for sub in scopes:
            scope.merge(sub)
        return scopes

    async def foreach(self, node: GraphNode, scope: Scope, ipath: str) -> None:
        assert node.foreach is not None
        items = await reading(self.evaluate, node, node.foreach, scope, "foreach", ipath)
        if not isinstance(items, list):
            raise StepFailed(ipath, node.event, error_of(
                "foreach", f"foreach `{short(node.foreach_text or '', 80)}` (line {node.line}) gave "
                           f"{kind_text(items)}, not a list"))
        limit = node.max_parallel or self.default_parallel
        start = perf()
        if node.kind == "event":
            jobs = [(node, f"{ipath}[{i}]") for i in range(len(items))]
            scopes = await self.concurrently(jobs, scope, limit, (node.as_, items), node.on_error)
            recs = [sub.paths.get(node.path) for sub in scopes]
        else:
            gate: dict[str, Any] = {} if node.kind == "if" else {"condition": None, "condition_text": None}
            body = dataclasses.replace(node, foreach=None, foreach_text=None, id=None, on_error="fail", **gate)
            jobs = [(body, f"{ipath}[{i}]") for i in range(len(items))]
            scopes = await self.concurrently(jobs, scope, limit, (node.as_, items), node.on_error)
            recs = [sub.paths.get(node.path) for sub in scopes]
        results = [rec.result if rec is not None else None for rec in recs]
        failed = next((rec for rec in recs if rec is not None and rec.status == "failed"), None)
        status = "failed" if failed is not None else "ok"
        scope.record(node.path, node.event, node.id,
                     Rec(status, results, failed.error if failed else None, None, ms_since(start)))


def run_binder(run: RunState, graph: ExecutionGraph) -> Binder:
    """The accessors of a compiled chain's references, made once per compiled chain (an
    accessor depends on the reference and its binding only: the runs of a chain share them)."""
    binder = run.binders.get(id(graph))
    if binder is None:
        entry = _BINDERS.get(id(graph))
        if entry is None or entry[0] is not graph:
            if len(_BINDERS) > 1024:
                _BINDERS.clear()
            entry = _BINDERS[id(graph)] = (graph, Binder(graph.bindings))
        binder = run.binders[id(graph)] = entry[1]
    return binder


# by id() of the compiled chain; each entry keeps its graph alive, so the id stays its own (bounded)
_BINDERS: dict[int, tuple[ExecutionGraph, Binder]] = {}


__all__ = ["ChainRun", "run_binder"]
