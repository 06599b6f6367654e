"""The static type lattice and checker."""

from __future__ import annotations

from typing import Any

import pytest

from chainlang.expr import (
    ANY,
    BOOL,
    NULL,
    NUMBER,
    STRING,
    Array,
    Object,
    Union,
    check_expression,
    check_template,
    parse_expression,
    parse_template,
    path_type,
    type_from_schema,
    type_of_value,
    union,
)
from chainlang.expr.ast import Index, Key, Name


def test_union_is_kept_simple() -> None:
    assert union(NUMBER) is NUMBER
    assert union(NUMBER, NUMBER) is NUMBER
    assert union(NUMBER, ANY) is ANY
    assert union(NUMBER, union(STRING, NULL)) == Union(frozenset({NUMBER, STRING, NULL}))
    many = [Object({f"k{i}": NUMBER}, True) for i in range(9)]
    assert union(*many) is ANY
    assert union() is ANY


def test_object_types_are_values() -> None:
    a = Object({"x": NUMBER}, strict=True)
    b = Object({"x": NUMBER}, strict=True)
    assert a == b and hash(a) == hash(b)
    assert a != Object({"x": NUMBER})
    with pytest.raises(AttributeError):
        a.strict = False  # type: ignore[misc]
    assert len({a, b, Array(a)}) == 2


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, STRING),
        ({"type": "integer"}, NUMBER),
        ({"type": "number"}, NUMBER),
        ({"type": "boolean"}, BOOL),
        ({"type": "null"}, NULL),
        ({"type": ["string", "null"]}, union(STRING, NULL)),
        ({"type": "string", "nullable": True}, union(STRING, NULL)),
        ({"type": "array", "items": {"type": "number"}}, Array(NUMBER)),
        ({"type": "array"}, Array(ANY)),
        ({"items": {"type": "string"}}, Array(STRING)),
        ({"enum": ["a", "b"]}, STRING),
        ({"enum": ["a", 1, None]}, union(STRING, NUMBER, NULL)),
        ({"const": 3}, NUMBER),
        ({"anyOf": [{"type": "string"}, {"type": "number"}]}, union(STRING, NUMBER)),
        ({"oneOf": [{"type": "string"}, {}]}, ANY),
        ({"$ref": "#/definitions/x"}, ANY),
        ({"allOf": [{"type": "string"}]}, ANY),
        ({}, ANY),
        (True, ANY),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
         Object({"a": STRING}, strict=False)),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
          "additionalProperties": False},
         Object({"a": STRING}, strict=True)),
        ({"properties": {"n": {"type": "integer"}}}, Object({"n": union(NUMBER, NULL)})),
        ({"type": "madeup"}, ANY),
    ],
)
def test_type_from_schema(schema: Any, expected: Any) -> None:
    assert type_from_schema(schema) == expected


def test_type_from_deep_schema_is_bounded() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    t = type_from_schema(schema)
    depth = 0
    while isinstance(t, Array):
        t, depth = t.item, depth + 1
    assert t is ANY and depth < 200


def test_type_of_value() -> None:
    assert type_of_value(None) is NULL
    assert type_of_value(True) is BOOL
    assert type_of_value(1) is NUMBER
    assert type_of_value(1.5) is NUMBER
    assert type_of_value("x") is STRING
    assert type_of_value([]) == Array(ANY)
    assert type_of_value([1, "a"]) == Array(union(NUMBER, STRING))
    assert type_of_value({"a": [True]}) == Object({"a": Array(BOOL)}, strict=True)


def test_path_type() -> None:
    user = Object({"name": STRING, "tags": Array(STRING)}, strict=True)
    assert path_type(user, [Name("name")]) is STRING
    assert path_type(user, [Key("tags"), Index(-1)]) == union(STRING, NULL)
    assert path_type(user, [Name("nope")]) is None  # strict: definitely absent
    assert path_type(Object({"a": NUMBER}), [Name("nope")]) is ANY  # loose: unknown
    assert path_type(user, [Name("name"), Index(0)]) is None  # indexing a string
    assert path_type(user, [Name("name"), Name("x")]) is None
    assert path_type(NUMBER, [Name("x")]) is None
    assert path_type(NULL, [Name("x")]) is None
    assert path_type(Array(NUMBER), [Name("x")]) is None
    assert path_type(Object({}, True), [Index(0)]) is None
    assert path_type(ANY, [Name("x"), Index(0)]) is ANY
    assert path_type(user, []) is user
    maybe = union(user, NULL)
    assert path_type(maybe, [Name("name")]) == union(STRING, NULL)
    assert path_type(union(STRING, NUMBER), [Name("x")]) is None


