"""The compiled fast schema check agrees with jsonschema's draft-07 `is_valid` exactly."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlang.registry import stdlib_specs
from chainlang.schemas.fast import compile_fast_check
from chainlang.schemas.safe import validator_for

# CHAINLANG_FUZZ_EXAMPLES=20000 for a long local run
EXAMPLES = int(os.environ.get("CHAINLANG_FUZZ_EXAMPLES", "1000"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def slow(schema: Any, value: Any) -> bool:
    """jsonschema's answer; when it raises, the fast check must say False (and leave it to jsonschema)."""
    try:
        return bool(validator_for(schema).is_valid(value))
    except Exception:
        return False


def agree(schema: Any, value: Any) -> None:
    fast = compile_fast_check(schema)
    assert fast is not None, schema
    assert fast(value) == slow(schema, value), (schema, value)


# ------------------------------------------------------------------ stdlib


STDLIB_SCHEMAS = [
    pytest.param(schema, id=f"{spec.name}.{which}")
    for spec in stdlib_specs()
    for which, schema in (("params", spec.params_schema), ("result", spec.result_schema))
    if schema is not None
]


@pytest.mark.parametrize("schema", STDLIB_SCHEMAS)
def test_every_stdlib_schema_compiles(schema: dict[str, Any]) -> None:
    assert compile_fast_check(schema) is not None


# ------------------------------------------------------------------ hand-picked cases

CASES: list[tuple[Any, Any]] = [
    ({"type": "integer"}, 1.0),
    ({"type": "integer"}, 1.5),
    ({"type": "integer"}, True),
    ({"type": "integer"}, 2**80),
    ({"type": "integer"}, float("inf")),
    ({"type": "number"}, False),
    ({"type": ["integer", "string"]}, 3.0),
    ({"type": "integer", "minimum": 2}, 1.0),
    ({"type": "integer", "minimum": 2}, 2.0),
    ({"type": []}, None),
    ({"minimum": 0}, -0.0),
    ({"exclusiveMinimum": 0}, -0.0),
    ({"exclusiveMaximum": 2**53}, float(2**53)),
    ({"maximum": 2**53}, 2**53 + 1),
    ({"maximum": 1.5}, float("nan")),
    ({"minimum": 0}, float("nan")),
    ({"exclusiveMaximum": 0}, float("nan")),
    ({"minimum": 0}, "not a number"),
    ({"enum": [1]}, True),
    ({"enum": [1]}, 1.0),
    ({"enum": [True]}, 1),
    ({"enum": [[1], {"a": 0}]}, [1.0]),
    ({"enum": [[1], {"a": 0}]}, [True]),
    ({"enum": [{"a": 0}]}, {"a": False}),
    ({"enum": ["a", None]}, None),
    ({"enum": ["a", None]}, "b"),
    ({"enum": ["a", 1]}, "a"),
    ({"const": 0}, -0.0),
    ({"const": False}, 0),
    ({"const": {"a": [1, "x"]}}, {"a": [1.0, "x"]}),
    ({"uniqueItems": True}, [1, True]),
    ({"uniqueItems": True}, [1, 1.0]),
    ({"uniqueItems": True}, [[1], [True], [1]]),
    ({"uniqueItems": True}, [{"a": 1}, {"a": 1.0}]),
    ({"uniqueItems": False}, [1, 1]),
    ({"maxLength": 1}, "\U0001f600"),
    ({"minLength": 2}, "é"),
    ({"minLength": 2}, 12),
    ({"pattern": "^a"}, "ba"),
    ({"pattern": "a"}, "ba"),
    ({"pattern": "a"}, "\ud800"),
    ({"not": {"pattern": "a"}}, "\ud800"),
    ({"format": "date"}, "not a date"),
    ({"items": False}, []),
    ({"items": False}, [1]),
    ({"items": [{"type": "string"}], "additionalItems": False}, ["a", 1]),
    ({"items": [{"type": "string"}], "additionalItems": False}, ["a"]),
    ({"items": [{"type": "string"}], "additionalItems": False}, []),
    ({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}, ["a", 1, 2.0]),
    ({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}, [1]),
    ({"items": {"type": "string"}, "additionalItems": False}, ["a", "b"]),
    ({"additionalItems": False}, [1, 2]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1.5),
    ({"oneOf": []}, 1),
    ({"anyOf": []}, 1),
    ({"allOf": []}, 1),
    ({"not": {}}, 1),
    ({"not": {"type": "string"}}, 1),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, "a"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, 2.0),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, "ab"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, 2.5),
    ({"if": {"type": "string"}, "else": {"type": "integer"}}, "a"),
    ({"then": False}, 1),
    ({"additionalProperties": False}, {"a": 1}),
    ({"properties": {"a": False}}, {"b": 1}),
    ({"properties": {"a": False}}, {"a": 1}),
    ({"required": ["a"]}, ["a"]),
    ({"maxProperties": 0}, {}),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, {"a": "x", "b": 1.0}),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 1}, 1),
    ({"$id": "http://example.com/s", "properties": {"a": {"$id": "a.json", "type": "null"}}}, {"a": None}),
    ({"x-chainlang": "steps", "title": "t", "readOnly": True, "examples": [1], "default": 2}, 3),
    (True, {"anything": 1}),
    (False, None),
]


