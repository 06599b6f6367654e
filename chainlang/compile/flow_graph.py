"""Compiling `try`/`catch`/`finally`, `switch` and `fail` steps into graph nodes.

A try or switch node's children are one `steps` node per branch, whose paths are the
branch's (`3.try`, `3.catch`, `3.finally`; `3.case1`, ..., `3.default`), so everything that
walks a graph's children (threads, ids, `chainlang graph`) sees their steps; `FlowPlan.labels`
says which branch each child is: `try`/`catch`/`finally`, or a case key (None: `default`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from chainlang.model.nodes import FailStep, Step, SwitchStep, TryStep

if TYPE_CHECKING:
    from chainlang.compile.graph import CompiledValue, GraphNode


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """How a try, switch or fail node runs: its children's labels and its compiled value."""
    labels: tuple[str | None, ...] = ()  # per child: try/catch/finally, a case key, None for default
    value: "CompiledValue | None" = None  # the switch value, or the fail message


def flow_node(step: TryStep | SwitchStep | FailStep, common: dict[str, Any],
              compile_step: Callable[[Step], "GraphNode"]) -> "GraphNode":
    from chainlang.compile.graph import GraphNode, _condition, _value

    guard: dict[str, Any] = {"condition_text": step.if_.text if step.if_ else None, "condition": _condition(step.if_)}
    if isinstance(step, FailStep):
        message = _value(step.message) if step.message is not None else None
        return GraphNode(kind="fail", flow=FlowPlan((), message), **guard, **common)

    def branch(label: str, steps: list[Step]) -> GraphNode:
        return GraphNode(path=f"{step.path}.{label}", kind="steps", line=step.node.line,
                         children=tuple(compile_step(child) for child in steps))

    if isinstance(step, TryStep):
        branches = step.branches()
        return GraphNode(kind="try", flow=FlowPlan(tuple(label for label, _ in branches)),
                         children=tuple(branch(label, steps) for label, steps in branches), **guard, **common)
    keys: list[str | None] = [case.key for case in step.cases]
    if step.default is not None:
        keys.append(None)
    value = _value(step.value) if step.value is not None else None
    return GraphNode(kind="switch", flow=FlowPlan(tuple(keys), value),
                     children=tuple(branch(label, steps) for label, steps in step.branches()), **guard, **common)
