"""Evaluating expressions, sandboxed by construction.

:func:`compile_expression` turns an AST into nested closures once; running
the result does no AST dispatch. There is no ``eval``, no attribute access on
Python objects, and only the allow-listed filters of :mod:`.filters`.

Reference *resolution* is the caller's: the evaluator hands every
:class:`~chainlang.expr.ast.Ref` to a ``resolve`` callable (the interpreter
splits ``tools.now.result.iso`` into a step and a path; hooks use a
:class:`~chainlang.expr.values.DataResolver` over the payload).

Semantics (the language contract §4, decided details):

* ``==``/``!=``: JSON equality (``1 == 1.0`` is true, ``1 == true`` false,
  lists and objects deep). ``< <= > >=``: two numbers or two strings (strings
  by code point), anything else is a ``type`` error.
* ``contains``: substring / list member (JSON equality) / object key; ``a in
  b`` is ``b contains a``; ``a not in b`` is its negation, except that every
  word operator (``not in`` included) is ``false`` when its container/subject
  is null (a missing field makes a condition false, never a crash: note that
  ``not (a in b)`` is then true). ``startswith``/``endswith`` on strings.
  ``matches`` is an unanchored regex search with RE2 (linear time, so no
  catastrophic backtracking; RE2 syntax: no backreferences or look-around).
* ``+``: number + number, string + string, list + list. ``- * / %``: numbers
  only. ``/`` is true division that gives an int when both operands are ints
  and it divides exactly (``6 / 3`` is ``2``, ``7 / 2`` is ``3.5``). ``%``
  follows the sign of the divisor (``-7 % 3`` is ``2``). Division or modulo by
  zero, a result that is not a finite number and a whole-number product above
  4096 bits are ``arithmetic`` errors. Booleans are not numbers.
* ``not``, ``and``, ``or`` use truthiness and return booleans; ``and``/``or``
  short-circuit (the right side is not evaluated when the left decides).
  Apart from them and ``default``'s argument, every operand is evaluated
  (even when a null container makes a word operator false).
* Strings and lists built by an expression (``+``, ``join``, ``string``,
  ``json``, templates) hold at most 1,000,000 characters/items (``limit``).
* Paths on computed values (``(x | keys)[0]``) walk like references: a
  missing key or index gives null.
* A computed index (``x[expr]``) must give a whole number (``2.0`` counts as
  ``2``) or a string; null gives null; a boolean, list, object or fraction is
  a ``type`` error, and so is a string into a list or a number into an object
  (a literal segment that does not fit gives null). The caller's resolver
  walks a reference's computed indexes with ``walk_path(value, rest, resolve)``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from chainlang.expr.ast import (
    Binary,
    BoolOp,
    Compare,
    Expr,
    Filter,
    ListLit,
    Literal,
    Not,
    Ref,
    Subscript,
    Unary,
)
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.operators import (
    OpFailure,
    arith_kind,
    neg_message,
    order_message,
    word_check,
)
from chainlang.expr.values import (
    MAX_SIZE,
    DataResolver,
    contains_value,
    json_equal,
    kind_of,
    truthy,
    walk_path,
)

__all__ = [
    "Resolver",
    "Compiled",
    "compile_expression",
    "evaluate",
    "regex_error",
    "DataResolver",
    "walk_path",
    "truthy",
]

Resolver = Callable[[Ref], Any]
Compiled = Callable[[Resolver], Any]

MAX_INT_BITS = 4096
MAX_PATTERN_LENGTH = 10_000
REGEX_MAX_MEM = 1 << 20  # per pattern: RE2 rejects bigger programs, bounds its DFA cache


def compile_expression(expr: Expr) -> Compiled:
    """Compile an expression to ``fn(resolve) -> value``; ``fn`` raises
    :class:`ExprEvalError`. Compiling never fails: an unknown filter or a
    wrong arity raises when (and only if) it is evaluated."""
    fn = _compile(expr)
    start, end = expr.start, expr.end

    def run(resolve: Resolver) -> Any:
        try:
            return fn(resolve)
        except RecursionError:
            raise ExprEvalError("limit", "a value is nested too deeply", start, end) from None

    return run


_COMPILED: OrderedDict[int, tuple[Expr, Compiled]] = OrderedDict()


def evaluate(expr: Expr, resolve: Resolver) -> Any:
    """Evaluate ``expr``; ``resolve`` gives the value of each reference.
    Compiled forms are cached for recently seen expression objects."""
    key = id(expr)
    entry = _COMPILED.get(key)
    if entry is None or entry[0] is not expr:
        entry = (expr, compile_expression(expr))
        _COMPILED[key] = entry
        if len(_COMPILED) > 4096:
            _COMPILED.popitem(last=False)
    return entry[1](resolve)


# ---------------------------------------------------------------- helpers


def _is_num(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


def _finite(value: Any, start: int, end: int) -> Any:
    if type(value) is float and not math.isfinite(value):
        raise ExprEvalError("arithmetic", "the result is not a finite number", start, end)
    return value


def _type_error(message: str, start: int, end: int) -> ExprEvalError:
    return ExprEvalError("type", message, start, end)


def _size_error(start: int, end: int) -> ExprEvalError:
    return ExprEvalError(
        "limit", f"the result would exceed {MAX_SIZE:,} characters or items", start, end
    )


@lru_cache(maxsize=128)
def _regex(pattern: str) -> tuple[Any, str | None]:
    if len(pattern) > MAX_PATTERN_LENGTH:
        return None, f"regex is too long ({len(pattern)} characters, at most {MAX_PATTERN_LENGTH})"
    import re2

    options = re2.Options()
    options.max_mem = REGEX_MAX_MEM
    options.log_errors = False
    try:
        return re2.compile(pattern, options), None
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        reason = str(detail).split(": ", 1)[0]  # RE2 appends the offending part of the pattern
        return None, f"invalid regular expression {_show(pattern)}: {reason}"
    except (TypeError, ValueError) as exc:  # e.g. a lone surrogate
        return None, f"invalid regular expression {_show(pattern)}: {exc}"


def _show(pattern: str) -> str:
    """The pattern as written (no Python escaping), shortened."""
    return "'" + (pattern if len(pattern) <= 60 else pattern[:59] + "…") + "'"


def compile_regex(pattern: str) -> tuple[Any, str | None]:
    """An RE2 pattern (linear-time matching, bounded memory) and None, or None and why not."""
    return _regex(pattern)


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used with ``matches`` (None if it can)."""
    return _regex(pattern)[1]


