"""The JSON Schemas of simple tool signatures, built without pydantic.

`@event` derives a tool's params schema from its signature and its result schema from
its return annotation. Through pydantic that is a model per tool (milliseconds each),
after importing pydantic (~100 ms): a module of a few dozen tools would slow every
command down by a second. The annotations most tools use are turned into JSON Schema
here directly:

    str, int, float, bool, None, Any (or no annotation), list, dict,
    list[X], dict[str, X], Optional[X], X | Y (typing.Union), Literal[...] of
    str / int / bool / None, Annotated[X, "doc", ...] (string metadata is ignored,
    as pydantic ignores it), and for a parameter Annotated[X, Field(description=...)]
    when the module has imported pydantic itself; defaults that are plain JSON values.

The result is exactly the schema the pydantic path gives (the same keys in the same
order): this module builds the JSON Schema pydantic would generate before sorting,
sorts it as pydantic does, and hands it to the same normalisation (`to_draft7`).
`tests/test_registry_signature_schemas.py` compares the two over a broad table and
generated signatures. Anything else (pydantic models, dataclasses, TypedDicts, enums,
tuples, sets, dates, constraints, a parameter named like a pydantic model attribute...)
gives None, and the caller uses pydantic as before.
"""

from __future__ import annotations

import math
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from chainlang.schemas.from_python import Schema, to_draft7

__all__ = ["NO_DEFAULT", "annotation_schema", "params_schema"]

NO_DEFAULT: Any = object()  # a parameter without a default

# Parameter names that pydantic treats specially in a model (BaseModel's attributes, whose
# fields it warns about; `model_config` silently disappears; `Config` is an error): left to it.
PYDANTIC_NAMES = frozenset({
    "Config", "construct", "copy", "dict", "from_orm", "json", "parse_file", "parse_obj", "parse_raw", "schema",
    "schema_json", "update_forward_refs", "validate", "fields",
})
# Names whose schema pydantic does not sort (its sort skips the children of these keys).
_UNSORTED_KEYS = ("properties", "default")

_SIMPLE: dict[Any, Schema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    None: {"type": "null"},
    type(None): {"type": "null"},
    list: {"type": "array", "items": {}},
    dict: {"type": "object", "additionalProperties": True},
}
_UNION_ORIGINS = (typing.Union, types.UnionType)
_LITERAL_TYPES = {str: "string", int: "integer", bool: "boolean", type(None): "null"}
_JSON_SCALARS = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    """An annotation or default this module leaves to pydantic."""


def params_schema(fields: Iterable[tuple[str, Any, Any]]) -> Schema | None:
    """The schema of a params model of `fields` (name, annotation, default or NO_DEFAULT),
    as `model_schema(create_model("Params", **fields))` gives it; None when pydantic is needed."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    try:
        for name, annotation, default in fields:
            if name in PYDANTIC_NAMES or name.startswith("model_") or name in _UNSORTED_KEYS:
                return None
            prop = _field(annotation)
            if default is NO_DEFAULT:
                required.append(name)
            else:
                prop["default"] = _json_default(default)
            properties[name] = prop
    except _Unsupported:
        return None
    raw: Schema = {"properties": properties, "type": "object"}
    if required:
        raw["required"] = required
    schema = to_draft7(_sorted(raw, None))
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False  # as model_schema does
    return schema


def annotation_schema(annotation: Any) -> Schema | None:
    """The schema of a type annotation, as `type_schema(annotation)` gives it; None when
    pydantic is needed."""
    try:
        raw = _raw(annotation)
    except _Unsupported:
        return None
    return to_draft7(_sorted(raw, None))


# -- what pydantic generates, before it sorts ------------------------------------------


def _field(annotation: Any) -> Schema:
    """A parameter's schema: a pydantic Field that only describes is a field's description."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        descriptions = [_description(item) for item in metadata if not isinstance(item, str)]
        schema = _raw(inner)
        if descriptions:
            schema["description"] = descriptions[-1]
        return schema
    return _raw(annotation)


