"""The filters: an allow-list, ``name → FilterSpec``.

``x | name`` or ``x | name(arg, ...)``; arguments are full expressions. Each
spec has an arity range, an implementation on JSON values and a static
function on types (used by ``check_expression``). Implementations raise
:class:`~chainlang.expr.operators.OpFailure`; the evaluator turns that into
an ``ExprEvalError`` located at the filter name.

=========== ======================== =========================================
filter      input                    result
=========== ======================== =========================================
length      string, list, object     number of characters / items / keys
lower       string                   lower case
upper       string                   upper case
trim        string                   without leading/trailing whitespace
default(v)  anything                 ``v`` when the input is null, else the
                                     input (``v`` is evaluated only then)
join(sep)   list; sep a string       items rendered as text, joined by sep
first/last  list or string           first/last item or character; null when
                                     empty
keys        object                   list of keys (in object order)
values      object                   list of values (in object order)
int         number, numeric string   whole number, truncated toward zero
                                     (``'3.9' | int`` is 3); other strings
                                     are a ``value`` error
float       number, numeric string   number with a fraction part
string      anything                 the value as text (as in templates)
json        anything                 compact JSON text
round(n)    number; n whole, default rounded half away from zero to n
            0, -100..100             decimals (``2.5 | round`` is 3); an
                                     int when n <= 0
=========== ======================== =========================================

The list filters (``map``, ``sum``, ``min``, ``max``, ``sort``, ``unique``,
``flatten``, ``zip``, ``slice``) live in :mod:`chainlang.expr.list_filters`.

Errors: an input or argument of a type the filter does not take is ``type``;
an unknown filter or a wrong number of arguments is ``filter``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from chainlang.expr.filter_spec import FilterSpec
from chainlang.expr.list_filters import LIST_FILTERS
from chainlang.expr.operators import OpFailure
from chainlang.expr.types import (
    ANY,
    NULL,
    NUMBER,
    STRING,
    Array,
    Object,
    Type,
    kind,
    members,
    union,
)
from chainlang.expr.values import MAX_SIZE, kind_of, to_json, to_text

__all__ = ["FilterSpec", "FILTERS", "arity_problem", "unknown_filter_message", "filter_names"]


def _fail(name: str, wanted: str, got: str) -> OpFailure:
    return OpFailure("type", f"filter '{name}' needs {wanted}, got {got}")


def _need(name: str, value: Any, kinds: tuple[str, ...], wanted: str) -> str:
    k = kind_of(value)
    if k not in kinds:
        raise _fail(name, wanted, k)
    return k


def _static_need(name: str, t: Type, kinds: tuple[str, ...], wanted: str) -> str | None:
    k = kind(t)
    if k is not None and k not in kinds:
        raise _fail(name, wanted, k)
    return k


def _static_arg(name: str, arg: Type, kinds: tuple[str, ...], wanted: str) -> None:
    """Fails when every member of the argument's type is known and wrong."""
    found = [kind(m) for m in members(arg)]
    if all(k is not None and k not in kinds for k in found):
        raise OpFailure("type", f"filter '{name}' needs {wanted}, got {found[0]}")


def _check_size(name: str, size: int) -> None:
    if size > MAX_SIZE:
        raise OpFailure("limit", f"filter '{name}' would build more than {MAX_SIZE:,} items or characters")


# ---------------------------------------------------------------- implementations

_STR = ("string",)
_INT_RE = re.compile(r"[ \t\r\n]*[+-]?[0-9]+[ \t\r\n]*")
_FLOAT_RE = re.compile(
    r"[ \t\r\n]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t\r\n]*"
)


def _length(v: Any) -> int:
    _need("length", v, ("string", "list", "object"), "a string, list or object")
    return len(v)


def _lower(v: Any) -> str:
    _need("lower", v, _STR, "a string")
    return str(v).lower()


def _upper(v: Any) -> str:
    _need("upper", v, _STR, "a string")
    return str(v).upper()


def _trim(v: Any) -> str:
    _need("trim", v, _STR, "a string")
    return str(v).strip()


