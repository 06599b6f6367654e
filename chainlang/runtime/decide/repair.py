"""The embedded decider's repairs (`repair_params`): invalid params made valid the obvious
way, where the schema says so. Nothing is guessed."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from chainlang.runtime.decide.decision import show_value
from chainlang.schemas.cache import location
from chainlang.schemas.safe import json_kind

__all__ = ["repair_params"]

_MAX_DEPTH = 64  # how deep params are repaired


def repair_params(schema: dict[str, Any], params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The embedded decider's obvious repairs, and one note per repair; `params` is not changed.

    Where the schema says so: missing properties get their `default`; a string of an
    integer or number becomes that number, `"true"`/`"false"` a boolean; a number
    becomes text; a scalar becomes a one-item list; unknown properties are dropped
    where `additionalProperties` is false. Nested objects and list items are repaired
    the same way. Values that fit already are never changed."""
    notes: list[str] = []
    repaired = _repair(schema, params, [], notes, 0)
    return (repaired if isinstance(repaired, dict) else dict(params)), notes


_INTEGER = re.compile(r"[+-]?\d{1,300}")
_NUMBER = re.compile(r"[+-]?(?:\d{1,300}(?:\.\d{0,300})?|\.\d{1,300})(?:[eE][+-]?\d{1,4})?")


def _repair(schema: Any, value: Any, path: list[Any], notes: list[str], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return value
    types = _schema_types(schema)
    value = _coerce(value, types, path, notes)
    if isinstance(value, dict):
        target = _branch(schema, "object")
        if target is not None:
            return _repair_object(target, value, path, notes, depth)
    elif isinstance(value, list):
        target = _branch(schema, "array")
        if target is not None and isinstance(target.get("items"), dict):
            items = target["items"]
            return [_repair(items, item, path + [i], notes, depth + 1) for i, item in enumerate(value)]
    return value


def _repair_object(schema: dict[str, Any], value: dict[str, Any], path: list[Any], notes: list[str], depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    extra = schema.get("additionalProperties", True)
    patterns = schema.get("patternProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in properties:
            out[key] = _repair(properties[key], item, path + [key], notes, depth + 1)
        elif _pattern_match(patterns, key):
            out[key] = item
        elif extra is False:
            notes.append(f"dropped unknown '{location(path + [key])}'")
        elif isinstance(extra, dict):
            out[key] = _repair(extra, item, path + [key], notes, depth + 1)
        else:
            out[key] = item
    for key, subschema in properties.items():
        if key not in out and isinstance(subschema, dict) and "default" in subschema:
            out[key] = copy.deepcopy(subschema["default"])
            notes.append(f"filled '{location(path + [key])}' with its default {show_value(subschema['default'])}")
    return out


def _pattern_match(patterns: Any, key: str) -> bool:
    if not isinstance(patterns, dict):
        return False
    from chainlang.expr.evaluate import compile_regex

    for pattern in patterns:
        compiled, _ = compile_regex(pattern) if isinstance(pattern, str) else (None, None)
        if compiled is None or compiled.search(key) is not None:
            return True  # an unusable pattern: keep the key, validation reports the schema
    return False


def _coerce(value: Any, types: set[str], path: list[Any], notes: list[str]) -> Any:
    if not types or _fits(value, types):
        return value
    new: Any = _NO_CHANGE
    if isinstance(value, str):
        text = value.strip()
        if "integer" in types and _INTEGER.fullmatch(text):
            new = int(text)
        elif "number" in types and _NUMBER.fullmatch(text):
            number = float(text)
            if math.isfinite(number):
                new = int(text) if _INTEGER.fullmatch(text) else number
        elif "boolean" in types and text.lower() in ("true", "false"):
            new = text.lower() == "true"
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and "string" in types:
        if isinstance(value, int) or math.isfinite(value):
            new = json.dumps(value)
    if new is _NO_CHANGE and "array" in types and isinstance(value, (str, int, float, bool)):
        new = [value]
    if new is _NO_CHANGE:
        return value
    notes.append(f"'{location(path) or 'params'}': {show_value(value)} → {show_value(new)}")
    return new


_NO_CHANGE = object()


def _fits(value: Any, types: set[str]) -> bool:
    if value is None:
        return "null" in types
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return bool(types & {"integer", "number"})
    if isinstance(value, float):
        return "number" in types or ("integer" in types and value.is_integer())
    if isinstance(value, str):
        return "string" in types
    if isinstance(value, list):
        return "array" in types
    if isinstance(value, dict):
        return "object" in types
    return False


def _schema_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema accepts, as far as `type`, `anyOf`/`oneOf` and `enum`/`const` say
    (empty: unknown, so nothing is coerced)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            found: set[str] = set()
            for branch in branches:
                sub = _schema_types(branch) if isinstance(branch, dict) else set()
                if not sub:
                    return set()  # a branch of unknown type: anything may fit
                found |= sub
            return found
    if "const" in schema:
        return {json_kind(schema["const"])}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {json_kind(item) for item in schema["enum"]}
    return set()


def _branch(schema: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The (sub)schema that describes values of `kind`: the first `anyOf`/`oneOf` branch of
    that type, else the schema itself when it accepts `kind` or says no type at all."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, dict) and kind in _schema_types(branch):
                    return branch
    types = _schema_types(schema)
    return schema if not types or kind in types else None
