"""CL033: input and payload schemas must be valid JSON Schemas (draft-07), and defaults must fit them."""

from __future__ import annotations

from typing import Any

from chainlang import rules
from chainlang.checks.base import CheckContext

RULES = (rules.BAD_SCHEMA,)


def check(ctx: CheckContext) -> None:
    if not ctx.chain.inputs and not ctx.chain.events:
        return
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    def valid(schema: Any, where: Any, what: str) -> bool:
        try:
            Draft7Validator.check_schema(schema)
        except SchemaError as err:
            path = "/".join(str(p) for p in err.path)
            ctx.report(rules.BAD_SCHEMA, f"{what} is not a valid JSON Schema: {err.message}" + (f" (at {path})" if path else ""), where)
            return False
        return True

    for spec in ctx.chain.inputs.values():
        where = spec.schema_node or spec.node
        if valid(spec.schema, where, f"the schema of input '{spec.name}'") and "default" in spec.schema:
            errors = list(Draft7Validator(spec.schema).iter_errors(spec.schema["default"]))
            if errors:
                ctx.report(rules.BAD_SCHEMA, f"the default of input '{spec.name}' does not fit its schema: {errors[0].message}", where)
    for decl in ctx.chain.events.values():
        valid(decl.payload, decl.node, f"the payload schema of {decl.name}")