def _default(v: Any, fallback: Any) -> Any:
    return fallback if v is None else v


def _join(v: Any, sep: Any) -> str:
    _need("join", v, ("list",), "a list")
    if kind_of(sep) != "string":
        raise OpFailure("type", f"filter 'join' needs a string separator, got {kind_of(sep)}")
    texts = [to_text(item) for item in v]
    _check_size("join", sum(map(len, texts)) + len(sep) * max(len(texts) - 1, 0))
    return str(sep).join(texts)


def _first(v: Any) -> Any:
    _need("first", v, ("list", "string"), "a list or string")
    return v[0] if len(v) else None


def _last(v: Any) -> Any:
    _need("last", v, ("list", "string"), "a list or string")
    return v[-1] if len(v) else None


def _keys(v: Any) -> list[str]:
    _need("keys", v, ("object",), "an object")
    return list(v.keys())


def _values(v: Any) -> list[Any]:
    _need("values", v, ("object",), "an object")
    return list(v.values())


def _parse_number(name: str, text: str) -> int | float:
    if len(text) > 4000:
        raise OpFailure("value", f"filter '{name}': the string is too long to be a number")
    if _INT_RE.fullmatch(text):
        return int(text)
    if _FLOAT_RE.fullmatch(text):
        value = float(text)
        if not math.isfinite(value):
            raise OpFailure("value", f"filter '{name}': {text.strip()!r} is out of range")
        return value
    shown = text if len(text) <= 40 else text[:37] + "..."
    raise OpFailure("value", f"filter '{name}': {shown!r} is not a number")


def _int(v: Any) -> int:
    k = _need("int", v, ("number", "string"), "a number or a numeric string")
    number = _parse_number("int", v) if k == "string" else v
    if isinstance(number, int):
        return int(number)
    if not math.isfinite(number):
        raise OpFailure("value", "filter 'int': the number is not finite")
    return int(number)


def _float(v: Any) -> float:
    k = _need("float", v, ("number", "string"), "a number or a numeric string")
    number = _parse_number("float", v) if k == "string" else v
    try:
        result = float(number)
    except OverflowError:
        raise OpFailure("value", "filter 'float': the number is too large") from None
    if not math.isfinite(result):
        raise OpFailure("value", "filter 'float': the number is not finite")
    return result


def _string(v: Any) -> str:
    text = to_text(v)
    _check_size("string", len(text))
    return text


def _json(v: Any) -> str:
    text = to_json(v)
    _check_size("json", len(text))
    return text


