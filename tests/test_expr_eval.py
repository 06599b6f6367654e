"""The evaluator beyond the compliance suite: resolvers, compilation, bounds,
rendering."""

from __future__ import annotations

from typing import Any

import pytest

from chainlang.expr import (
    MAX_SIZE,
    DataResolver,
    ExprEvalError,
    Index,
    Key,
    Name,
    Ref,
    compile_expression,
    compile_template,
    evaluate,
    parse_expression,
    parse_template,
    render_template,
    to_text,
    truthy,
    walk_path,
)


def run(text: str, **data: Any) -> Any:
    return evaluate(parse_expression(text), DataResolver(data))


def test_resolver_receives_refs() -> None:
    seen: list[str] = []

    def resolve(ref: Ref) -> Any:
        seen.append(ref.dotted())
        return {"tools.now.result.hour": 14, "inputs.limit": 3}.get(ref.dotted())

    assert evaluate(parse_expression("tools.now.result.hour > 12 and inputs.limit"), resolve) is True
    assert seen == ["tools.now.result.hour", "inputs.limit"]


def test_compiled_expression_is_reusable() -> None:
    fn = compile_expression(parse_expression("items | length > limit"))
    assert fn(DataResolver({"items": [1, 2, 3], "limit": 2})) is True
    assert fn(DataResolver({"items": [], "limit": 2})) is False
    with pytest.raises(ExprEvalError) as info:
        fn(DataResolver({"items": 5, "limit": 2}))
    assert info.value.category == "type"
    assert (info.value.start, info.value.end) == (8, 14)  # the filter name


def test_short_circuit_does_not_resolve() -> None:
    calls: list[str] = []

    def resolve(ref: Ref) -> Any:
        calls.append(ref.root)
        return None

    evaluate(parse_expression("false and a"), resolve)
    evaluate(parse_expression("true or b"), resolve)
    evaluate(parse_expression("'x' | default(c)"), resolve)
    assert calls == []


def test_error_spans() -> None:
    with pytest.raises(ExprEvalError) as info:
        run("1 + (2 / zero)", zero=0)
    assert (info.value.category, info.value.start, info.value.end) == ("arithmetic", 5, 13)
    with pytest.raises(ExprEvalError) as info:
        run("x matches '('", x="a")
    assert (info.value.category, info.value.start, info.value.end) == ("regex", 10, 13)


def test_template_errors_are_located_in_the_template() -> None:
    t = parse_template("Total: {a + b} units")
    with pytest.raises(ExprEvalError) as info:
        render_template(t, DataResolver({"a": 1, "b": "x"}))
    assert (info.value.start, info.value.end) == (8, 13)
    single = parse_template("{ a | keys }")
    with pytest.raises(ExprEvalError) as info:
        render_template(single, DataResolver({"a": 1}))
    assert (info.value.start, info.value.end) == (6, 10)


def test_compiled_template() -> None:
    fn = compile_template(parse_template("{n} item(s): {items | join(', ')}"))
    assert fn(DataResolver({"n": 2, "items": ["a", "b"]})) == "2 item(s): a, b"
    native = compile_template(parse_template("{items}"))
    value = native(DataResolver({"items": ["a"]}))
    assert value == ["a"]
    literal = compile_template(parse_template("a {{b}}"))
    assert literal(DataResolver({})) == "a {b}"