@pytest.mark.parametrize(("schema", "value"), CASES)
def test_edge_cases_agree(schema: Any, value: Any) -> None:
    agree(schema, value)


def test_the_common_closed_object() -> None:
    fast = compile_fast_check({
        "type": "object",
        "properties": {"x": {"type": "integer"}, "prev": {}},
        "additionalProperties": False,
        "required": ["x"],
    })
    assert fast is not None
    assert fast({"x": 1, "prev": {"a": 1}})
    assert fast({"x": 1.0})
    assert not fast({"prev": 1})  # x is required
    assert not fast({"x": "1"})
    assert not fast({"x": True})
    assert not fast({"x": 1, "y": 2})  # closed
    assert not fast([("x", 1)])
    assert not fast(None)


UNSUPPORTED: list[Any] = [
    {"$ref": "#"},
    {"properties": {"a": {"$ref": "#/definitions/a"}}},
    {"patternProperties": {"^a": {}}},
    {"multipleOf": 2},
    {"dependencies": {"a": ["b"]}},
    {"propertyNames": {"maxLength": 2}},
    {"contains": {"type": "integer"}},
    {"definitions": {}},
    {"unknownKeyword": 1},
    {"items": [{"foo": 1}]},
    {"anyOf": [{"type": "string"}, {"contentMediaType": "text/plain"}]},
    {"type": "foo"},
    {"type": ["string", 1]},
    {"minLength": -1},
    {"minLength": 1.0},
    {"maxItems": True},
    {"minimum": "1"},
    {"minimum": True},
    {"required": "a"},
    {"required": [1]},
    {"enum": "abc"},
    {"uniqueItems": 1},
    {"properties": []},
    {"allOf": {}},
    {"pattern": "(?<=a)b"},  # not RE2
    {"pattern": 1},
    {"items": True, "additionalItems": False},  # jsonschema raises on this one
    {"not": {"$schema": "http://json-schema.org/draft-04/schema#"}},  # another validator class
    {"$id": 5},
    {"$id": "http://[x"},
    1,
    "object",
    None,
    [],
]


@pytest.mark.parametrize("schema", UNSUPPORTED)
def test_unsupported_schemas_are_left_to_jsonschema(schema: Any) -> None:
    assert compile_fast_check(schema) is None


def test_depth_limit() -> None:
    schema: Any = {"type": "integer"}
    for _ in range(5):
        schema = {"items": schema}
    assert compile_fast_check(schema, max_depth=5) is not None
    assert compile_fast_check(schema, max_depth=4) is None
    assert compile_fast_check({"items": {"items": True}}, max_depth=0) is None
    assert compile_fast_check({"items": True}, max_depth=0) is not None  # boolean schemas have no depth


# ------------------------------------------------------------------ generated schemas and values

KEYS = ["a", "b", "c"]
PATTERNS = ["^a", "b$", "[0-9]+", "^$", "é", "^[a-c]*$"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]

