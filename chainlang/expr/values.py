"""JSON values as the expression language sees them: kinds, truthiness,
equality, text rendering and path walking. Shared by the evaluator, the
filters and the templates.

Values are JSON values as Python builds them (``json.loads``): ``None``,
``bool``, ``int``, ``float``, ``str``, ``list``, ``dict``; a ``tuple`` counts
as a list. Anything else is "not a JSON value" and makes an operator or filter
fail with a ``type`` error: no attribute of a Python object is ever read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chainlang.expr.ast import Computed, Index, Name, Segment
from chainlang.expr.errors import ExprEvalError

__all__ = [
    "MAX_SIZE",
    "kind_of",
    "truthy",
    "json_equal",
    "to_text",
    "to_json",
    "walk_path",
    "index_value",
    "contains_value",
    "DataResolver",
]

#: most characters of a string and items of a list an expression may build
MAX_SIZE = 1_000_000


def kind_of(value: Any) -> str:
    """``null``, ``boolean``, ``number``, ``string``, ``list``, ``object``, or
    ``unsupported`` for a Python value that is not JSON."""
    t = type(value)
    if t is str:
        return "string"
    if value is None:
        return "null"
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is list or t is tuple:
        return "list"
    if t is dict:
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "unsupported"


def truthy(value: Any) -> bool:
    """``null``, ``false``, ``0`` (and ``0.0``), ``""``, ``[]`` and ``{}`` are
    false; every other value is true."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    t = type(value)
    if t is int or t is float:
        return bool(value != 0)
    if t is str or t is list or t is dict or t is tuple:
        return len(value) > 0
    kind = kind_of(value)
    if kind == "number":
        return bool(value != 0)
    if kind in ("string", "list", "object"):
        return len(value) > 0
    return True


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` is true, ``1 == true`` is false, lists and
    objects compare deeply (object key order does not matter)."""
    if a is b:
        return True
    ka = kind_of(a)
    if ka != kind_of(b):
        return False
    if ka == "list":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ka == "object":
        if len(a) != len(b):
            return False
        for key, value in a.items():
            if key not in b or not json_equal(value, b[key]):
                return False
        return True
    if ka == "unsupported":
        return False
    return bool(a == b)


def contains_value(items: Iterable[Any], needle: Any) -> bool:
    """List membership by JSON equality."""
    t = type(needle)
    if t is str:
        return any(type(x) is str and x == needle for x in items)
    return any(json_equal(x, needle) for x in items)


def to_json(value: Any) -> str:
    """Compact JSON text (``separators=(",", ":")``, non-ASCII kept)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ValueError) and "digits" in str(exc):
            raise ExprEvalError("limit", "number too large to render as text") from None
        if isinstance(exc, ValueError) and "Circular" in str(exc):
            raise ExprEvalError("value", "value contains itself") from None
        if isinstance(exc, ValueError):
            raise ExprEvalError("value", "value is not a finite number") from None
        raise ExprEvalError("type", f"not a JSON value: {exc}") from None
    except RecursionError:
        raise ExprEvalError("limit", "value is nested too deeply to render") from None


def to_text(value: Any) -> str:
    """A value rendered as text (templates, ``join``, ``string``): strings as
    they are, ``null`` as the empty string, ``true``/``false``, numbers as JSON,
    lists and objects as compact JSON (``json.dumps(v, separators=(",", ":"),
    ensure_ascii=False)``)."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        try:
            return str(value)
        except ValueError:
            raise ExprEvalError("limit", "number too large to render as text") from None
    if isinstance(value, str):
        return str(value)
    return to_json(value)


def walk_path(value: Any, segments: Iterable[Segment], resolve: Any = None) -> Any:
    """Walk a JSON value along path segments: ``.name`` and ``['key']`` index
    objects, ``[n]`` indexes lists (negative ``n`` counts from the end). A
    missing key, an out-of-range index or a segment that does not fit the
    value (a key on a list, an index on an object or a string) gives
    ``None``.

    A computed index (``[expr]``) is evaluated with ``resolve`` (the
    evaluator's resolver) and then walks as the literal index would, except
    that its kind must fit the value: a string into a list or a number into an
    object is a ``type`` error (see :func:`index_value`)."""
    for seg in segments:
        if value is None:
            return None
        if type(seg) is Computed:
            index = computed_index(seg, resolve)
            if index is None:
                return None
            value = step_computed(value, index, seg)
            continue
        if type(seg) is Index:
            if isinstance(value, (list, tuple)):
                i = seg.value
                n = len(value)
                if -n <= i < n:
                    value = value[i]
                    continue
            return None
        key = seg.name if type(seg) is Name else seg.value  # type: ignore[union-attr]
        if isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def index_value(value: Any, start: int, end: int) -> int | str | None:
    """The index a computed ``[expr]`` gave: a whole number (``2.0`` counts as
    ``2``), a string, or None for null (the path then gives null, as a missing
    key does). Anything else is a ``type`` error."""
    t = type(value)
    if t is int or t is str or value is None:
        return value  # type: ignore[no-any-return]
    kind = kind_of(value)
    if kind == "number":
        if value == int(value):
            return int(value)
        raise ExprEvalError("type", f"the index {value!r} is not a whole number; make it one: x[i | int]",
                            start, end)
    if kind == "string":
        return str(value)
    raise ExprEvalError(
        "type", f"an index must be a whole number (into a list) or a string (into an object), not {_a(kind)}",
        start, end,
    )


def computed_index(seg: Computed, resolve: Any) -> int | str | None:
    """Evaluate a computed index with the evaluator's resolver."""
    if resolve is None:  # a caller walked a computed path without a resolver: a bug
        raise ExprEvalError("reference", "a computed index needs a resolver (internal error)",
                            seg.start, seg.end)
    from chainlang.expr.evaluate import evaluate

    return index_value(evaluate(seg.expr, resolve), seg.start, seg.end)


def step_computed(value: Any, index: int | str, seg: Computed) -> Any:
    """One computed index into ``value``: out of range or a missing key gives
    None; a string into a list or a number into an object is a ``type``
    error (a literal segment would silently give null: a computed one usually
    means a value of the wrong kind, like an id ``"2"`` read as text)."""
    if isinstance(value, (list, tuple)):
        if type(index) is str:
            raise ExprEvalError(
                "type", f"a list is indexed by a whole number, not by the string {_show(index)}; "
                "convert it: x[i | int]", seg.start, seg.end,
            )
        assert type(index) is int
        n = len(value)
        return value[index] if -n <= index < n else None
    if isinstance(value, dict):
        if type(index) is not str:
            raise ExprEvalError(
                "type", f"an object is indexed by a string key, not by the number {index}; "
                "convert it: x[i | string]", seg.start, seg.end,
            )
        return value.get(index)
    return None


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:39] + "…")


class DataResolver:
    """Resolves a :class:`~chainlang.expr.ast.Ref` against plain data: the
    first name is a key of ``data``, the rest is walked with
    :func:`walk_path`. Used for hook payloads (bare names are payload fields)
    and by the compliance suite."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __call__(self, ref: Any) -> Any:
        segments = ref.segments
        first = segments[0]
        value = self.data.get(first.name if isinstance(first, Name) else first.value)
        if len(segments) == 1:
            return value
        return walk_path(value, segments[1:], self)

