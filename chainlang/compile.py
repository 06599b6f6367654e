"""Checked chain → frozen execution graph, with every expression compiled once.

The graph is what the interpreter walks and what `chainlang graph` prints. Each
node keeps its stable step path (`3`, `3.1`, `2.then.1`), its options, and the
compiled closures of its condition, loop and params, so a run never parses or
dispatches on an AST.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from chainlang.expr.ast import Ref
from chainlang.model.nodes import BlockStep, Chain, Condition, EventStep, IfStep, Retry, Step, Value

Resolve = Callable[[Ref], Any]
Compiled = Callable[[Resolve], Any]
NodeKind = Literal["event", "steps", "parallel", "if"]


@dataclass(frozen=True, slots=True)
class CompiledValue:
    """A params/outputs value: literal data with compiled templates at known paths."""

    data: Any
    templates: tuple[tuple[tuple[str | int, ...], Compiled], ...]

    def render(self, resolve: Resolve) -> Any:
        if not self.templates:
            return self.data
        if len(self.templates) == 1 and self.templates[0][0] == ():
            return self.templates[0][1](resolve)
        data = _copy(self.data)
        for path, fn in self.templates:
            data = _assign(data, path, fn(resolve))
        return data


@dataclass(frozen=True, slots=True)
class GraphNode:
    path: str
    kind: NodeKind
    line: int
    event: str | None = None
    id: str | None = None
    condition_text: str | None = None  # `if` (or the if-block's condition), as written
    condition: Compiled | None = None
    foreach_text: str | None = None
    foreach: Compiled | None = None
    as_: str = "item"
    max_parallel: int | None = None
    timeout: float | None = None
    on_error: str = "fail"
    retry: Retry | None = None
    decide: str | None = None
    params: dict[str, CompiledValue] = field(default_factory=dict)
    children: tuple["GraphNode", ...] = ()  # steps / parallel branches / then
    else_: tuple["GraphNode", ...] = ()


@dataclass(frozen=True, slots=True)
class ExecutionGraph:
    file: str
    name: str | None
    nodes: tuple[GraphNode, ...]
    outputs: dict[str, CompiledValue]
    max_steps: int
    max_depth: int
    timeout: float | None
    max_parallel: int
    allow: tuple[str, ...] | None
    hooks: tuple[str, ...]  # hook labels in firing order (priority, then `after`, then file order)


def compile_chain(chain: Chain) -> ExecutionGraph:
    """Compile a chain that checked without errors (the caller makes sure of that)."""
    limits = chain.limits
    return ExecutionGraph(
        file=chain.file,
        name=chain.name,
        nodes=tuple(_node(step) for step in chain.steps),
        outputs={name: _value(value) for name, value in chain.outputs.items()},
        max_steps=limits.max_steps,
        max_depth=limits.max_depth,
        timeout=limits.timeout,
        max_parallel=limits.max_parallel,
        allow=tuple(p for p, _ in chain.allow) if chain.allow is not None else None,
        hooks=tuple(hook_order(chain)),
    )


def hook_order(chain: Chain) -> list[str]:
    """Priority (higher first), then `after` dependencies (topological), ties in file order."""
    from graphlib import TopologicalSorter

    hooks = sorted(chain.hooks, key=lambda h: (-h.priority, h.index))
    rank = {h.label: i for i, h in enumerate(hooks)}
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for hook in hooks:
        sorter.add(hook.label, *(name for name, _ in hook.after if name in rank))
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=rank.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return order


def _node(step: Step) -> GraphNode:
    common: dict[str, Any] = {
        "path": step.path,
        "line": step.node.line,
        "id": step.id,
        "foreach_text": step.foreach.text if step.foreach else None,
        "foreach": _condition(step.foreach),
        "as_": step.as_,
        "max_parallel": step.max_parallel,
        "timeout": step.timeout,
        "on_error": step.on_error,
    }
    if isinstance(step, EventStep):
        return GraphNode(
            kind="event", event=step.event, retry=step.retry, decide=step.decide,
            condition_text=step.if_.text if step.if_ else None, condition=_condition(step.if_),
            params={name: _value(value) for name, value in step.params.items()}, **common,
        )
    if isinstance(step, BlockStep):
        return GraphNode(
            kind="parallel" if step.parallel else "steps",
            condition_text=step.if_.text if step.if_ else None, condition=_condition(step.if_),
            children=tuple(_node(child) for child in step.steps), **common,
        )
    return GraphNode(
        kind="if", condition_text=step.condition.text if step.condition else None,
        condition=_condition(step.condition),
        children=tuple(_node(child) for child in step.then),
        else_=tuple(_node(child) for child in step.else_), **common,
    )


def _condition(cond: Condition | None) -> Compiled | None:
    if cond is None or cond.expr is None:
        return None
    from chainlang.expr import compile_expression

    fn: Compiled = compile_expression(cond.expr)
    return fn


def _value(value: Value) -> CompiledValue:
    from chainlang.expr import compile_template

    if value.deferred:  # a chain passed as data: its templates are rendered when it runs, not now
        return CompiledValue(value.data, ())
    return CompiledValue(value.data, tuple((tv.path[1:] if tv.path else tv.path, compile_template(tv.template))
                                           for tv in value.templates))


def _copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data


def _assign(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data
