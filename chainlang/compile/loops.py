"""A `repeat` step compiled (LANGUAGE.md §2): its `until`, `max`, `delay`, `state` and `next`,
carried by its graph node (`GraphNode.repeat`); the body is the node's `children`. The
walker runs it with chainlang.runtime.loops."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from chainlang.compile.graph import CompiledValue, GraphNode
    from chainlang.model.build_loops import RepeatStep

__all__ = ["RepeatPlan", "repeat_node"]


@dataclass(frozen=True, slots=True)
class RepeatPlan:
    """How a `repeat` node runs: its bound, `until`, delay, and the state it carries between rounds."""
    max: int
    until: Callable[[Any], Any] | None = None
    until_text: str | None = None
    delay: float | None = None
    state: dict[str, "CompiledValue"] = field(default_factory=dict)
    next: dict[str, "CompiledValue"] = field(default_factory=dict)


def repeat_node(step: "RepeatStep", common: dict[str, Any], children: tuple["GraphNode", ...]) -> "GraphNode":
    from chainlang.compile.graph import GraphNode, _condition, _value

    plan = RepeatPlan(
        max=step.max or 1, until=_condition(step.until), until_text=step.until.text if step.until else None,
        delay=step.delay, state={name: _value(v) for name, v in step.state.items()},
        next={name: _value(v) for name, v in step.next.items()},
    )
    return GraphNode(kind="repeat", condition_text=step.if_.text if step.if_ else None,
                     condition=_condition(step.if_), children=children, repeat=plan, **common)
