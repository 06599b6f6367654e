"""The JSON Schema of a `model.ask` answer (LANGUAGE.md §13): what makes one usable, and the
form it is sent, validated and typed in.

Shared by the step (chainlang.stdlib.model: the schema as the run rendered it) and the
checker (chainlang.checks.model_ask: a schema written literally in the chain file), so
both refuse the same schemas with the same words.

- A schema must be a valid draft-07 JSON Schema that chainlang can use safely (no `$ref`
  outside itself, RE2 patterns: chainlang.schemas.safe), and bounded: at most
  `MAX_SCHEMA_CHARS` of JSON and `MAX_SCHEMA_DEPTH` nested mappings and lists, since an
  endpoint compiles it into a grammar and the prompt shows it.
- An object with `properties` that does not say `additionalProperties` is closed
  (`closed`): the answer holds the fields the schema lists and no others, which is what
  the endpoint is asked for, what the answer is validated against and what the checker
  types `{STEP.result.FIELD}` by (a field the schema does not list is an error there).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_SCHEMA_CHARS", "MAX_SCHEMA_DEPTH", "closed", "schema_problems"]

MAX_SCHEMA_CHARS = 10_000  # of the schema's compact JSON text
MAX_SCHEMA_DEPTH = 16  # nested mappings and lists: `{properties: {a: {...}}}` is two per object level

# where subschemas sit whose objects are closed: an `allOf` member (or `if`/`then`/`else`,
# `not`, `dependencies`) is a part of a larger object, and closing it would refuse the rest
_LISTS = ("anyOf", "oneOf")
_MAPS = ("properties", "definitions", "$defs")
# an object that says one of these already decides which other fields it admits
_OPEN_KEYS = frozenset({"additionalProperties", "patternProperties", "allOf", "if", "dependencies", "$ref",
                        "propertyNames", "unevaluatedProperties"})

_TYPE_NAMES = "string, integer, number, boolean, array, object, null"


def schema_problems(schema: Any) -> list[tuple[list[Any], str]]:
    """Why `schema` cannot be a model.ask answer's schema: (where in it, what is wrong),
    the first problem found; empty when it can."""
    if not isinstance(schema, dict):
        return [([], f"a JSON Schema is a mapping, not {_kind(schema)}")]
    try:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        return [([], "it cannot be written as JSON")]
    if len(text) > MAX_SCHEMA_CHARS:
        return [([], f"it is {len(text)} characters of JSON, more than {MAX_SCHEMA_CHARS}: an endpoint compiles "
                     "the schema into a grammar and the prompt shows it; keep it to the fields the chain reads")]
    deep = _too_deep(schema)
    if deep is not None:
        return [(deep, f"it nests more than {MAX_SCHEMA_DEPTH} mappings and lists deep; flatten it")]
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError, best_match

    from chainlang.schemas.safe import schema_problems as unsafe

    try:
        Draft7Validator.check_schema(schema)
    except SchemaError as err:
        error: Any = best_match([err]) if err.context else err  # type: ignore[list-item]
        path = list(error.path)
        message = str(error.message)
        if error.validator in ("anyOf", "oneOf") and path and path[-1] == "type":
            message = f"{error.instance!r} is not a JSON Schema type ({_TYPE_NAMES})"
        return [(path, message)]
    return unsafe(schema)[:1]


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each object that lists `properties` and says nothing of other fields
    closed (`additionalProperties: false`); `schema` itself is not changed."""
    return _close(schema, 0)  # type: ignore[no-any-return]


def _close(node: Any, depth: int) -> Any:
    if not isinstance(node, dict) or depth > MAX_SCHEMA_DEPTH:
        return node
    out = dict(node)
    for key in _MAPS:
        members = node.get(key)
        if isinstance(members, dict):
            out[key] = {name: _close(sub, depth + 1) for name, sub in members.items()}
    for key in _LISTS:
        members = node.get(key)
        if isinstance(members, list):
            out[key] = [_close(sub, depth + 1) for sub in members]
    items = node.get("items")
    if isinstance(items, dict):
        out["items"] = _close(items, depth + 1)
    elif isinstance(items, list):
        out["items"] = [_close(sub, depth + 1) for sub in items]
    if isinstance(node.get("properties"), dict) and not (_OPEN_KEYS & node.keys()):
        out["additionalProperties"] = False
    return out


def _too_deep(schema: Any) -> list[Any] | None:
    """The path to the first container deeper than MAX_SCHEMA_DEPTH, or None."""
    stack: list[tuple[Any, list[Any]]] = [(schema, [])]
    while stack:
        node, path = stack.pop()
        if len(path) >= MAX_SCHEMA_DEPTH:
            return path
        if isinstance(node, dict):
            stack.extend((v, path + [k]) for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, path + [i]) for i, v in enumerate(node) if isinstance(v, (dict, list)))
    return None


def _kind(value: Any) -> str:
    from chainlang.schemas.safe import json_kind

    try:
        return f"{json_kind(value)} {json.dumps(value, default=str)[:60]}"
    except (TypeError, ValueError):
        return type(value).__name__