def _types(**refs: Any) -> Any:
    def ref_type(ref: Any) -> Any:
        t = refs.get(ref.root, ANY)
        return path_type(t, ref.segments[1:])

    return ref_type


def _issues(text: str, **refs: Any) -> list[tuple[str, str]]:
    _, issues = check_expression(parse_expression(text), _types(**refs))
    return [(i.category, text[i.start : i.end]) for i in issues]


def test_any_never_reports() -> None:
    for text in ["x + 1", "x < 'a'", "x contains 1", "x | keys", "x | length", "x matches y",
                 "-x", "x * y", "x | round(y)", "x | join(y)"]:
        assert _issues(text) == [], text


def test_known_types_report() -> None:
    assert _issues("s - 1", s=STRING) == [("type", "s - 1")]
    assert _issues("s < n", s=STRING, n=NUMBER) == [("type", "s < n")]
    assert _issues("n | keys", n=NUMBER) == [("type", "keys")]
    assert _issues("s | lenght") == [("filter", "lenght")]
    assert _issues("s | default") == [("filter", "default")]
    assert _issues("s matches '('") == [("regex", "'('")]
    assert _issues("o.missing + 1", o=Object({"a": NUMBER}, True)) == [("type", "o.missing + 1")]


def test_one_known_side_is_enough_when_it_fits_nothing() -> None:
    assert _issues("true + x") == [("type", "true + x")]
    assert _issues("x - 'a'") == [("type", "x - 'a'")]
    assert _issues("x < [1]") == [("type", "x < [1]")]
    assert _issues("'a' + x") == []
    assert _issues("x < 1") == []
    assert _issues("1 contains x") == [("type", "1 contains x")]


def test_unions_report_only_when_every_member_fails() -> None:
    sn = union(STRING, NUMBER)
    assert _issues("v + 1", v=sn) == []
    assert _issues("v | length", v=sn) == []
    assert _issues("v | keys", v=sn) == [("type", "keys")]
    assert _issues("v - 1", v=union(STRING, NULL)) == [("type", "v - 1")]
    assert _issues("v contains 'a'", v=union(NUMBER, NULL)) == []  # null: false


def test_result_types() -> None:
    def t(text: str, **refs: Any) -> Any:
        return check_expression(parse_expression(text), _types(**refs))[0]

    assert t("1 + 2") is NUMBER
    assert t("'a' + 'b'") is STRING
    assert t("[1] + ['a']") == Array(union(NUMBER, STRING))
    assert t("x > 1") is BOOL
    assert t("x | length") is NUMBER
    assert t("x | keys") == Array(STRING)
    assert t("l | first", l=Array(NUMBER)) == union(NUMBER, NULL)
    assert t("n | default('x')", n=union(NUMBER, NULL)) == union(NUMBER, STRING)
    assert t("o | values", o=Object({"a": NUMBER, "b": STRING}, True)) == Array(union(NUMBER, STRING))
    assert t("o.a", o=Object({"a": NUMBER}, True)) is NUMBER
    assert t("(o | keys)[0]", o=Object({"a": NUMBER}, True)) == union(STRING, NULL)
    assert t("x") is ANY
    assert t("missing", missing=NULL) is NULL


def test_check_template() -> None:
    ref_type = _types(user=Object({"name": STRING}, True))
    t, issues = check_template(parse_template("Hi {user.name | length}"), ref_type)
    assert t is STRING and issues == []
    t, issues = check_template(parse_template("{user.name | length}"), ref_type)
    assert t is NUMBER
    text = "Hi {user.name - 1}!"
    _, issues = check_template(parse_template(text), ref_type)
    assert [(i.category, text[i.start : i.end]) for i in issues] == [("type", "user.name - 1")]