numbers = st.one_of(
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, -2.5, 2**53, 2**53 + 1, float(2**53), 2**70, -(2**64)]),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=5),
    st.integers(),
    st.sampled_from([1.0, -0.0, 0.0, 2.0, 1.5, 1e300, 2**53, 2**53 + 1, float(2**53), 2**70, float("inf")]),
    st.floats(),
    st.sampled_from(["", "a", "ab", "b", "abc", "1", "é", "\U0001f600", "a\U0001f600"]),
    st.text(max_size=5),
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS + ["d"]), st.text(max_size=3)), children, max_size=4),
    ),
    max_leaves=10,
)

small_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([1.0, -0.0, 0.5]), st.sampled_from(KEYS)),
    lambda children: st.lists(children, max_size=2) | st.dictionaries(st.sampled_from(KEYS), children, max_size=2),
    max_leaves=4,
)

counts = st.integers(min_value=0, max_value=4)

LEAF_KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3),
    "enum": st.lists(small_json, min_size=1, max_size=4),
    "const": small_json,
    "minimum": numbers,
    "maximum": numbers,
    "exclusiveMinimum": numbers,
    "exclusiveMaximum": numbers,
    "minLength": counts,
    "maxLength": counts,
    "pattern": st.sampled_from(PATTERNS),
    "minItems": counts,
    "maxItems": counts,
    "uniqueItems": st.booleans(),
    "minProperties": counts,
    "maxProperties": counts,
    "required": st.lists(st.sampled_from(KEYS), max_size=3),
}

ANNOTATIONS: dict[str, st.SearchStrategy[Any]] = {
    "format": st.sampled_from(["date", "date-time", "email", "uri"]),
    "title": st.text(max_size=3),
    "description": st.text(max_size=3),
    "default": small_json,
    "examples": st.lists(small_json, max_size=2),
    "$comment": st.text(max_size=3),
    "readOnly": st.booleans(),
    "writeOnly": st.booleans(),
    "x-chainlang": st.sampled_from(["steps", "trigger"]),
    "$id": st.sampled_from(["http://example.com/s.json", "s.json", "#frag"]),
}


