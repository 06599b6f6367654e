"""Running a `repeat` (LANGUAGE.md §2), for the walker (chainlang.runtime.walk) on both engines.

- Pass P of the repeat at instance path `3` runs its body's steps as `3#P.1`, `3#P.2`...
  (as a foreach item's run as `3[0].1`), each in a fresh child scope of the block's: a
  reference to a body step reads the current pass. The last pass's records are merged
  into the block's scope, so after the loop the body's steps read as the last pass.
- `state` is rendered once before the first pass; `{loop.pass}` and `{loop.NAME}` read the
  scope's loop value `{pass, **state}`. After each pass `next` is rendered in the pass's
  scope (it sees the pass's steps and the state the pass ran with), then `until` is
  evaluated with the new state. The block's result is `{state, passes}`.
- Without `until` the body runs `max` times. With one that is still false after `max`
  passes, the step fails with error type `limit`.
- `delay` is a durable timer between passes. On Temporal `asyncio.sleep` in the workflow
  is a timer in the workflow's history. On the embedded engine its start is recorded (a
  `clock` record with the pass's path, `3#2`), so a resumed run waits only what is left
  of it (runtime/durable_wait.py, as `retry`'s waits), and not at all once the pass after
  it started.
- On resume the walker goes through the passes again; the steps that finished are
  replayed from the transcript, so `next` and `until` give the same answers and the run
  continues at the pass and step where it stopped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import truthy
from chainlang.journal.records import Clock
from chainlang.model.build_loops import LOOP, PASS
from chainlang.runtime.durable_wait import wait_left
from chainlang.runtime.outcomes import StepFailed, error_of, short
from chainlang.runtime.threads import reading  # thread[EXPR] on Temporal: fetched, then evaluated
from chainlang.status import LIMIT

if TYPE_CHECKING:
    from chainlang.compile import GraphNode
    from chainlang.compile.loops import RepeatPlan
    from chainlang.runtime.replay import Replay
    from chainlang.runtime.scope import Scope
    from chainlang.runtime.state import RunState
    from chainlang.runtime.walk import ChainRun

__all__ = ["run_repeat"]


async def run_repeat(chain: "ChainRun", node: "GraphNode", scope: "Scope", ipath: str) -> dict[str, Any]:
    """Run the passes of the repeat `node` at instance path `ipath`; its result `{state, passes}`."""
    plan: RepeatPlan = node.repeat
    state = {name: await _render(node, value, scope, ipath, f"state {name}") for name, value in plan.state.items()}
    last: Scope | None = None
    try:
        for number in range(1, plan.max + 1):
            here = f"{ipath}#{number}"
            if number > 1 and plan.delay:
                await durable_delay(chain.run, here, plan.delay)
            current = scope.child(LOOP, {PASS: number, **state})
            last = current
            await chain.sequence(node.children, current, here, node.path)
            if plan.next:
                state = {**state, **{name: await _render(node, value, current, ipath, f"next {name}")
                                     for name, value in plan.next.items()}}
                current.loop_value = {PASS: number, **state}  # until reads the new state
            if plan.until is not None and await _until(node, plan, current, ipath):
                return {"state": state, "passes": number}
    finally:
        if last is not None:  # after the loop (or its failure), the body's steps read as the last pass
            scope.merge(last)
    if plan.until is None:
        return {"state": state, "passes": plan.max}
    raise StepFailed(ipath, None, error_of(
        LIMIT, f"repeat {ipath} (line {node.line}): until `{short(plan.until_text or '', 80)}` was still false "
               f"after max = {plan.max} pass{'es' if plan.max != 1 else ''}"))


async def _render(node: "GraphNode", value: Any, scope: "Scope", ipath: str, what: str) -> Any:
    try:
        return await reading(lambda: value.render(scope))
    except ExprEvalError as exc:
        raise StepFailed(ipath, None, error_of(
            "expression", f"repeat {ipath} (line {node.line}), {what}: {exc.message}")) from None


async def _until(node: "GraphNode", plan: "RepeatPlan", scope: "Scope", ipath: str) -> bool:
    until = plan.until
    assert until is not None
    try:
        return truthy(await reading(lambda: until(scope)))
    except ExprEvalError as exc:
        raise StepFailed(ipath, None, error_of(
            "expression", f"until `{short(plan.until_text or '', 80)}` (line {node.line}): {exc.message}")) from None


async def durable_delay(run: "RunState", here: str, wait: float) -> None:
    """Wait `wait` seconds before the pass at `here` (`3#2`), as a timer that survives a resume."""
    replay = run.replay
    if replay is not None:
        if here in _passes_started(replay):
            return  # served before the run stopped: the pass after it had begun
        began = replay.clock_at.get(here)
        if began is not None:  # it was being served when the run stopped: wait what is left
            await wait_left(wait, began)
            return
    # the run's clock (Temporal's in a workflow, the same on every replay); the journal's
    # `ts` of this record is when the wait began, which a resume reads
    run.record(Clock(run.clock.now().isoformat(), here))
    await asyncio.sleep(wait)


# the passes whose steps an earlier attempt of the run started (`3#2`, `3[0]#1`...), by id() of
# the replay; each entry keeps its replay alive, so the id stays its own (a few runs at a time)
_STARTED: dict[int, tuple["Replay", set[str]]] = {}


def _passes_started(replay: "Replay") -> set[str]:
    entry = _STARTED.get(id(replay))
    if entry is None or entry[0] is not replay:
        if len(_STARTED) > 16:
            _STARTED.clear()
        found: set[str] = set()
        for path in replay.started:
            at = path.find("#")
            while at != -1:  # every enclosing pass of the path: 3#2.1#4.1 → 3#2, 3#2.1#4
                end = at + 1
                while end < len(path) and path[end].isdigit():
                    end += 1
                found.add(path[:end])
                at = path.find("#", end)
        entry = _STARTED[id(replay)] = (replay, found)
    return entry[1]
