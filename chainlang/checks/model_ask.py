"""`model.ask` (LANGUAGE.md §13): its result is typed by the step's own `schema`, and a schema
written in the chain file must be one the step can use (CL033 bad-schema).

- `result_type`: without `schema`, the answer is text; with a schema written as a mapping
  in the file, the type of the values it admits, objects closed as the step closes them
  (chainlang.llm.ask_schema.closed), so `{STEP.result.FIELD}` for a field the schema does
  not list is an unknown-field error like any event's; a schema that comes from a
  reference is only known at run time: any.
- `check`: a literal schema that is not a valid draft-07 JSON Schema, or that chainlang
  cannot use (a `$ref` outside it, a pattern that is not RE2, over the size or depth
  bounds), is reported where it is written, with the words the step would fail with.
"""

from __future__ import annotations

from typing import Any

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.expr import types as T
from chainlang.model.nodes import EventStep, walk_steps

RULES = (rules.BAD_SCHEMA,)

EVENT = "model.ask"


def result_type(step: EventStep) -> Any:
    """The type of `{STEP.result}` for a model.ask step (a list of them under `foreach`)."""
    value = step.params.get("schema")
    if value is None:
        base: Any = T.STRING
    elif value.literal and not value.broken and isinstance(value.data, dict):
        from chainlang.llm.ask_schema import closed

        base = T.type_from_schema(closed(value.data))
    else:
        base = T.ANY
    return T.Array(base) if step.foreach is not None else base


def check(ctx: CheckContext) -> None:
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    for step in steps:
        if not isinstance(step, EventStep) or step.event != EVENT or step.params_broken:
            continue
        value = step.params.get("schema")
        if value is None or not value.literal or value.broken or not isinstance(value.data, dict):
            continue  # a reference: checked when the step runs; not a mapping: the params check says so
        from chainlang.llm.ask_schema import schema_problems
        from chainlang.load.loader import node_at
        from chainlang.schemas.cache import location

        for path, problem in schema_problems(value.data):
            where = node_at(value.node, path) if value.node is not None else None
            at = f" (at {location(path)})" if path else ""
            ctx.report(rules.BAD_SCHEMA, f"the schema of {EVENT} is not a usable JSON Schema: {problem}{at}",
                       where or step.event_node or step.node)
