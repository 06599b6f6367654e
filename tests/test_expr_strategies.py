"""Hypothesis strategies shared by the expression tests (no tests here)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from chainlang.expr import ast as A
from chainlang.expr.filters import FILTERS

NAMES = ["a", "b", "x1", "_y", "user", "items", "s", "n", "obj"]
KEYWORD_WORDS = ["and", "or", "not", "AND", "OR", "NOT", "in", "contains", "matches",
                 "startswith", "endswith", "true", "false", "null"]

# tokens for "token soup": valid ones, near misses and junk
SOUP_TOKENS = (
    NAMES
    + KEYWORD_WORDS
    + ["And", "CONTAINS", "android", "order", "notx", "index", "int", "length", "default"]
    + ["0", "1", "-1", "12", "2.5", "-0.5", "1e3", "1E-2", "01", "1.", ".5", "-", "--1"]
    + ["'a'", '"b"', "''", "'\\u00e9'", "'}'", "'{'", "'\\''", "'it\\'s'", "'", '"', "'\\d'"]
    + ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "=", "!", "&", "&&", "||"]
    + [".", ",", "|", "(", ")", "[", "]", "{", "}", ":", "#", "é", "\\"]
)

soup = st.lists(
    st.tuples(st.sampled_from(SOUP_TOKENS), st.sampled_from(["", "", " ", "  ", "\n", "\t"])),
    min_size=0,
    max_size=14,
).map(lambda items: "".join(tok + sep for tok, sep in items))

# ------------------------------------------------------------------ JSON values

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=6),
    st.sampled_from(["", "a", "ab", "Sarah", "1", "2.5", "x y", "é"]),
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(NAMES + ["k", "0"]), children, max_size=4),
    ),
    max_leaves=12,
)

json_data = st.dictionaries(st.sampled_from(NAMES), json_values, max_size=6)

# ------------------------------------------------------------------ ASTs

_segment = st.one_of(
    st.sampled_from(NAMES + KEYWORD_WORDS).map(A.Name),
    st.integers(min_value=-3, max_value=3).map(A.Index),
    st.sampled_from(["k", "a b", "it's", "}", ""]).map(A.Key),
)

_literal = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=1000),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.text(max_size=4),
).map(A.Literal)

_ref = st.tuples(st.sampled_from(NAMES), st.lists(_segment, max_size=3)).map(
    lambda t: A.Ref((A.Name(t[0]), *t[1]))
)

_FILTER_NAMES = sorted(FILTERS) + ["nope"]


def _compound(children: Any) -> Any:
    return st.one_of(
        st.lists(children, max_size=3).map(lambda items: A.ListLit(tuple(items))),
        st.tuples(children, st.lists(_segment, min_size=1, max_size=2)).map(
            lambda t: A.Subscript(t[0], tuple(t[1]))
        ),
        children.map(lambda e: A.Unary("-", e)),
        children.map(A.Not),
        st.tuples(st.sampled_from(A.ARITH_OPS), children, children).map(lambda t: A.Binary(*t)),
        st.tuples(st.sampled_from(A.COMPARE_OPS + A.WORD_OPS), children, children).map(
            lambda t: A.Compare(*t)
        ),
        st.tuples(st.sampled_from(["and", "or"]), children, children).map(lambda t: A.BoolOp(*t)),
        st.tuples(children, st.sampled_from(_FILTER_NAMES), st.lists(children, max_size=2)).map(
            lambda t: A.Filter(t[0], t[1], tuple(t[2]))
        ),
    )


expressions = st.recursive(st.one_of(_literal, _ref), _compound, max_leaves=10)


def shape(e: Any) -> Any:
    """A tree without spans, with type-exact literals (to compare trees)."""
    if isinstance(e, A.Literal):
        return ("lit", type(e.value).__name__, e.value)
    if isinstance(e, A.Name):
        return ("name", e.name)
    if isinstance(e, A.Index):
        return ("index", e.value)
    if isinstance(e, A.Key):
        return ("key", e.value)
    if isinstance(e, A.Ref):
        return ("ref", tuple(shape(s) for s in e.segments))
    if isinstance(e, A.Subscript):
        return ("sub", shape(e.operand), tuple(shape(s) for s in e.segments))
    if isinstance(e, A.ListLit):
        return ("list", tuple(shape(i) for i in e.items))
    if isinstance(e, A.Unary):
        return ("neg", shape(e.operand))
    if isinstance(e, A.Not):
        return ("not", shape(e.operand))
    if isinstance(e, A.Filter):
        return ("filter", shape(e.operand), e.name, tuple(shape(a) for a in e.args))
    return (type(e).__name__, e.op, shape(e.left), shape(e.right))
