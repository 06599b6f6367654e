"""JSON Schema helpers: pydantic models and type annotations → plain draft-07 dicts.

pydantic emits JSON Schema 2020-12 with `title` on every node, `$defs`, and
`prefixItems` for tuples. The registry wants small draft-07 schemas that
read well in `chainlang describe` and that the checker can walk without a
resolver: titles are stripped, references to non-recursive definitions are
inlined, and only recursive definitions stay, under `definitions`.

pydantic and jsonschema are imported on first use (they are slow to import
and most commands only need the stdlib declarations).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping
from typing import Any

_DEFS_PREFIX = "#/definitions/"
_MAP_KEYS = frozenset({"properties", "patternProperties", "definitions", "$defs"})
_ONE_KEYS = frozenset(
    {"additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then", "else", "items"}
)
_LIST_KEYS = frozenset({"anyOf", "oneOf", "allOf", "items", "prefixItems"})

Schema = dict[str, Any]

# schemas that say nothing useful about a result: treated as "no result schema"
_UNINFORMATIVE: tuple[Schema, ...] = (
    {},
    {"type": "object"},
    {"type": "object", "additionalProperties": True},
    {"additionalProperties": True, "type": "object"},
)


def map_subschemas(schema: Schema, fn: Callable[[Schema], Schema]) -> Schema:
    """A shallow copy of `schema` with `fn` applied to each immediate subschema
    (boolean schemas and non-schema values are kept as they are)."""
    out: Schema = {}
    for key, value in schema.items():
        if key in _MAP_KEYS and isinstance(value, dict):
            out[key] = {k: fn(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in _LIST_KEYS and isinstance(value, list):
            out[key] = [fn(v) if isinstance(v, dict) else v for v in value]
        elif key in _ONE_KEYS and isinstance(value, dict):
            out[key] = fn(value)
        elif key == "dependencies" and isinstance(value, dict):
            out[key] = {k: fn(v) if isinstance(v, dict) else v for k, v in value.items()}
        else:
            out[key] = value
    return out


def _clean(schema: Schema) -> Schema:
    """Strip titles and pydantic-only keywords, turn prefixItems into draft-07
    tuple items, and close objects that list their properties (pydantic leaves
    `additionalProperties` out for models that ignore extra keys; a chain must
    not silently pass keys a tool drops). `type` comes first, for reading."""
    out = map_subschemas(schema, _clean)
    out.pop("title", None)
    out.pop("discriminator", None)  # OpenAPI keyword; its mapping points into $defs
    if "properties" in out and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    if "type" in out:
        out = {"type": out.pop("type"), **out}
    if "prefixItems" in out:
        tuple_items = out.pop("prefixItems")
        rest = out.pop("items", None)
        out["items"] = tuple_items
        if rest is not None:
            out["additionalItems"] = rest
        elif "maxItems" in out:
            out["additionalItems"] = False
    return out


def _rewrite_refs(schema: Schema) -> Schema:
    out = map_subschemas(schema, _rewrite_refs)
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out["$ref"] = _DEFS_PREFIX + ref[len("#/$defs/") :]
    return out


def to_draft7(schema: Mapping[str, Any]) -> Schema:
    """Normalize a pydantic-generated schema into a compact draft-07 schema."""
    root = _rewrite_refs(copy.deepcopy(dict(schema)))
    defs: dict[str, Schema] = {}
    for key in ("$defs", "definitions"):
        found = root.pop(key, None)
        if isinstance(found, dict):
            defs.update({name: _clean(value) for name, value in found.items() if isinstance(value, dict)})
    root = _clean(root)
    if not defs:
        return root

    needed: list[str] = []

    def inline(node: Schema, stack: frozenset[str]) -> Schema:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
            target = ref[len(_DEFS_PREFIX) :]
            if target in defs:
                if target in stack:  # recursive: keep the reference
                    if target not in needed:
                        needed.append(target)
                    return map_subschemas(node, lambda sub: inline(sub, stack))
                body = inline(defs[target], stack | {target})
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                return {**body, **map_subschemas(siblings, lambda sub: inline(sub, stack))}
        return map_subschemas(node, lambda sub: inline(sub, stack))

    result = inline(root, frozenset())
    definitions: dict[str, Schema] = {}
    index = 0
    while index < len(needed):
        name = needed[index]
        definitions[name] = inline(defs[name], frozenset({name}))
        index += 1
    if definitions:
        result["definitions"] = definitions
    return result


def is_uninformative(schema: Mapping[str, Any] | None) -> bool:
    """True for schemas that accept any object or anything (`dict`, `Any`)."""
    if schema is None:
        return True
    stripped = {k: v for k, v in schema.items() if k not in ("description", "title")}
    return any(stripped == candidate for candidate in _UNINFORMATIVE)


def model_schema(model: type[Any]) -> Schema:
    """The draft-07 schema of a pydantic model's validation input.

    Unless a model allows extra fields (`extra="allow"`), its schema forbids
    unknown properties: a chain must not silently pass params a tool ignores.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = model.model_json_schema(ref_template="#/$defs/{model}")
    schema = to_draft7(raw)
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False  # a model without fields
    return schema


def type_schema(annotation: Any) -> Schema:
    """The draft-07 schema of a type annotation (`list[str]`, a TypedDict, ...)."""
    from pydantic import TypeAdapter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = TypeAdapter(annotation).json_schema(ref_template="#/$defs/{model}")
    return to_draft7(raw)


def is_pydantic_model(value: object) -> bool:
    if not isinstance(value, type):
        return False
    from pydantic import BaseModel

    return issubclass(value, BaseModel)


def schema_problem(schema: object) -> str | None:
    """Why `schema` is not a valid draft-07 JSON Schema (None when it is)."""
    if not isinstance(schema, (dict, bool)):
        return f"a JSON Schema must be an object (a mapping), not {type(schema).__name__}"
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft7Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"{exc.message}" + (f" (at {where})" if where else "")
    return None