# ---------------------------------------------------------------- compiler


def _compile(e: Expr) -> Callable[[Resolver], Any]:
    compiler = _COMPILERS.get(type(e))
    if compiler is None:
        raise TypeError(f"not an expression node: {e!r}")
    return compiler(e)


def _c_literal(e: Literal) -> Callable[[Resolver], Any]:
    value = e.value

    def literal(r: Resolver) -> Any:
        return value

    return literal


def _c_list(e: ListLit) -> Callable[[Resolver], Any]:
    items = tuple(_compile(i) for i in e.items)

    def list_(r: Resolver) -> Any:
        return [f(r) for f in items]

    return list_


def _c_ref(e: Ref) -> Callable[[Resolver], Any]:
    def ref(r: Resolver) -> Any:
        return r(e)

    return ref


def _c_subscript(e: Subscript) -> Callable[[Resolver], Any]:
    operand = _compile(e.operand)
    segments = e.segments

    def subscript(r: Resolver) -> Any:
        return walk_path(operand(r), segments, r)

    return subscript


def _c_unary(e: Unary) -> Callable[[Resolver], Any]:
    operand = _compile(e.operand)
    start, end = e.start, e.end

    def neg(r: Resolver) -> Any:
        v = operand(r)
        if _is_num(v) or kind_of(v) == "number":
            return -v
        raise _type_error(neg_message(kind_of(v)), start, end)

    return neg


