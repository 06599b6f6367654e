"""Checked chain → frozen execution graph, with every expression compiled once.

The graph is what the interpreter walks and what `chainlang graph` prints. Each
node keeps its stable step path (`3`, `3.1`, `2.then.1`), its options, and the
compiled closures of its condition, loop and params, so a run never parses or
dispatches on an AST.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from chainlang.compile.firing_order import Orderable, firing_order
from chainlang.compile.hook_summary import HookSummary, hook_summaries
from chainlang.expr.ast import Ref
from chainlang.model.bindings import ChainBindings
from chainlang.compile.loops import repeat_node
from chainlang.compile.flow_graph import flow_node
from chainlang.model.nodes import FailStep, SwitchStep, TryStep, WaitStep
from chainlang.compile.wait_graph import ASK_EVENT, ask_plan, wait_plan
from chainlang.model.build_loops import RepeatStep
from chainlang.model.nodes import BlockStep, Chain, Condition, EventStep, Retry, Step, Value

Resolve = Callable[[Ref], Any]
Compiled = Callable[[Resolve], Any]
NodeKind = Literal["event", "steps", "parallel", "if", "repeat", "try", "switch", "fail", "wait"]


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
        data = copy_json(self.data)
        for path, fn in self.templates:
            data = _assign(data, path, fn(resolve))
        return data


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One step of a compiled chain, as the engines walk it: its kind, expressions compiled, params ready to render."""
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
    # the `decide` text when it is an expression over names the chain knows (judged without a
    # model); None for a natural-language condition
    decide_expr: Compiled | None = None
    expose: tuple[str, ...] = ()  # the secrets it may send to a model or user.notify (§16)
    params: dict[str, CompiledValue] = field(default_factory=dict)
    # a task.register / task.schedule step: the references of its action to this chain's
    # results, read when the step runs and stored with the task (reference text, binding, ref)
    captures: tuple[tuple[str, Any, Ref], ...] = ()
    children: tuple["GraphNode", ...] = ()  # steps / parallel branches / then
    repeat: Any = None  # a repeat's until, max, delay, state and next (compile.loops.RepeatPlan)
    flow: Any = None  # a try/switch's branch labels, a switch value or fail message (compile.flow_graph.FlowPlan)
    wait: Any = None  # a wait's (or user.ask's) event, where, timeout (compile.wait_graph.WaitPlan)
    else_: tuple["GraphNode", ...] = ()

    @property
    def plain(self) -> bool:
        """An event step with no `if`, no `foreach` and `on_error: fail`: nothing to do around it."""
        return self.kind == "event" and self.condition is None and self.foreach is None and self.on_error == "fail"


@dataclass(frozen=True, slots=True)
class ExecutionGraph:
    """A chain compiled for running: its nodes, outputs, inputs' schemas, limits and hooks."""
    file: str
    name: str | None
    nodes: tuple[GraphNode, ...]
    outputs: dict[str, CompiledValue]
    inputs: dict[str, Any]  # input name → its JSON Schema
    max_steps: int
    max_depth: int
    timeout: float | None
    max_parallel: int
    allow: tuple[str, ...] | None
    hooks: tuple[str, ...]  # the chain's own hook labels in firing order (compile.firing_order)
    # the same hooks as `chainlang graph` draws them (compile/hook_summary.py)
    hook_summaries: tuple[HookSummary, ...] = ()
    # what each reference names, from the checker's analysis: the runtime binds nothing itself
    bindings: ChainBindings = field(default_factory=ChainBindings, repr=False)
    # the hooks in force while it runs, compiled (chainlang.compile.hooks.HookSet): for the chain a
    # run starts, its own and the project's; for a sub-chain, its own (added to its caller's)
    hook_set: Any = field(default=None, repr=False)
    # budgets (limits.max_model_calls, limits.max_tokens): None is unbounded
    max_model_calls: int | None = None
    max_tokens: int | None = None


def compile_chain(chain: Chain) -> ExecutionGraph:
    """Compile a chain that checked without errors (the caller makes sure of that). The
    checker's analysis bound its references (`chain.bindings`); the graph carries them,
    with the `decide` texts it found to be expressions compiled."""
    if chain.bindings is None:
        raise ValueError(f"{chain.file}: compile_chain needs a checked chain (its references are bound by the checks)")
    limits = chain.limits
    decide = chain.bindings.decide
    captures = _captures(chain)
    return ExecutionGraph(
        file=chain.file,
        name=chain.name,
        nodes=tuple(_node(step, decide, captures, chain.bindings) for step in chain.steps),
        outputs={name: _value(value) for name, value in chain.outputs.items()},
        inputs={name: inp.schema for name, inp in chain.inputs.items()},
        max_steps=limits.max_steps,
        max_depth=limits.max_depth,
        timeout=limits.timeout,
        max_parallel=limits.max_parallel,
        allow=tuple(p for p, _ in chain.allow) if chain.allow is not None else None,
        hooks=tuple(hook_order(chain)),
        hook_summaries=hook_summaries(chain),
        bindings=chain.bindings,
        max_model_calls=limits.max_model_calls,
        max_tokens=limits.max_tokens,
    )


def hook_order(chain: Chain) -> list[str]:
    """The labels of the chain's hooks in firing order (`firing_order`, as at run time)."""
    hooks = chain.hooks
    order = firing_order([Orderable(h.id, h.priority, [name for name, _ in h.after]) for h in hooks])
    return [hooks[i].label for i in order]


