"""CL033: input and payload schemas must be valid JSON Schemas (draft-07), and defaults must fit them."""

from __future__ import annotations

from typing import Any

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext

RULES = (rules.BAD_SCHEMA,)


def check(ctx: CheckContext) -> None:
    if not ctx.chain.inputs and not ctx.chain.events:
        return
    from chainlang.load.loader import node_at
    from chainlang.schemas.cache import entry
    from chainlang.schemas.meta import plainly_valid, schema_problems

    def valid(schema: Any, node: Any, fallback: Any, what: str) -> bool:
        if plainly_valid(schema) and not schema_problems(schema):
            return True  # the meta-schema accepts it for sure: no need to import jsonschema (~0.15 s cold)
        from jsonschema import Draft7Validator
        from jsonschema.exceptions import SchemaError, best_match

        try:
            Draft7Validator.check_schema(schema)
            for path, problem in schema_problems(schema):
                where = node_at(node, path) if node is not None else None
                ctx.report(rules.BAD_SCHEMA, f"{what} cannot be used: {problem}", where or fallback)
                return False
        except SchemaError as err:
            error: Any = best_match([err]) if err.context else err  # type: ignore[list-item]
            path = list(error.path)
            key = "/".join(str(p) for p in path)
            where = node_at(node, path) if node is not None else None
            message = error.message
            if error.validator in ("anyOf", "oneOf") and path and path[-1] == "type":
                message = f"{error.instance!r} is not a JSON Schema type (string, integer, number, boolean, array, object, null)"
            ctx.report(rules.BAD_SCHEMA, f"{what} is not a valid JSON Schema: {message}" + (f" (at {key})" if key else ""),
                       where or fallback)
            return False
        return True

    for spec in ctx.chain.inputs.values():
        if valid(spec.schema, spec.schema_node, spec.node, f"the schema of input '{spec.name}'") and "default" in spec.schema:
            fast = entry(spec.schema).fast  # exact when it says valid; otherwise jsonschema gives the message
            if fast is not None and fast(spec.schema["default"]):
                continue
            from chainlang.schemas.safe import iter_errors

            errors = iter_errors(entry(spec.schema).validator, spec.schema["default"])
            if errors:
                default = node_at(spec.schema_node, ["default"]) if spec.schema_node is not None else None
                ctx.report(rules.BAD_SCHEMA, f"the default of input '{spec.name}' does not fit its schema: {errors[0].message}",
                           default or spec.node)
    for decl in ctx.chain.events.values():
        valid(decl.payload, decl.payload_node, decl.node, f"the payload schema of {decl.name}")