def _c_not(e: Not) -> Callable[[Resolver], Any]:
    operand = _compile(e.operand)

    def not_(r: Resolver) -> Any:
        return not truthy(operand(r))

    return not_


def _c_boolop(e: BoolOp) -> Callable[[Resolver], Any]:
    left, right = _compile(e.left), _compile(e.right)
    if e.op == "and":

        def and_(r: Resolver) -> Any:
            return truthy(left(r)) and truthy(right(r))

        return and_

    def or_(r: Resolver) -> Any:
        return truthy(left(r)) or truthy(right(r))

    return or_


def _arith(op: str, a: Any, b: Any, start: int, end: int) -> Any:
    """``a op b`` for any values (the general path)."""
    ka, kb = kind_of(a), kind_of(b)
    try:
        kind = arith_kind(op, ka, kb)
    except OpFailure as f:
        raise _type_error(f.message, start, end) from None
    if kind == "string":
        if len(a) + len(b) > MAX_SIZE:
            raise _size_error(start, end)
        return str(a) + str(b)
    if kind == "list":
        if len(a) + len(b) > MAX_SIZE:
            raise _size_error(start, end)
        return list(a) + list(b)
    try:
        if op == "+":
            result = a + b
        elif op == "-":
            result = a - b
        elif op == "*":
            if (
                isinstance(a, int)
                and isinstance(b, int)
                and abs(a).bit_length() + abs(b).bit_length() > MAX_INT_BITS
            ):
                raise ExprEvalError(
                    "arithmetic", f"the whole-number result exceeds {MAX_INT_BITS} bits", start, end
                )
            result = a * b
        elif op == "/":
            if b == 0:
                raise ExprEvalError("arithmetic", "division by zero", start, end)
            if isinstance(a, int) and isinstance(b, int):
                quotient, remainder = divmod(a, b)
                result = quotient if remainder == 0 else a / b
            else:
                result = a / b
        else:
            if b == 0:
                raise ExprEvalError("arithmetic", "modulo by zero", start, end)
            result = a % b
    except OverflowError:
        raise ExprEvalError("arithmetic", "the result is too large for a number", start, end) from None
    return _finite(result, start, end)


def _c_binary(e: Binary) -> Callable[[Resolver], Any]:
    left, right = _compile(e.left), _compile(e.right)
    op, start, end = e.op, e.start, e.end
    if op == "+":

        def add(r: Resolver) -> Any:
            a, b = left(r), right(r)
            ta, tb = type(a), type(b)
            if ta is tb is int:
                return a + b
            if ta is tb is str and len(a) + len(b) <= MAX_SIZE:
                return a + b
            return _arith("+", a, b, start, end)

        return add
    if op == "-":

        def sub(r: Resolver) -> Any:
            a, b = left(r), right(r)
            if type(a) is int and type(b) is int:
                return a - b
            return _arith("-", a, b, start, end)

        return sub

    def arith(r: Resolver) -> Any:
        return _arith(op, left(r), right(r), start, end)

    return arith