def _description(item: object) -> str:
    """The description of a `pydantic.Field(description=...)` that sets nothing else."""
    fields = sys.modules.get("pydantic.fields")  # a FieldInfo exists only if pydantic was imported
    field_info = getattr(fields, "FieldInfo", None)
    if field_info is None or type(item) is not field_info:
        raise _Unsupported
    attributes = getattr(item, "_attributes_set", None)
    description = getattr(item, "description", None)
    if attributes != {"description": description} or type(description) is not str or getattr(item, "metadata", None):
        raise _Unsupported
    return description


def _raw(annotation: Any) -> Schema:
    if annotation is Any:
        return {}
    try:
        simple = _SIMPLE.get(annotation)
    except TypeError:  # an unhashable annotation
        raise _Unsupported from None
    if simple is not None:
        return dict(simple)  # a copy: a field's default and description are added to it
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list:
        if len(args) > 1:
            raise _Unsupported
        return {"type": "array", "items": _raw(args[0]) if args else {}}
    if origin is dict:
        if not args:
            return {"type": "object", "additionalProperties": True}
        if len(args) != 2 or args[0] is not str:
            raise _Unsupported
        values = _raw(args[1])
        return {"type": "object", "additionalProperties": values if values else True}
    if origin in _UNION_ORIGINS:
        return _union(args)
    if origin is typing.Literal:
        return _literal(args)
    if origin is typing.Annotated:
        inner, *metadata = args
        if not all(isinstance(item, str) for item in metadata):
            raise _Unsupported
        return _raw(inner)
    raise _Unsupported


def _union(args: tuple[Any, ...]) -> Schema:
    """pydantic: the members that are not None as a union, then nullable when None is one."""
    choices = [arg for arg in args if arg is not None and arg is not type(None)]
    nullable = len(choices) < len(args)
    if not choices:
        raise _Unsupported
    schema = _raw(choices[0]) if len(choices) == 1 else _any_of([_raw(choice) for choice in choices])
    if not nullable:
        return schema
    null: Schema = {"type": "null"}
    return null if schema == null else _any_of([schema, null])


def _any_of(schemas: list[Schema]) -> Schema:
    """pydantic's flattened, deduplicated anyOf."""
    members: list[Schema] = []
    for schema in schemas:
        if len(schema) == 1 and "anyOf" in schema:
            members.extend(schema["anyOf"])
        else:
            members.append(schema)
    unique = list({_hashable(member): member for member in members}.values())
    return unique[0] if len(unique) == 1 else {"anyOf": unique}


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _literal(values: tuple[Any, ...]) -> Schema:
    if not values or any(type(value) not in _LITERAL_TYPES for value in values):
        raise _Unsupported  # enums, bytes... are pydantic's
    expected = list(values)
    schema: Schema = {"const": expected[0]} if len(expected) == 1 else {"enum": expected}
    kinds = {type(value) for value in expected}
    if len(kinds) == 1:
        schema["type"] = _LITERAL_TYPES[kinds.pop()]
    return schema


def _json_default(value: Any) -> Any:
    """A copy of a default that is plain JSON (what pydantic encodes it to, unchanged)."""
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: pydantic leaves such a default out
            raise _Unsupported from None
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _Unsupported
        return value
    if kind in _JSON_SCALARS:
        return value
    if kind is list:
        return [_json_default(item) for item in value]
    if kind is dict:
        if not all(type(key) is str for key in value):
            raise _Unsupported
        return {key: _json_default(item) for key, item in value.items()}
    raise _Unsupported


def _sorted(value: Any, parent_key: str | None) -> Any:
    """pydantic's key order: alphabetical, except the children of `properties` and `default`."""
    if isinstance(value, Mapping):
        keys: Iterable[str] = value.keys() if parent_key in _UNSORTED_KEYS else sorted(value.keys())
        return {key: _sorted(value[key], key) for key in keys}
    if isinstance(value, list):
        return [_sorted(item, parent_key) for item in value]
    return value
