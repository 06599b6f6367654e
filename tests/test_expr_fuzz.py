"""Property tests: no input makes the expression language crash or hang, and
the static checker only reports what is certain."""

from __future__ import annotations

import pytest

import os
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlang.expr import (
    DataResolver,
    ExprEvalError,
    ExprSyntaxError,
    check_expression,
    check_template,
    evaluate,
    parse_expression,
    parse_template,
    path_type,
    render_template,
    to_json,
    type_of_value,
)
from chainlang.expr import ast as A

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

try:
    from test_expr_strategies import expressions, json_data, soup
except ImportError:  # pytest's importlib mode does not put tests/ on sys.path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_expr_strategies import expressions, json_data, soup

# CHAINLANG_FUZZ_EXAMPLES=5000 for a long local run
EXAMPLES = int(os.environ.get("CHAINLANG_FUZZ_EXAMPLES", "150"))

FAST = settings(
    max_examples=EXAMPLES,
    deadline=500,  # milliseconds, per example: nothing may hang
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

any_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="{}'\"\\ |()[].,-+*/%<>=!&:#aeinotu0123456789_", max_size=60),
    soup,
    soup.map(lambda s: "{" + s + "}"),
    soup.map(lambda s: "x {" + s + "} y {{" + s),
)


def _parse_or_syntax_error(fn: Any, text: str) -> Any:
    try:
        return fn(text)
    except ExprSyntaxError as exc:
        assert exc.category in ("syntax", "limit")
        assert 0 <= exc.offset <= len(text)
        assert exc.message
        return None


@FAST
@given(any_text)
def test_parse_expression_returns_or_raises_syntax_error(text: str) -> None:
    expr = _parse_or_syntax_error(parse_expression, text)
    if expr is not None:
        for node in A.iter_nodes(expr):
            assert 0 <= node.start <= node.end <= len(text)


@FAST
@given(any_text)
def test_parse_template_returns_or_raises_syntax_error(text: str) -> None:
    template = _parse_or_syntax_error(parse_template, text)
    if template is not None:
        for part in template.embedded:
            assert 0 < part.offset <= len(text)
            assert text[part.offset - 1] == "{"


@FAST
@given(st.text(max_size=30).map(lambda s: s * 200))
def test_long_text_is_rejected_or_parsed_quickly(text: str) -> None:
    _parse_or_syntax_error(parse_expression, text)
    _parse_or_syntax_error(parse_template, text)


def _is_json(value: Any) -> bool:
    try:
        to_json(value)
    except ExprEvalError as exc:
        return exc.category == "limit"
    return True


@FAST
@given(expressions, json_data)
def test_evaluation_returns_or_raises_eval_error(expr: A.Expr, data: dict[str, Any]) -> None:
    text = A.unparse(expr)
    parsed = _parse_or_syntax_error(parse_expression, text)
    if parsed is None:
        return
    try:
        value = evaluate(parsed, DataResolver(data))
    except ExprEvalError as exc:
        assert exc.category in ("type", "value", "arithmetic", "filter", "regex", "limit")
        assert 0 <= exc.start <= exc.end <= len(text)
        return
    assert _is_json(value)


@FAST
@given(any_text, json_data)
def test_rendering_random_templates(text: str, data: dict[str, Any]) -> None:
    template = _parse_or_syntax_error(parse_template, text)
    if template is None:
        return
    try:
        render_template(template, DataResolver(data))
    except ExprEvalError as exc:
        assert 0 <= exc.start <= exc.end <= len(text)
    root = type_of_value(data)
    check_template(template, lambda ref: path_type(root, ref.segments))


def _fully_evaluated(expr: A.Expr) -> bool:
    """Every sub-expression is evaluated (no short-circuit, no lazy default)."""
    for node in A.iter_nodes(expr):
        if isinstance(node, A.BoolOp):
            return False
        if isinstance(node, A.Filter) and node.name == "default":
            return False
    return True


@settings(
    max_examples=EXAMPLES * 2,
    deadline=500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(expressions, json_data)
def test_static_issues_are_certain(expr: A.Expr, data: dict[str, Any]) -> None:
    """With exact types (from the data itself), a `type` or `filter` issue
    means evaluation fails on that data."""
    text = A.unparse(expr)
    parsed = _parse_or_syntax_error(parse_expression, text)
    if parsed is None:
        return
    root = type_of_value(data)
    _, issues = check_expression(parsed, lambda ref: path_type(root, ref.segments))
    for issue in issues:
        assert 0 <= issue.start <= issue.end <= len(text)
    certain = [i for i in issues if i.category in ("type", "filter")]
    if not certain or not _fully_evaluated(parsed):
        return
    try:
        value = evaluate(parsed, DataResolver(data))
    except ExprEvalError:
        return
    raise AssertionError(f"static checker reported {certain} but {text!r} gave {value!r}")
