"""Running `try`/`catch`/`finally`, `switch` and `fail` (LANGUAGE.md §2; the user-facing
text is docs/reference/control-flow.md). Written once: the embedded engine and Temporal's
workflow walk chains with the same walker (runtime/walk.py), which hands these kinds here.

try:
- a step of `try` that fails (its on_error is fail) runs `catch`, in a scope where
  `{error}` is `{type, message, step, path, event}`: `step` is the failed step's path
  inside the try (`2`, `2.then.1`, `2[0]` for a foreach item), `path` its full instance
  path in the run (`3.try.2`). A catch that ends without failing ends the block `ok`.
- `finally` runs last, however the block ended: ok, a failure (of try, or of catch), a
  break, a limit (limits.timeout, max_steps), or a cancellation by a failing sibling
  branch. After a limit it runs under a grace shared by every finally the limit unwinds
  (live_run.FINALLY_GRACE_SECONDS / _STEPS), then the run ends with that limit. When the
  run itself is interrupted (Ctrl-C, SIGTERM, a cancelled workflow) it does not run then:
  the run is resumable, and the resume walks the block again and runs it before the end.
- the outcome: a finally that fails replaces the block's outcome with its failure;
  otherwise the block ends as try/catch did. The block's result is the result of the
  last step of the branch that ended it ok (try's, or catch's); finally's is not used.

switch: the value (a template) is compared as text with each case key (a number, boolean
or null as its JSON text); the first equal case runs, else `default`, else the block is
skipped. Its result is the last result of the case that ran.

fail: ends the chain as failed, error `{type: fail, message}` (the message templated);
the step's `on_error` (or an enclosing block's, or a catch) may handle it like any failure.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from chainlang.expr.errors import ExprEvalError
from chainlang.model.build_flow import switch_text
from chainlang.runtime import live_run
from chainlang.runtime.outcomes import (
    ChainBroken,
    LimitExceeded,
    StepFailed,
    error_of,
    ms_since,
    perf,
    seconds,
)
from chainlang.runtime.scope import Rec, Scope
from chainlang.status import EXPRESSION, FAIL, TIMEOUT

if TYPE_CHECKING:
    from chainlang.compile import GraphNode
    from chainlang.runtime.walk import ChainRun

FLOW_KINDS = frozenset({"try", "switch", "fail"})


async def run_flow(chain: "ChainRun", node: "GraphNode", scope: Scope, ipath: str) -> None:
    """Run a try, switch or fail node (its `if` and `foreach` were handled by the walker);
    record its result, or raise how it failed."""
    if node.kind == "fail":
        fail(node, scope, ipath)
    start = perf()
    try:
        if node.timeout is not None:
            async with asyncio.timeout(node.timeout):
                outcome = await _body(chain, node, scope, ipath)
        else:
            outcome = await _body(chain, node, scope, ipath)
    except TimeoutError:
        raise StepFailed(ipath, None, error_of(TIMEOUT, f"block {ipath} took longer than its timeout "
                                                          f"({seconds(node.timeout or 0)})")) from None
    ran, result = outcome
    scope.record(node.path, None, node.id, Rec("ok" if ran else "skipped", result, None, None, ms_since(start)))


async def _body(chain: "ChainRun", node: "GraphNode", scope: Scope, ipath: str) -> tuple[bool, Any]:
    if node.kind == "switch":
        return await run_switch(chain, node, scope, ipath)
    return True, await run_try(chain, node, scope, ipath)


# -- fail

def fail(node: "GraphNode", scope: Scope, ipath: str) -> None:
    assert node.flow.value is not None
    try:
        message = node.flow.value.render(scope)
    except ExprEvalError as exc:
        raise StepFailed(ipath, None, error_of(EXPRESSION, f"fail message (line {node.line}): {exc.message}")) from None
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    error = error_of(FAIL, message)
    live = live_run.current()
    if live is not None:
        live.failed(ipath, None, error)
    raise StepFailed(ipath, None, error)


# -- switch

async def run_switch(chain: "ChainRun", node: "GraphNode", scope: Scope, ipath: str) -> tuple[bool, Any]:
    assert node.flow.value is not None
    try:
        value = node.flow.value.render(scope)
    except ExprEvalError as exc:
        raise StepFailed(ipath, None, error_of(EXPRESSION, f"switch value (line {node.line}): {exc.message}")) from None
    text = switch_text(value)
    chosen = next((branch for branch, key in zip(node.children, node.flow.labels) if key is not None and key == text), None)
    if chosen is None:
        chosen = next((branch for branch, key in zip(node.children, node.flow.labels) if key is None), None)
    if chosen is None:
        return False, None  # no case and no default: the block is skipped
    await run_branch(chain, node, chosen, scope, ipath)
    return True, chain.last_result(chosen.children, scope)


# -- try / catch / finally

async def run_try(chain: "ChainRun", node: "GraphNode", scope: Scope, ipath: str) -> Any:
    branches = dict(zip(node.flow.labels, node.children))
    body, catch, final = branches["try"], branches.get("catch"), branches.get("finally")
    result, outcome = await _attempt(run_branch(chain, node, body, scope, ipath))
    if outcome is None:
        result = chain.last_result(body.children, scope)
    elif isinstance(outcome, StepFailed) and catch is not None:
        caught = scope.child("error", caught_error(outcome, ipath + body.path[len(node.path):]))
        token = live_run.STANDING.set("failed")
        try:
            result, outcome = await _attempt(run_branch(chain, node, catch, caught, ipath))
        finally:
            live_run.STANDING.reset(token)
            scope.merge(caught)  # what catch ran is visible after the block (and to finally)
        if outcome is None:
            result = chain.last_result(catch.children, scope)
    if final is not None:
        failed = await run_finally(chain, node, final, scope, ipath, outcome)
        if failed is not None:
            raise failed
    if outcome is not None:
        raise outcome
    return result


async def _attempt(branch: Any) -> tuple[Any, BaseException | None]:
    """Await a branch: (its value, None), or (None, how it ended) for the endings a finally
    runs after. An interruption of the run, or a resume blocked at an unsafe step, is
    raised: the run stops now and its resume runs the finally."""
    try:
        return await branch, None
    except (StepFailed, ChainBroken, LimitExceeded) as exc:
        return None, exc
    except asyncio.CancelledError as exc:
        live = live_run.current()
        if live is None or live.interrupted():
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the finally runs as steps normally do; the cancellation is raised again after it
        return None, exc


def caught_error(exc: StepFailed, try_path: str) -> dict[str, Any]:
    """What `{error}` holds in a catch (see the module docstring)."""
    inside = try_path + "."
    step = exc.path[len(inside):] if exc.path.startswith(inside) else exc.path
    return {"type": exc.error.get("type", "failed"), "message": exc.error.get("message", ""), "step": step,
            "path": exc.path, "event": exc.event}


def standing_of(outcome: BaseException | None) -> str:
    if outcome is None:
        return live_run.status()  # ok here; what an enclosing catch or finally says
    if isinstance(outcome, LimitExceeded) or (isinstance(outcome, asyncio.CancelledError)
                                              and live_run.limit_expired()):
        return "limit"
    if isinstance(outcome, ChainBroken):
        return "broken"
    return "failed"


async def run_finally(chain: "ChainRun", node: "GraphNode", final: "GraphNode", scope: Scope, ipath: str,
                      outcome: BaseException | None) -> BaseException | None:
    """Run `finally`; returns its own failure (which replaces the block's outcome), if any."""
    standing = standing_of(outcome)
    token = live_run.STANDING.set(standing)
    try:
        if standing != "limit":
            _, failed = await _attempt(run_branch(chain, node, final, scope, ipath))
            return failed
        live = live_run.current()
        until = live.start_grace() if live is not None else asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout_at(until):
                await _attempt(run_branch(chain, node, final, scope, ipath))
        except TimeoutError:
            chain.run.notify(f"the finally of block {ipath} was stopped: it ran past the grace a finally gets "
                             f"after a limit ({seconds(live_run.FINALLY_GRACE_SECONDS)})")
            return None
        return None  # a failure in it is recorded with its step; the run ends with the limit that stopped it
    finally:
        live_run.STANDING.reset(token)


async def run_branch(chain: "ChainRun", node: "GraphNode", branch: "GraphNode", scope: Scope, ipath: str) -> None:
    """The steps of one branch (`3.try`, `3.case2`), in `scope`."""
    prefix = ipath + branch.path[len(node.path):] if ipath != node.path else ""
    await chain.sequence(branch.children, scope, prefix, branch.path)


__all__ = ["FLOW_KINDS", "caught_error", "run_flow"]
