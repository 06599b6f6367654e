"""Chains passed as data to events, expanded so that they are checked as what they are.

`task.register` stores a hook (trigger, condition, action) and `task.schedule` a chain to
run later. The standard declarations mark those params with `x-chainlang` (`steps`,
`trigger`, `condition`). Before the checks run, each such call becomes a hook of the
file: kind "registered" (every hook check applies: trigger, payload names, recursion) or
"scheduled" (its own scope, no payload). The param's value is marked deferred, so the
calling chain neither resolves its templates nor, at run time, renders them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.diagnostics import DiagnosticSink
from chainlang.load.loader import MapNode, ScalarNode, SeqNode, to_data
from chainlang.model.build import ModelBuilder
from chainlang.model.nodes import Chain, EventStep, Hook, walk_steps
from chainlang.load.source import SourceFile

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry


def _marked(schema: dict[str, Any], mark: str) -> list[str]:
    props = schema.get("properties") or {}
    return [name for name, sub in props.items() if isinstance(sub, dict) and sub.get("x-chainlang") == mark]


def expand_nested_chains(chain: Chain, source: SourceFile, sink: DiagnosticSink, registry: "Registry") -> None:
    builder = ModelBuilder(source, sink)
    steps = [s for s in walk_steps(chain.steps) if isinstance(s, EventStep) and s.event and s.params_node is not None]
    for step in steps:
        spec = registry.get(step.event)
        if spec is None:
            continue
        schema = spec.params_schema or {}
        for name in _marked(schema, "steps"):
            value = step.params.get(name)
            if value is None or not isinstance(value.node, SeqNode):
                continue
            value.deferred = True
            # the action as written, braces escaped as written: it is stored and parsed again
            # when it runs (the data of a value has `{{` already unescaped to `{`, which would
            # then be read as an expression)
            value.data = to_data(value.node)
            trigger_names = _marked(schema, "trigger")
            assert step.params_node is not None  # selected above
            hook = Hook(node=step.params_node, index=len(chain.hooks), kind="registered" if trigger_names else "scheduled",
                        origin=step.path)
            hook.action = builder.steps(value.node, f"{step.path}.{name}.")
            hook.action_node = value.node
            for trig in trigger_names:
                node = step.params_node.get(trig) if isinstance(step.params_node, MapNode) else None
                if isinstance(node, ScalarNode) and isinstance(node.value, str):
                    hook.trigger = builder.trigger(node, node.value)
            for cond in _marked(schema, "condition"):
                node = step.params_node.get(cond) if isinstance(step.params_node, MapNode) else None
                if node is not None:
                    hook.condition = builder.condition(node, f"'{cond}'")
                    if cond in step.params:
                        step.params[cond].deferred = True  # an expression over the payload, not a template
                        step.params[cond].data = to_data(node)
            depth = step.params.get("max_depth")
            if depth is not None and isinstance(depth.data, int) and not isinstance(depth.data, bool):
                hook.max_depth = depth.data
            chain.hooks.append(hook)