def _round(v: Any, digits: Any = 0) -> int | float:
    _need("round", v, ("number",), "a number")
    if type(digits) is not int:
        got = kind_of(digits)
        if got == "number":
            got = "a number with a fraction"
        raise OpFailure("type", f"filter 'round' needs a whole number of digits, got {got}")
    if not -100 <= digits <= 100:
        raise OpFailure("value", "filter 'round': digits must be between -100 and 100")
    if isinstance(v, int):
        if digits >= 0:
            return int(v)
        q = 10**-digits
        magnitude = int((abs(v) + q // 2) // q * q)
        return magnitude if v >= 0 else -magnitude
    if not math.isfinite(v):
        raise OpFailure("value", "filter 'round': the number is not finite")
    with localcontext() as ctx:
        ctx.prec = 1000
        exact = Decimal(repr(v)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if digits <= 0:
        return int(exact)
    return float(exact)


# ---------------------------------------------------------------- static


def _s_length(t: Type, args: list[Type]) -> Type:
    _static_need("length", t, ("string", "list", "object"), "a string, list or object")
    return NUMBER


def _s_string_to_string(name: str) -> Callable[[Type, list[Type]], Type]:
    def static(t: Type, args: list[Type]) -> Type:
        _static_need(name, t, _STR, "a string")
        return STRING

    return static


def _s_default(t: Type, args: list[Type]) -> Type:
    if t is NULL:
        return args[0]
    if t is ANY:
        return ANY
    return t


def _s_join(t: Type, args: list[Type]) -> Type:
    _static_need("join", t, ("list",), "a list")
    _static_arg("join", args[0], _STR, "a string separator")
    return STRING


def _s_first_last(name: str) -> Callable[[Type, list[Type]], Type]:
    def static(t: Type, args: list[Type]) -> Type:
        k = _static_need(name, t, ("list", "string"), "a list or string")
        if k is None:
            return ANY
        if isinstance(t, Array):
            return union(t.item, NULL)
        return union(STRING, NULL)

    return static


def _s_keys(t: Type, args: list[Type]) -> Type:
    _static_need("keys", t, ("object",), "an object")
    return Array(STRING)


def _s_values(t: Type, args: list[Type]) -> Type:
    _static_need("values", t, ("object",), "an object")
    if isinstance(t, Object) and t.strict and t.props:
        return Array(union(*t.props.values()))
    return Array(ANY)


def _s_number(name: str) -> Callable[[Type, list[Type]], Type]:
    def static(t: Type, args: list[Type]) -> Type:
        _static_need(name, t, ("number", "string"), "a number or a numeric string")
        return NUMBER

    return static


def _s_text(t: Type, args: list[Type]) -> Type:
    return STRING


def _s_round(t: Type, args: list[Type]) -> Type:
    _static_need("round", t, ("number",), "a number")
    if args:
        _static_arg("round", args[0], ("number",), "a whole number of digits")
    return NUMBER


FILTERS: dict[str, FilterSpec] = {
    spec.name: spec
    for spec in (
        FilterSpec("length", 0, 0, _length, _s_length, "number of characters, items or keys"),
        FilterSpec("lower", 0, 0, _lower, _s_string_to_string("lower"), "lower case"),
        FilterSpec("upper", 0, 0, _upper, _s_string_to_string("upper"), "upper case"),
        FilterSpec("trim", 0, 0, _trim, _s_string_to_string("trim"), "strip surrounding whitespace"),
        FilterSpec("default", 1, 1, _default, _s_default, "a fallback for null"),
        FilterSpec("join", 1, 1, _join, _s_join, "join list items as text"),
        FilterSpec("first", 0, 0, _first, _s_first_last("first"), "first item or character"),
        FilterSpec("last", 0, 0, _last, _s_first_last("last"), "last item or character"),
        FilterSpec("keys", 0, 0, _keys, _s_keys, "keys of an object"),
        FilterSpec("values", 0, 0, _values, _s_values, "values of an object"),
        FilterSpec("int", 0, 0, _int, _s_number("int"), "whole number"),
        FilterSpec("float", 0, 0, _float, _s_number("float"), "number"),
        FilterSpec("string", 0, 0, _string, _s_text, "the value as text"),
        FilterSpec("json", 0, 0, _json, _s_text, "compact JSON text"),
        FilterSpec("round", 0, 1, _round, _s_round, "round half away from zero"),
        *LIST_FILTERS,
    )
}


def filter_names() -> list[str]:
    return sorted(FILTERS)


def unknown_filter_message(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, FILTERS, n=1, cutoff=0.6)
    if not close:
        close = [n for n in FILTERS if n.lower() == name.lower()]
    if close:
        return f"unknown filter '{name}'; did you mean '{close[0]}'?"
    return f"unknown filter '{name}'; the filters are: {', '.join(filter_names())}"


def _arguments(n: int) -> str:
    return f"{n} argument" if n == 1 else f"{n} arguments"


def arity_problem(spec: FilterSpec, count: int) -> str | None:
    """A message when ``count`` arguments do not fit the filter, else None."""
    if spec.min_args <= count <= spec.max_args:
        return None
    if spec.max_args == 0:
        takes = "no arguments"
    elif spec.min_args == spec.max_args:
        takes = _arguments(spec.min_args)
    elif spec.min_args == 0:
        takes = f"at most {_arguments(spec.max_args)}"
    else:
        takes = f"{spec.min_args} to {spec.max_args} arguments"
    return f"filter '{spec.name}' takes {takes}, got {count}"
