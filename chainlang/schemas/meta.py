"""Is a schema valid draft-07, answered without jsonschema for the plain schemas people write.

`chainlang check` validates every input and payload schema against the draft-07
meta-schema (CL033). jsonschema costs ~0.1-0.2 s to import on a cold start, more than
the rest of checking a small chain, while most schemas are a handful of plain keywords
(`type: string`, `default: team`, `properties`, `required`...). `plainly_valid` says True
only for schemas built from such keywords with values the meta-schema accepts, so a True
is always the meta-schema's answer; anything else (an unknown keyword, `$ref`, `pattern`,
a value of the wrong shape, a boolean schema, deep nesting) gives False and the caller asks
jsonschema, whose messages are the ones reported. `schema_problems` (what chainlang refuses
beyond draft-07 validity) needs no jsonschema either.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plainly_valid", "schema_problems"]

_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_TEXT = frozenset({"$comment", "title", "description", "format", "contentMediaType", "contentEncoding"})
_ANY = frozenset({"default", "const"})
_FLAG = frozenset({"readOnly", "writeOnly", "uniqueItems"})
_NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_SUBSCHEMA = frozenset({"items", "additionalItems", "additionalProperties", "contains", "propertyNames", "not",
                        "if", "then", "else"})
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf"})
_SCHEMA_MAP = frozenset({"properties", "definitions"})
MAX_DEPTH = 16  # deeper schemas go to jsonschema (rare, and it bounds this recursion)


def plainly_valid(schema: Any) -> bool:
    """True only when `schema` is an object schema of plain keywords that the draft-07
    meta-schema accepts; False means "ask jsonschema", not "invalid"."""
    return isinstance(schema, dict) and _object_schema(schema, 0)


def _schema(value: Any, depth: int) -> bool:
    if isinstance(value, bool):
        return True  # true and false are schemas
    return isinstance(value, dict) and _object_schema(value, depth)


def _object_schema(schema: dict[Any, Any], depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    for key, value in schema.items():
        if key == "type":
            if isinstance(value, str):
                if value not in _TYPES:
                    return False
            elif not (isinstance(value, list) and value and all(isinstance(t, str) and t in _TYPES for t in value)
                      and len(set(value)) == len(value)):
                return False
        elif key in _TEXT:
            if not isinstance(value, str):
                return False
        elif key in _ANY:
            pass
        elif key in _FLAG:
            if not isinstance(value, bool):
                return False
        elif key in _NUMBER:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
        elif key in _COUNT:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return False
        elif key in ("enum", "examples"):
            if not isinstance(value, list):
                return False
        elif key == "required":
            if not (isinstance(value, list) and all(isinstance(name, str) for name in value)
                    and len(set(value)) == len(value)):
                return False
        elif key in _SUBSCHEMA:
            if key == "items" and isinstance(value, list):
                if not (value and all(_schema(item, depth + 1) for item in value)):  # a schemaArray: minItems 1
                    return False
            elif not _schema(value, depth + 1):
                return False
        elif key in _SCHEMA_LIST:
            if not (isinstance(value, list) and value and all(_schema(item, depth + 1) for item in value)):
                return False
        elif key in _SCHEMA_MAP:
            if not (isinstance(value, dict) and all(_schema(item, depth + 1) for item in value.values())):
                return False
        else:  # $ref, $id, $schema, pattern, patternProperties (formats checked), dependencies, anything unknown
            return False
    return True


def schema_problems(schema: Any) -> list[tuple[list[Any], str]]:
    """What makes a schema unusable here beyond draft-07 validity: (path, problem)."""
    problems: list[tuple[list[Any], str]] = []
    stack: list[tuple[list[Any], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                problems.append((path + ["$ref"], f"'$ref' must point inside the schema ('#/...'); "
                                 f"'{ref[:80]}' would be fetched, which chainlang never does"))
            pattern = node.get("pattern")
            if isinstance(pattern, str) and _compile(pattern)[0] is None:
                problems.append((path + ["pattern"], f"{_compile(pattern)[1]} (patterns use RE2 syntax)"))
            props = node.get("patternProperties")
            if isinstance(props, dict):
                for key in props:
                    if _compile(key)[0] is None:
                        problems.append((path + ["patternProperties", key], f"{_compile(key)[1]} (patterns use RE2 syntax)"))
            stack.extend((path + [k], v) for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((path + [i], v) for i, v in enumerate(node) if isinstance(v, (dict, list)))
    return sorted(problems, key=lambda item: [str(p) for p in item[0]])


def _compile(pattern: str) -> tuple[Any, str | None]:
    from chainlang.expr.evaluate import compile_regex

    return compile_regex(pattern)