def test_size_limits() -> None:
    big = "x" * (MAX_SIZE // 2 + 1)
    with pytest.raises(ExprEvalError) as info:
        run("s + s", s=big)
    assert info.value.category == "limit"
    with pytest.raises(ExprEvalError) as info:
        run("l + l", l=[0] * (MAX_SIZE // 2 + 1))
    assert info.value.category == "limit"
    with pytest.raises(ExprEvalError) as info:
        run("l | join(s)", l=["a", "b", "c"], s=big)
    assert info.value.category == "limit"
    with pytest.raises(ExprEvalError) as info:
        run("l | json", l=["x" * 1000] * 1000)
    assert info.value.category == "limit"
    with pytest.raises(ExprEvalError) as info:
        render_template(parse_template("{s}{s}"), DataResolver({"s": big}))
    assert info.value.category == "limit"
    assert len(run("s + 'y'", s=big)) == len(big) + 1


def test_huge_numbers() -> None:
    with pytest.raises(ExprEvalError) as info:
        run("x * x * x * x", x=10**400)
    assert info.value.category == "arithmetic"
    with pytest.raises(ExprEvalError) as info:
        run("x / 3", x=10**400)
    assert info.value.category == "arithmetic"
    assert run("x / 10", x=10**400) == 10**399


def test_deep_data_is_a_limit_error_not_a_crash() -> None:
    def nest() -> Any:
        deep: Any = []
        for _ in range(50_000):
            deep = [deep]
        return deep

    x, y = nest(), nest()
    for text in ("x == y", "x | json", "x | string", "[x] contains y"):
        with pytest.raises(ExprEvalError) as info:
            run(text, x=x, y=y)
        assert info.value.category == "limit", text


def test_non_json_values_are_type_errors() -> None:
    class Secret:
        password = "hunter2"

    for text in ("x + 1", "x | length", "x | string", "x < 1", "x contains 'a'"):
        with pytest.raises(ExprEvalError) as info:
            run(text, x=Secret())
        assert info.value.category == "type", text
        assert "hunter2" not in info.value.message
    assert run("x.password", x=Secret()) is None  # no attribute access, ever
    assert run("x == y", x=Secret(), y=Secret()) is False


def test_tuples_count_as_lists() -> None:
    assert run("x | length", x=(1, 2)) == 2
    assert run("x[-1]", x=(1, 2)) == 2
    assert run("x == [1, 2]", x=(1, 2)) is True
    assert run("x + [3]", x=(1, 2)) == [1, 2, 3]


def test_results_are_fresh_values() -> None:
    data = {"l": [1, 2]}
    result = run("l + []", **data)
    result.append(3)
    assert data["l"] == [1, 2]
    fn = compile_expression(parse_expression("[1, 2]"))
    first = fn(DataResolver({}))
    first.append(3)
    assert fn(DataResolver({})) == [1, 2]


def test_truthy() -> None:
    for value in (None, False, 0, 0.0, "", [], {}):
        assert truthy(value) is False, value
    for value in (True, 1, -1, 0.1, "0", "false", " ", [0], [[]], {"a": None}):
        assert truthy(value) is True, value


def test_to_text() -> None:
    assert to_text("é") == "é"
    assert to_text(None) == ""
    assert to_text(True) == "true"
    assert to_text(1) == "1"
    assert to_text(1.0) == "1.0"
    assert to_text(1e20) == "1e+20"
    assert to_text([1, "é", None]) == '[1,"é",null]'
    assert to_text({"a": [1, {"b": False}]}) == '{"a":[1,{"b":false}]}'


def test_walk_path() -> None:
    data = {"a": {"b": [10, 20, {"c": "x"}]}}
    assert walk_path(data, (Name("a"), Name("b"), Index(-1), Key("c"))) == "x"
    assert walk_path(data, (Name("a"), Name("b"), Index(3))) is None
    assert walk_path(data, (Name("a"), Name("b"), Index(-4))) is None
    assert walk_path(data, (Name("a"), Index(0))) is None
    assert walk_path(data, (Name("a"), Name("b"), Name("c"))) is None
    assert walk_path("abc", (Index(0),)) is None
    assert walk_path(None, (Name("x"),)) is None
    assert walk_path(data, ()) is data


def test_regex_cache_and_linear_time() -> None:
    import time

    start = time.process_time()  # CPU time (backtracking is CPU), so other processes' load does not count
    assert run("s matches p", s="a" * 100_000 + "!", p="(a+)+$") is False
    assert run("s matches p", s="a" * 100_000 + "!", p="(a|aa)*c") is False
    assert time.process_time() - start < 2.0
    with pytest.raises(ExprEvalError) as info:
        run("s matches p", s="x", p="a" * 20_000)
    assert info.value.category == "regex"