def _c_compare(e: Compare) -> Callable[[Resolver], Any]:
    left, right = _compile(e.left), _compile(e.right)
    op, start, end = e.op, e.start, e.end
    if op == "==":

        def eq(r: Resolver) -> Any:
            return json_equal(left(r), right(r))

        return eq
    if op == "!=":

        def ne(r: Resolver) -> Any:
            return not json_equal(left(r), right(r))

        return ne
    if op in ("<", "<=", ">", ">="):
        compare = _ORDER[op]

        def order(r: Resolver) -> Any:
            a, b = left(r), right(r)
            ta, tb = type(a), type(b)
            if (ta is tb is str) or ((ta is int or ta is float) and (tb is int or tb is float)):
                return compare(a, b)
            ka, kb = kind_of(a), kind_of(b)
            if ka == kb and ka in ("number", "string"):
                return compare(a, b)
            raise _type_error(order_message(op, ka, kb), start, end)

        return order
    return _c_word(e, left, right)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _c_word(
    e: Compare, left: Callable[[Resolver], Any], right: Callable[[Resolver], Any]
) -> Callable[[Resolver], Any]:
    op, start, end = e.op, e.start, e.end

    def fail(subject: Any, other: Any) -> ExprEvalError:
        try:
            word_check(op, kind_of(subject), kind_of(other))
        except OpFailure as f:
            return _type_error(f.message, start, end)
        raise AssertionError("word_check accepted what the evaluator rejected")  # pragma: no cover

    def contains(container: Any, needle: Any) -> bool:
        if container is None:
            return False
        t = type(container)
        if t is str or (t is not dict and kind_of(container) == "string"):
            if type(needle) is str or kind_of(needle) == "string":
                return needle in container
        elif t is list or t is tuple or kind_of(container) == "list":
            return contains_value(container, needle)
        elif t is dict or kind_of(container) == "object":
            if type(needle) is str or kind_of(needle) == "string":
                return needle in container
        raise fail(container, needle)

    if op == "contains":

        def contains_(r: Resolver) -> Any:
            return contains(left(r), right(r))

        return contains_
    if op == "in":

        def in_(r: Resolver) -> Any:
            needle = left(r)
            return contains(right(r), needle)

        return in_
    if op == "not_in":

        def not_in(r: Resolver) -> Any:
            needle = left(r)
            container = right(r)
            if container is None:
                return False
            return not contains(container, needle)

        return not_in

    def strings(r: Resolver) -> tuple[str, str] | None:
        subject = left(r)
        other = right(r)
        if subject is None:
            return None
        if kind_of(subject) != "string" or kind_of(other) != "string":
            raise fail(subject, other)
        return subject, other

    if op == "startswith":

        def startswith(r: Resolver) -> Any:
            pair = strings(r)
            return pair is not None and pair[0].startswith(pair[1])

        return startswith
    if op == "endswith":

        def endswith(r: Resolver) -> Any:
            pair = strings(r)
            return pair is not None and pair[0].endswith(pair[1])

        return endswith
    assert op == "matches", op
    pattern_start, pattern_end = e.right.start, e.right.end

    def matches(r: Resolver) -> Any:
        pair = strings(r)
        if pair is None:
            return False
        compiled, problem = _regex(pair[1])
        if problem is not None:
            raise ExprEvalError("regex", problem, pattern_start, pattern_end)
        return compiled.search(pair[0]) is not None

    return matches


def _c_filter(e: Filter) -> Callable[[Resolver], Any]:
    from chainlang.expr.filters import FILTERS, arity_problem, unknown_filter_message

    ns, ne = e.name_start, e.name_end
    spec = FILTERS.get(e.name)
    problem = (
        unknown_filter_message(e.name) if spec is None else arity_problem(spec, len(e.args))
    )
    if spec is None or problem is not None:
        message = problem or ""

        def bad_filter(r: Resolver) -> Any:
            raise ExprEvalError("filter", message, ns, ne)

        return bad_filter
    operand = _compile(e.operand)
    args = tuple(_compile(a) for a in e.args)
    if spec.name == "default":
        fallback = args[0]

        def default(r: Resolver) -> Any:
            value = operand(r)
            return fallback(r) if value is None else value

        return default
    impl = spec.impl

    def call(r: Resolver) -> Any:
        value = operand(r)
        arg_values = [a(r) for a in args]
        try:
            return impl(value, *arg_values)
        except OpFailure as f:
            raise ExprEvalError(f.category, f.message, ns, ne) from None
        except ExprEvalError as x:
            raise ExprEvalError(x.category, x.message, ns, ne) from None

    return call


_COMPILERS: dict[type, Callable[[Any], Callable[[Resolver], Any]]] = {
    Literal: _c_literal,
    ListLit: _c_list,
    Ref: _c_ref,
    Subscript: _c_subscript,
    Unary: _c_unary,
    Not: _c_not,
    BoolOp: _c_boolop,
    Binary: _c_binary,
    Compare: _c_compare,
    Filter: _c_filter,
}