def _captures(chain: Chain) -> dict[str, tuple[tuple[str, Any, Ref], ...]]:
    """For each step that registers or schedules an action: what the action captures."""
    out: dict[str, dict[str, tuple[str, Any, Ref]]] = {}
    for hook in chain.hooks:
        if hook.origin is None or hook.bindings is None:
            continue
        found = out.setdefault(hook.origin, {})
        for ref in hook.bindings.keep:
            binding = hook.bindings.refs.get(id(ref)) if isinstance(ref, Ref) else None
            if binding is not None and binding.captured:
                found.setdefault(ref.dotted(), (ref.dotted(), binding, ref))
    return {origin: tuple(found.values()) for origin, found in out.items() if found}


def _node(step: Step, decide: dict[int, Any], captures: dict[str, Any] | None = None,
          bindings: Any = None) -> GraphNode:
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
    if isinstance(step, WaitStep):  # compile/wait_graph.py
        return GraphNode(kind="wait", event=step.event, condition_text=step.if_.text if step.if_ else None,
                         condition=_condition(step.if_), wait=wait_plan(step, bindings or ChainBindings()), **common)
    if isinstance(step, EventStep) and step.event == ASK_EVENT and step.foreach is None:
        return GraphNode(kind="wait", event=step.event, condition_text=step.if_.text if step.if_ else None,
                         condition=_condition(step.if_),
                         wait=ask_plan(step, {name: _value(value) for name, value in step.params.items()}), **common)
    if isinstance(step, EventStep):
        return GraphNode(
            kind="event", event=step.event, retry=step.retry, decide=step.decide,
            decide_expr=_decide_expression(decide.get(id(step))), expose=tuple(name for name, _ in step.expose),
            condition_text=step.if_.text if step.if_ else None, condition=_condition(step.if_),
            params={name: _value(value) for name, value in step.params.items()},
            captures=(captures or {}).get(step.path, ()), **common,
        )
    if isinstance(step, (TryStep, SwitchStep, FailStep)):  # compile/flow_graph.py
        return flow_node(step, common, lambda child: _node(child, decide, captures, bindings))
    if isinstance(step, RepeatStep):  # compile/loops.py
        return repeat_node(step, common, tuple(_node(child, decide, captures, bindings) for child in step.steps))
    if isinstance(step, BlockStep):
        return GraphNode(
            kind="parallel" if step.parallel else "steps",
            condition_text=step.if_.text if step.if_ else None, condition=_condition(step.if_),
            children=tuple(_node(child, decide, captures, bindings) for child in step.steps), **common,
        )
    return GraphNode(
        kind="if", condition_text=step.condition.text if step.condition else None,
        condition=_condition(step.condition),
        children=tuple(_node(child, decide, captures, bindings) for child in step.then),
        else_=tuple(_node(child, decide, captures, bindings) for child in step.else_), **common,
    )


def _decide_expression(expr: Any) -> Compiled | None:
    """The compiled `decide` text, when the checker found it to be an expression over names
    the chain knows; None for natural language ("the user is busy")."""
    if expr is None:
        return None
    from chainlang.expr.evaluate import compile_expression  # the module: no trip through the package

    fn: Compiled = compile_expression(expr)
    return fn


def _condition(cond: Condition | None) -> Compiled | None:
    if cond is None or cond.expr is None:
        return None
    return _expression(cond.expr)


def _expression(expr: Any) -> Compiled:
    """Compile an expression once: parsed expressions are shared by text (a thousand hooks
    with the same condition compile it once), and a compiled one depends on no place."""
    from chainlang.expr.evaluate import compile_expression  # the module: no trip through the package

    return _once(_EXPRESSIONS, expr, compile_expression)


def _value(value: Value) -> CompiledValue:
    if value.deferred:  # a chain passed as data: its templates are rendered when it runs, not now
        return CompiledValue(value.data, ())
    return CompiledValue(value.data, tuple((tv.path[1:] if tv.path else tv.path, _template(tv.template))
                                           for tv in value.templates))


def _template(template: Any) -> Compiled:
    """Compile a template once: parsed templates are shared by text, and a compiled one
    does not depend on where it is used (references are resolved by the run's scope)."""
    from chainlang.expr.template import compile_template  # the module: no trip through the package

    return _once(_TEMPLATES, template, compile_template)


# compiled expressions and templates by id() of the parsed one; each entry keeps that alive,
# so its id stays its own (bounded: cleared when full)
_EXPRESSIONS: dict[int, tuple[Any, Compiled]] = {}
_TEMPLATES: dict[int, tuple[Any, Compiled]] = {}


def _once(cache: dict[int, tuple[Any, Compiled]], parsed: Any, compile_fn: Callable[[Any], Any]) -> Compiled:
    entry = cache.get(id(parsed))
    if entry is None or entry[0] is not parsed:
        if len(cache) > 16384:
            cache.clear()
        entry = cache[id(parsed)] = (parsed, compile_fn(parsed))
    return entry[1]


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_json(data: Any) -> Any:
    """A deep copy of JSON data (dicts and lists are copied, scalars shared)."""
    if isinstance(data, dict):
        scalars = _SCALARS  # no call per scalar value: params are mostly flat
        return {k: v if type(v) in scalars else copy_json(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):  # a tuple (a tool's result) becomes a list, as in JSON
        return [copy_json(v) for v in data]
    return data


def _assign(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data
