"""The list filters beyond the compliance suite: size bounds on inputs too
big to write as JSON cases, time on large inputs, and the static result
types the checker hands on."""

from __future__ import annotations

from typing import Any

import pytest

from chainlang.expr import (
    ANY,
    NULL,
    NUMBER,
    STRING,
    Array,
    DataResolver,
    ExprEvalError,
    check_expression,
    evaluate,
    parse_expression,
    path_type,
    type_of_value,
    union,
)
from chainlang.expr.values import MAX_SIZE


def _run(source: str, **data: Any) -> Any:
    return evaluate(parse_expression(source), DataResolver(data))


def test_flatten_refuses_a_result_past_max_size() -> None:
    half = [0] * (MAX_SIZE // 2 + 1)
    with pytest.raises(ExprEvalError) as info:
        _run("parts | flatten", parts=[half, half])
    assert info.value.category == "limit"
    assert "flatten" in str(info.value)
    # one short of the bound still works
    assert len(_run("parts | flatten", parts=[half, half[:-2]])) == MAX_SIZE


def test_large_lists_stay_fast_and_exact() -> None:
    # unique hashes each item once: a pairwise comparison would take minutes here
    n = 200_000
    items = [i % 1000 for i in range(n)] + [float(i) for i in range(1000)]
    assert _run("xs | unique", xs=items) == list(range(1000))
    assert _run("xs | sort | first", xs=items) == 0
    assert _run("xs | sum", xs=list(range(n))) == n * (n - 1) // 2
    rows = [{"id": i, "v": -i} for i in range(n)]
    assert _run("rows | sort('v') | map('id') | first", rows=rows) == n - 1


def _static(source: str, **data: Any) -> Any:
    root = type_of_value(data)
    t, issues = check_expression(parse_expression(source), lambda r: path_type(root, r.segments))
    assert issues == []
    return t


def test_static_result_types() -> None:
    data = {"nums": [1, 2], "words": ["a"], "nested": [[1], ["x"]], "people": [{"n": "a"}]}
    assert _static("nums | sum", **data) is NUMBER
    assert _static("nums | max", **data) == union(NUMBER, NULL)
    assert _static("words | sort", **data) == Array(STRING)
    assert _static("nums | unique", **data) == Array(NUMBER)
    assert _static("nested | flatten", **data) == Array(union(NUMBER, STRING))
    assert _static("nums | zip(words)", **data) == Array(Array(union(NUMBER, STRING)))
    assert _static("words | slice(0, 1)", **data) == Array(STRING)
    assert _static("'abc' | slice(1)", **data) is STRING
    assert _static("people | map('n')", **data) == Array(ANY)
    # a filter on a list result keeps checking: a sum is a number, so `| length` is certain to fail
    root = type_of_value(data)
    _, issues = check_expression(
        parse_expression("nums | sum | length"), lambda r: path_type(root, r.segments)
    )
    assert [i.category for i in issues] == ["type"]
