"""The expression compliance suite: tests/expr/compliance/*.json.

Each file is a list of groups ``{"description", "given", "cases"}``. A case is
``{"expr": ..., "result": ...}``, ``{"expr": ..., "error": category}``, or
the same with ``"template"`` instead of ``"expr"``. Optional keys:
``"offset"`` (a syntax error's offset), ``"static"`` (the category the static
checker must report, or ``null`` for "reports nothing"). References resolve
against ``given`` (DataResolver); for the static checker their types are
taken from ``given`` with ``type_of_value``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
    type_of_value,
)
from chainlang.expr.errors import CATEGORIES

SUITE = Path(__file__).parent / "expr" / "compliance"


def _cases() -> list[Any]:
    params = []
    for path in sorted(SUITE.glob("*.json")):
        groups = json.loads(path.read_text(encoding="utf-8"))
        for g, group in enumerate(groups):
            for i, case in enumerate(group["cases"]):
                source = case.get("expr", case.get("template"))
                shown = source if len(source) <= 50 else source[:47] + "..."
                kind = "expr" if "expr" in case else "template"
                case_id = f"{path.stem}:{g}:{i}:{kind}:{shown}"
                params.append(pytest.param(group["given"], case, id=case_id))
    return params


CASES = _cases()


def _exact(value: Any) -> str:
    """JSON text that tells 1 from 1.0 and true (and keeps key order)."""
    return json.dumps(value, ensure_ascii=False)


def test_suite_is_big_enough() -> None:
    assert len(CASES) >= 200
    categories = set()
    for param in CASES:
        case = param.values[1]
        if "error" in case:
            categories.add(case["error"])
        if case.get("static"):
            categories.add(case["static"])
    assert categories == set(CATEGORIES)


@pytest.mark.parametrize(("given", "case"), CASES)
def test_evaluator(given: dict[str, Any], case: dict[str, Any]) -> None:
    assert set(case) <= {"expr", "template", "result", "error", "offset", "static"}, case
    resolve = DataResolver(given)
    is_template = "template" in case
    source = case["template"] if is_template else case["expr"]
    if "error" in case:
        category = case["error"]
        with pytest.raises((ExprSyntaxError, ExprEvalError)) as info:
            if is_template:
                render_template(parse_template(source), resolve)
            else:
                evaluate(parse_expression(source), resolve)
        error = info.value
        assert error.category == category, f"{type(error).__name__}: {error}"
        if category in ("syntax", "limit") and isinstance(error, ExprSyntaxError):
            assert 0 <= error.offset <= len(source)
        if "offset" in case:
            assert isinstance(error, ExprSyntaxError), error
            assert error.offset == case["offset"], str(error)
        if isinstance(error, ExprEvalError):
            assert 0 <= error.start <= error.end <= len(source), repr(error)
        return
    if is_template:
        value = render_template(parse_template(source), resolve)
    else:
        value = evaluate(parse_expression(source), resolve)
    assert _exact(value) == _exact(case["result"])


STATIC_CASES = [p for p in CASES if "static" in p.values[1]]


@pytest.mark.parametrize(("given", "case"), STATIC_CASES)
def test_static_checker(given: dict[str, Any], case: dict[str, Any]) -> None:
    root = type_of_value(given)

    def ref_type(ref: Any) -> Any:
        return path_type(root, ref.segments)

    if "template" in case:
        source = case["template"]
        _, issues = check_template(parse_template(source), ref_type)
    else:
        source = case["expr"]
        _, issues = check_expression(parse_expression(source), ref_type)
    expected = case["static"]
    if expected is None:
        assert issues == []
    else:
        assert expected in {i.category for i in issues}, issues
        for issue in issues:
            assert 0 <= issue.start <= issue.end <= len(source), issue
            assert issue.message
