"""The expression parser: Lark equivalence, spans, errors, hints, limits,
the shipped LALR tables, speed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlang.expr import ast as A
from chainlang.expr import parse_expression, parse_template
from chainlang.expr._lalr import build_tables, grammar_sha256, grammar_text, lark_parser
from chainlang.expr.errors import ExprSyntaxError
from chainlang.expr.parser import Builder, _fast_ref, _parse

try:
    from test_expr_strategies import expressions, shape, soup
except ImportError:  # pytest's importlib mode does not put tests/ on sys.path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_expr_strategies import expressions, shape, soup

# CHAINLANG_FUZZ_EXAMPLES=5000 for a long local run
EXAMPLES = int(os.environ.get("CHAINLANG_FUZZ_EXAMPLES", "150"))

# ------------------------------------------------------------------ Lark as the reference


@pytest.fixture(scope="module")
def lark_reference() -> Any:
    """Lark itself parsing the grammar, building the AST with the same
    builder (keep_all_tokens: the builder expects every token)."""
    import lark

    class LarkBuilder(lark.Transformer, Builder):  # type: ignore[misc]
        pass

    return lark_parser(keep_all_tokens=True, transformer=LarkBuilder())


def _lark_outcome(parser: Any, text: str) -> tuple[str, Any]:
    import lark

    try:
        return "ok", A.dump(parser.parse(text))
    except ExprSyntaxError as exc:  # raised by the builder (escapes, indexes)
        return "error", exc.offset
    except lark.exceptions.UnexpectedToken as exc:
        if exc.token.type == "$END":
            return "error", len(text)
        return "error", exc.token.start_pos
    except lark.exceptions.UnexpectedCharacters as exc:
        return "error", exc.pos_in_stream
    except lark.exceptions.UnexpectedEOF:
        return "error", len(text)


def _our_outcome(text: str) -> tuple[str, Any]:
    try:
        return "ok", A.dump(_parse(text))
    except ExprSyntaxError as exc:
        return "error", exc.offset


PARSE_EXAMPLES = [
    "a.b[0]['k'] | length > 2",
    "not a in b",
    "a not in b",
    "a NOT in b",
    "-3 | string",
    "- 3 | string",
    "-x | length",
    "a-1",
    "a -1",
    "2--2",
    "x.and.not.true",
    "(a)[0].b",
    "{a} > 1",
    "{ {a} + 1 }",
    "a | default(1, 2)",
    "android and order",
    "[1,-2,3][0]",
    "x | f()",
    "a or b and c",
    "'\\u00e9\\n' + \"\\\"\"",
    "x matches '\\d+'",
    "user . name",
    "user .name[ 0 ]",
    "a.b .c",
    "a[0] [1]",
    "f(1)",
    "a < b < c",
    "",
    "x == in",
    "{}",
    "x[1.5]",
    "'\\ud800'",
    "a b",
    "[1, 2",
    "1 +",
    "a |",
]


@pytest.mark.parametrize("text", PARSE_EXAMPLES)
def test_same_as_lark_examples(lark_reference: Any, text: str) -> None:
    assert _our_outcome(text) == _lark_outcome(lark_reference, text)


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(soup)
def test_same_as_lark_on_token_soup(lark_reference: Any, text: str) -> None:
    assert _our_outcome(text) == _lark_outcome(lark_reference, text)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, st.sampled_from(["", " ", "\n"]))
def test_same_as_lark_on_valid_expressions(lark_reference: Any, expr: A.Expr, pad: str) -> None:
    text = A.unparse(expr)
    if pad:
        text = text.replace(" ", pad + " " + pad)
    ours = _our_outcome(text)
    assert ours == _lark_outcome(lark_reference, text)


@settings(max_examples=EXAMPLES, deadline=None)
@given(expressions)
def test_unparse_round_trip(expr: A.Expr) -> None:
    text = A.unparse(expr)
    try:
        parsed = parse_expression(text)
    except ExprSyntaxError as exc:
        assert exc.category == "limit", (text, exc)
        return
    assert shape(parsed) == shape(expr)


def test_fast_path_builds_what_the_parser_builds() -> None:
    for text in [
        "a",
        "tools.now.result.iso",
        "team.members[0].result",
        "x[-1]['any key'][\"k\"]",
        "  a.b  ",
        "\na.in.not\t",
        "x['']",
        "x[-0]",
    ]:
        fast = _fast_ref(text)
        assert fast is not None, text
        assert A.dump(fast) == A.dump(_parse(text)), text
    for text in ["true", "in", "a . b", "a[ 0 ]", "a['\\n']", "a[1.5]", "a.0", "a b", "a[01]"]:
        assert _fast_ref(text) is None, text


# ------------------------------------------------------------------ tables


def test_shipped_tables_match_the_grammar() -> None:
    from chainlang.expr import _tables

    text = grammar_text()
    assert _tables.GRAMMAR_SHA256 == grammar_sha256(text), (
        "chainlang/expr/_tables.py is stale: run `python -m chainlang.expr._lalr`"
    )
    built = build_tables(text)
    assert built.states == _tables.STATES
    assert built.rules == _tables.RULES
    assert (built.start, built.end) == (_tables.START, _tables.END)


def test_stale_tables_fall_back_to_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    from chainlang.expr import _lalr, _tables

    monkeypatch.setattr(_tables, "GRAMMAR_SHA256", "stale")
    _lalr.load_tables.cache_clear()
    try:
        tables = _lalr.load_tables()
        assert tables.states == _tables.STATES and tables.states is not _tables.STATES
    finally:
        _lalr.load_tables.cache_clear()


def test_lark_is_not_imported_for_parsing() -> None:
    code = (
        "import sys\n"
        "from chainlang.expr import parse_template, parse_expression, evaluate, check_expression\n"
        "parse_template('Hi {user.name | upper}, {a.b[0]}')\n"
        "parse_expression(\"sender contains 'x' and (n | length) > 2\")\n"
        "assert 'lark' not in sys.modules, 'lark imported'\n"
        "assert 're2' not in sys.modules, 're2 imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ spans


def test_spans() -> None:
    e = parse_expression("items | length > 2")
    assert isinstance(e, A.Compare) and (e.start, e.end) == (0, 18)
    f = e.left
    assert isinstance(f, A.Filter)
    assert (f.start, f.end, f.name_start, f.name_end) == (0, 14, 8, 14)
    r = parse_expression("team.members[-1]['k'].x")
    assert isinstance(r, A.Ref)
    assert [(s.start, s.end) for s in r.segments] == [(0, 4), (5, 12), (12, 16), (16, 21), (22, 23)]
    assert r.segments[2] == A.Index(-1, 12, 16)
    assert r.dotted() == "team.members[-1]['k'].x"
    n = parse_expression("not x")
    assert isinstance(n, A.Not) and (n.start, n.end) == (0, 5)
    u = parse_expression("- x")
    assert isinstance(u, A.Unary) and (u.start, u.end) == (0, 3)
    lst = parse_expression("[1, 'a']")
    assert isinstance(lst, A.ListLit) and (lst.start, lst.end) == (0, 8)
    call = parse_expression("x | default(1)")
    assert isinstance(call, A.Filter) and call.end == 14


def test_iter_refs_includes_filter_arguments() -> None:
    e = parse_expression("a.b | default(c | join(d)) + [e][0] and not f")
    assert [r.dotted() for r in A.iter_refs(e)] == ["a.b", "c", "d", "e", "f"]
    t = parse_template("x {a} y {b | default(c)}")
    assert [r.dotted() for r in A.iter_template_refs(t)] == ["a", "b", "c"]


def test_memoised() -> None:
    assert parse_expression("a + b") is parse_expression("a + b")
    assert parse_template("x {a}") is parse_template("x {a}")


# ------------------------------------------------------------------ errors and hints


@pytest.mark.parametrize(
    ("text", "offset", "hint"),
    [
        ("a < b < c", 6, "comparisons do not chain"),
        ("a == b contains c", 7, "comparisons do not chain"),
        ("f(1)", 1, "no function calls"),
        ("a || b", 3, "'or'"),
        ("a && b", 2, "'and'"),
        ("!a", 0, "'not'"),
        ("a = b", 2, "'=='"),
        ("a CONTAINS b", 2, "lower case: 'contains'"),
        ("{}", 1, "no object literals"),
        ("{a: 1}", 2, "no object literals"),
        ("x.0", 2, "x[0]"),
        ("x[]", 2, "between the brackets"),
        ("a b", 2, "operator missing"),
        ("'abc", 0, "close the string"),
        ("x == in", 5, "reserved word"),
        ("contains > 1", 0, "reserved word"),
    ],
)
def test_syntax_errors_have_offsets_and_hints(text: str, offset: int, hint: str) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_expression(text)
    assert info.value.category == "syntax"
    assert info.value.offset == offset
    assert info.value.hint is not None and hint in info.value.hint


def test_messages_name_what_was_expected() -> None:
    with pytest.raises(ExprSyntaxError, match="unexpected end of expression; expected a value"):
        parse_expression("1 +")
    with pytest.raises(ExprSyntaxError, match="expected a filter name"):
        parse_expression("x |")
    with pytest.raises(ExprSyntaxError, match="empty expression"):
        parse_expression("  ")
    with pytest.raises(ExprSyntaxError, match=r"expected an operator, '\]' or ','"):
        parse_expression("[1 2]")


def test_template_errors_are_located_in_the_template() -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_template("Hello {user.name | }!")
    assert info.value.offset == 19
    with pytest.raises(ExprSyntaxError) as info:
        parse_template("a } b")
    assert info.value.offset == 2 and "}}" in (info.value.hint or "")
    with pytest.raises(ExprSyntaxError) as info:
        parse_template("x {a")
    assert info.value.offset == 2 and "'{' is not closed" in info.value.message


def test_template_structure() -> None:
    t = parse_template("Hi {user.name}, {{x}} {n | length}")
    assert t.parts[0] == "Hi "
    assert t.parts[2] == ", {x} "
    first, second = t.embedded
    assert first.offset == 4 and isinstance(first.expr, A.Ref)
    assert second.offset == 23 and isinstance(second.expr, A.Filter)
    assert t.single is None and not t.is_literal
    single = parse_template("{ a.b }")
    assert single.single is not None and single.parts[0].offset == 1  # type: ignore[union-attr]
    literal = parse_template("plain {{text}}")
    assert literal.is_literal and literal.text == "plain {text}" and literal.single is None
    assert parse_template("").parts == ()


# ------------------------------------------------------------------ limits


def test_length_limit() -> None:
    text = "a + " * 1024 + "1"
    assert len(text) > 4096
    with pytest.raises(ExprSyntaxError) as info:
        parse_expression(text)
    assert info.value.category == "limit" and info.value.offset == 4096
    with pytest.raises(ExprSyntaxError) as info:
        parse_template("ok {" + text + "}")
    assert info.value.category == "limit" and info.value.offset == 4 + 4096


@pytest.mark.parametrize(
    "text",
    [
        "not " * 2000 + "x",
        "-" * 4000 + "1",
        "[" * 2000 + "]" * 2000,
        "(" * 2000 + "1" + ")" * 2000,
        "x" + " | length" * 450,
        "1" + " + 1" * 1000,
        "a" + ".b" * 2000,
    ],
)
def test_deep_input_never_overflows_the_stack(text: str) -> None:
    text = text[:4096]
    try:
        e = parse_expression(text)
    except ExprSyntaxError as exc:
        assert exc.category in ("limit", "syntax")
        return
    assert A.depth(e) <= 64


def test_depth_limit_boundary() -> None:
    parse_expression("not " * 63 + "x")
    with pytest.raises(ExprSyntaxError) as info:
        parse_expression("not " * 64 + "x")
    assert info.value.category == "limit"


# ------------------------------------------------------------------ speed


def test_parsing_is_fast() -> None:
    texts = []
    for i in range(2000):
        kind = i % 6
        if kind == 0:
            texts.append(f"Scheduled meeting number {i}")
        elif kind in (1, 2):
            texts.append(f"{{step_{i}.result.items[0].name}}")
        elif kind == 3:
            texts.append(f"Hello {{inputs.name_{i}}}, at {{tools.now_{i}.result.iso}}")
        elif kind == 4:
            texts.append(f"{{email_{i}.search.result.matches | length}} > 0")
        else:
            texts.append(f"sender contains 'Sarah {i}' AND (subject contains 'b' OR body contains 'b')")
    start = time.process_time()  # CPU time: the parser's cost, whatever else the machine runs
    for text in texts:
        parse_template(text)
    elapsed = time.process_time() - start
    # measured at ~30 ms on a slow CI box; the bound only catches a collapse
    assert elapsed < 1.0, elapsed
