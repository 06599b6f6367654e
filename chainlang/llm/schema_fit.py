"""A JSON Schema fitted to what constrained-decoding endpoints take, saying what it changed.

An answer's schema is sent as `response_format: json_schema`, and the endpoint turns it into
a grammar: llama.cpp's json-schema-to-grammar (also Ollama's), llguidance, xgrammar (vLLM),
OpenAI's structured outputs. Each takes a subset of JSON Schema and either refuses the rest
(llguidance, OpenAI: the request fails; llama.cpp refuses a remote `$ref`) or skips it
silently (llama.cpp: the grammar then says less than the schema). `simplify` rewrites a
schema into the subset they share, so the request is taken and what the grammar enforces is
known, and returns one note per change ("dropped format: email at /properties/to"): the
model_call record keeps them (`schema_simplified`). The answer is still validated against
the whole schema: a constraint dropped here is checked there.

The subset kept: type, enum, const, properties, required, additionalProperties, items,
prefixItems, minItems, maxItems, anyOf, oneOf (llama.cpp reads it as anyOf; llguidance
takes it when its branches are disjoint, as chainlang's are), allOf, local `$ref` with
`$defs`/`definitions`, minLength, maxLength, pattern (without look-around or
back-references), minimum, maximum, exclusiveMinimum, exclusiveMaximum, format date, time,
date-time and uuid, and annotations (title, description...). Limits keep the grammar small: an enum of more than `MAX_ENUM`
values is sent as its values' type, nesting deeper than `MAX_DEPTH` as any value, and a
schema larger than `MAX_SCHEMA_CHARS` (as JSON) loses its annotations, then its deepest parts.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_ENUM", "MAX_SCHEMA_CHARS", "simplify"]

MAX_ENUM = 256  # values of one enum; a grammar has an alternative per value
MAX_DEPTH = 24  # nested schemas; agent.chain's block forms nest a few levels
MAX_SCHEMA_CHARS = 32_000  # the schema sent, as JSON
_SHOWN_PATHS = 3  # paths named in one note

# keywords dropped, with why in the note's words
_DROPPED = ("patternProperties", "if", "then", "else", "not", "dependencies", "dependentRequired",
            "dependentSchemas", "uniqueItems", "contains", "minContains", "maxContains", "multipleOf",
            "minProperties", "maxProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
            "additionalItems")
_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
_ANNOTATIONS = ("title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly")
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_UNSUPPORTED_REGEX = re.compile(r"\(\?[=!<]|\\[1-9]|\\k<")  # look-around, back-references


class _Notes:
    """Changes by kind, each with the places it was made (JSON Pointers), in order."""

    def __init__(self) -> None:
        self.places: dict[str, list[str]] = {}

    def add(self, what: str, path: str) -> None:
        self.places.setdefault(what, []).append(path or "/")

    def lines(self) -> list[str]:
        out = []
        for what, paths in self.places.items():
            shown = ", ".join(paths[:_SHOWN_PATHS])
            more = f" (and {len(paths) - _SHOWN_PATHS} more)" if len(paths) > _SHOWN_PATHS else ""
            out.append(f"{what} at {shown}{more}")
        return out


def simplify(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`schema` rewritten into the subset endpoints take (a new value: `schema` is not
    changed), and a note per kind of change with where it was made; no notes when the
    schema is sent as it is."""
    notes = _Notes()
    fitted = _fit(schema, "", 0, notes)
    if not isinstance(fitted, dict):
        fitted = {}
    if len(_dumps(fitted)) > MAX_SCHEMA_CHARS:
        fitted = _without_annotations(fitted)
        notes.add(f"dropped titles and descriptions (the schema is over {MAX_SCHEMA_CHARS:,} characters)", "")
        depth = MAX_DEPTH
        while len(_dumps(fitted)) > MAX_SCHEMA_CHARS and depth > 1:
            depth -= 1
            fitted = _cut_below(fitted, depth)
        if depth < MAX_DEPTH:
            notes.add(f"sent schemas nested deeper than {depth} levels as any value (the schema is over "
                      f"{MAX_SCHEMA_CHARS:,} characters)", "")
    return fitted, notes.lines()


def _fit(node: Any, path: str, depth: int, notes: _Notes) -> Any:
    if not isinstance(node, dict):
        return node  # true / false, or a value that is not a schema: as it is
    if depth > MAX_DEPTH:
        notes.add(f"sent a schema nested deeper than {MAX_DEPTH} levels as any value", path)
        return {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        here = f"{path}/{_escape(key)}"
        if key in _DROPPED:
            notes.add(f"dropped {key}", path)
        elif key == "format":
            if value in _FORMATS or not isinstance(value, str):
                out[key] = value
            else:
                notes.add(f"dropped format: {value}", path)
        elif key == "pattern" and isinstance(value, str) and _UNSUPPORTED_REGEX.search(value):
            notes.add("dropped a pattern with look-around or a back-reference", path)
        elif key == "$ref" and isinstance(value, str) and not value.startswith("#"):
            notes.add(f"sent a remote $ref ({value[:80]}) as any value", path)
        elif key == "enum" and isinstance(value, list) and len(value) > MAX_ENUM:
            types = sorted({_json_type(v) for v in value})
            notes.add(f"sent an enum of {len(value):,} values as {' or '.join(types)}", path)
            if "type" not in node:
                out["type"] = types[0] if len(types) == 1 else types
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _fit(v, f"{here}/{_escape(k)}", depth + 1, notes) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_fit(v, f"{here}/{i}", depth + 1, notes) for i, v in enumerate(value)]
        elif key in ("items", "additionalProperties"):
            if isinstance(value, list):  # draft 4's tuple form
                out[key] = [_fit(v, f"{here}/{i}", depth + 1, notes) for i, v in enumerate(value)]
            else:
                out[key] = _fit(value, here, depth + 1, notes)
        else:
            out[key] = value
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _without_annotations(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_annotations(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in _ANNOTATIONS and not isinstance(value, dict):
            continue
        out[key] = {k: _without_annotations(v) for k, v in value.items()} if key in _SCHEMA_MAPS and \
            isinstance(value, dict) else _without_annotations(value) if key not in ("enum", "const") else value
    return out


def _cut_below(node: Any, depth: int) -> Any:
    """`node` with every schema nested deeper than `depth` made any value ({})."""
    if not isinstance(node, dict):
        return node
    if depth <= 0:
        return {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _cut_below(v, depth - 1) for k, v in value.items()}
        elif key in (*_SCHEMA_LISTS, "items") and isinstance(value, list):
            out[key] = [_cut_below(v, depth - 1) for v in value]
        elif key in ("items", "additionalProperties"):
            out[key] = _cut_below(value, depth - 1)
        else:
            out[key] = value
    return out


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