def pick(options: dict[str, st.SearchStrategy[Any]], most: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(st.sampled_from(sorted(options)), max_size=most, unique=True).flatmap(
        lambda names: st.fixed_dictionaries({name: options[name] for name in names})
    )


def tidy(schema: dict[str, Any]) -> dict[str, Any]:
    # jsonschema raises on `additionalItems` next to a boolean `items` (the fast path gives None there)
    if isinstance(schema.get("items"), bool):
        schema.pop("additionalItems", None)
    return schema


def some_of(options: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A schema with up to three keywords (so that each of them matters), often a type, sometimes annotations."""
    typed: st.SearchStrategy[dict[str, Any]] = st.just({}) | st.fixed_dictionaries({"type": LEAF_KEYWORDS["type"]})
    return st.tuples(pick(options, 3), typed, pick(ANNOTATIONS, 1)).map(
        lambda parts: tidy({**parts[2], **parts[1], **parts[0]})
    )


def with_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    few = st.lists(children, max_size=3)
    return some_of({
        **LEAF_KEYWORDS,
        "properties": st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
        "additionalProperties": children,
        "items": children | few,
        "additionalItems": children,
        "allOf": few,
        "anyOf": few,
        "oneOf": few,
        "not": children,
        "if": children,
        "then": children,
        "else": children,
    })


leaf_schemas = st.booleans() | some_of(LEAF_KEYWORDS)
schemas = st.recursive(leaf_schemas, with_children, max_leaves=8)
DIALECTS = [None, None, None, "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"]
root_schemas = st.tuples(schemas, st.sampled_from(DIALECTS)).map(
    lambda pair: {**pair[0], "$schema": pair[1]} if isinstance(pair[0], dict) and pair[1] else pair[0]
)


def _bounds(schema: dict[str, Any]) -> tuple[float, float]:
    low, high = -math.inf, math.inf
    for keyword in ("minimum", "exclusiveMinimum"):
        if isinstance(schema.get(keyword), (int, float)):
            low = max(low, schema[keyword])
    for keyword in ("maximum", "exclusiveMaximum"):
        if isinstance(schema.get(keyword), (int, float)):
            high = min(high, schema[keyword])
    return low, high


def derived(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """A value shaped by the schema, so that generated values are often valid (and often just barely not)."""
    if not isinstance(schema, dict) or depth > 4 or draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    if "const" in schema and draw(st.booleans()):
        return schema["const"]
    if schema.get("enum") and draw(st.booleans()):
        return draw(st.sampled_from(schema["enum"]))
    for keyword in ("allOf", "anyOf", "oneOf"):
        if schema.get(keyword) and draw(st.booleans()):
            return derived(draw, draw(st.sampled_from(schema[keyword])), depth + 1)
    if "if" in schema and draw(st.booleans()):
        return derived(draw, schema["if"], depth + 1)
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else list(declared or [])
    if not names:
        if "properties" in schema or "required" in schema:
            names = ["object"]
        elif "items" in schema or "additionalItems" in schema:
            names = ["array"]
        elif "minLength" in schema or "maxLength" in schema or "pattern" in schema:
            names = ["string"]
        elif any(key in schema for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            names = ["number"]
        else:
            names = TYPES
    name = draw(st.sampled_from(names))
    if name == "null":
        return None
    if name == "boolean":
        return draw(st.booleans())
    if name in ("integer", "number"):
        low, high = _bounds(schema)
        if low > high:
            return draw(numbers)
        near = [b for b in (low, high) if math.isfinite(b)]
        first = math.ceil(low) if math.isfinite(low) else None
        last = math.floor(high) if math.isfinite(high) else None
        ints = numbers if first is not None and last is not None and first > last else st.integers(first, last)
        choices = [ints, ints.map(float), st.sampled_from(near) if near else numbers]
        if name == "number" and low < high:
            choices.append(st.floats(min_value=float(low) if math.isfinite(low) else None,
                                     max_value=float(high) if math.isfinite(high) else None))
        return draw(st.one_of(choices))
    if name == "string":
        if "pattern" in schema and isinstance(schema["pattern"], str) and draw(st.booleans()):
            return draw(st.from_regex(schema["pattern"]))
        low = schema.get("minLength", 0)
        high = max(low, schema.get("maxLength", low + 3))
        return draw(st.text(st.sampled_from("abc0é\U0001f600"), min_size=low, max_size=high))
    if name == "array":
        items = schema.get("items", True)
        size = draw(st.integers(schema.get("minItems", 0), max(schema.get("minItems", 0), schema.get("maxItems", 3))))
        if isinstance(items, list):
            size = draw(st.sampled_from([size, len(items), len(items) + 1]))
            rest = schema.get("additionalItems", True)
            return [derived(draw, items[i] if i < len(items) else rest, depth + 1) for i in range(size)]
        return [derived(draw, items, depth + 1) for _ in range(size)]
    value: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for key in KEYS:
        if key in schema.get("required", []) or (key in properties and draw(st.booleans())):
            value[key] = derived(draw, properties.get(key, schema.get("additionalProperties", True)), depth + 1)
    if draw(st.integers(0, 3)) == 0:
        value[draw(st.sampled_from(KEYS + ["d"]))] = draw(small_json)
    return value


@st.composite
def schema_and_values(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    schema = draw(root_schemas)
    values = [derived(draw, schema) if draw(st.integers(0, 3)) else draw(json_values) for _ in range(4)]
    return schema, values


@pytest.mark.slow  # hypothesis-generated: the full suite runs it, make test-fast does not
@SETTINGS
@given(schema_and_values())
def test_generated_schemas_agree_with_jsonschema(case: tuple[Any, list[Any]]) -> None:
    schema, values = case
    for value in values:
        agree(schema, value)


@settings(max_examples=max(200, EXAMPLES // 5), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_stdlib_schemas_agree_with_jsonschema(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from([param.values[0] for param in STDLIB_SCHEMAS]))
    value = data.draw(st.composite(lambda draw: derived(draw, schema))())
    agree(schema, value)
