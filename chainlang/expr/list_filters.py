"""The list filters of the expression language (LANGUAGE.md §4).

============== ======================== =====================================
filter         input                    result
============== ======================== =====================================
map('key')     list of objects          each item's ``key`` (null when the
                                        item lacks it or is null)
sum            list of numbers          their sum; 0 when empty
min/max        list of numbers, or of   the smallest/largest item; null when
               strings                  empty
sort           list of numbers, or of   ascending, stable (strings by code
               strings                  point)
sort('key')    list of objects          ordered by each item's ``key``; the
                                        keys all numbers or all strings
unique         list                     without repeats, first kept; JSON
                                        equality (``1`` and ``1.0`` are the
                                        same, ``true`` and ``1`` are not)
flatten        list                     one level: list items spliced in,
                                        other items kept as they are
zip(other)     two lists                ``[a, b]`` pairs, as long as the
                                        shorter list
slice(a, b)    list or string           items ``a`` up to (not including)
                                        ``b``; negative counts from the end;
                                        ``b`` left out or null: to the end
============== ======================== =====================================

Bounds: every result has at most as many items as its input(s), and is
checked against ``MAX_SIZE`` all the same; ``sort`` is ``n log n``, ``unique``
hashes each item once (no pairwise comparison).
"""

from __future__ import annotations

import math
from typing import Any

from chainlang.expr.filter_spec import FilterSpec
from chainlang.expr.operators import OpFailure
from chainlang.expr.types import (
    ANY,
    NULL,
    NUMBER,
    Array,
    Type,
    kind,
    members,
    union,
)
from chainlang.expr.values import MAX_SIZE, kind_of

__all__ = ["LIST_FILTERS"]


def _need_list(name: str, value: Any) -> list[Any] | tuple[Any, ...]:
    k = kind_of(value)
    if k != "list":
        raise OpFailure("type", f"filter '{name}' needs a list, got {k}")
    return value  # type: ignore[no-any-return]


def _need_key(name: str, key: Any) -> str:
    if kind_of(key) != "string":
        raise OpFailure("type", f"filter '{name}' needs a string key, got {kind_of(key)}")
    return str(key)


def _check_size(name: str, size: int) -> None:
    if size > MAX_SIZE:
        raise OpFailure("limit", f"filter '{name}' would build more than {MAX_SIZE:,} items")


def _field(name: str, item: Any, key: str, position: int) -> Any:
    if item is None:
        return None
    if kind_of(item) != "object":
        raise OpFailure(
            "type",
            f"filter '{name}' with key '{key}' needs a list of objects, "
            f"item {position} is {kind_of(item)}",
        )
    return item.get(key)


def _map(v: Any, key: Any) -> list[Any]:
    items = _need_list("map", v)
    field = _need_key("map", key)
    return [_field("map", item, field, i) for i, item in enumerate(items)]


def _sum(v: Any) -> int | float:
    items = _need_list("sum", v)
    for i, item in enumerate(items):
        if kind_of(item) != "number":
            raise OpFailure("type", f"filter 'sum' needs a list of numbers, item {i} is {kind_of(item)}")
    try:
        total = sum(items)
    except OverflowError:
        raise OpFailure("value", "filter 'sum': the total is too large") from None
    if isinstance(total, float) and not math.isfinite(total):
        raise OpFailure("value", "filter 'sum': the total is not a finite number")
    return total  # type: ignore[no-any-return]


def _comparable(name: str, values: Any, what: str = "item") -> None:
    """All numbers or all strings, as ``<`` demands; a clear error naming the
    first value that breaks the rule."""
    first_kind: str | None = None
    for i, value in enumerate(values):
        k = kind_of(value)
        if k not in ("number", "string"):
            raise OpFailure(
                "type",
                f"filter '{name}' orders numbers or strings, {what} {i} is {k}",
            )
        if k == "number" and value != value:  # NaN orders nothing
            raise OpFailure("value", f"filter '{name}': {what} {i} is not a finite number")
        if first_kind is None:
            first_kind = k
        elif k != first_kind:
            raise OpFailure(
                "type",
                f"filter '{name}' cannot compare {first_kind} with {k} ({what} {i}): "
                "only numbers with numbers or strings with strings compare",
            )


def _min(v: Any) -> Any:
    items = _need_list("min", v)
    _comparable("min", items)
    return min(items) if items else None


def _max(v: Any) -> Any:
    items = _need_list("max", v)
    _comparable("max", items)
    return max(items) if items else None


_NO_KEY = object()


def _sort(v: Any, key: Any = _NO_KEY) -> list[Any]:
    items = list(_need_list("sort", v))
    if key is _NO_KEY:
        _comparable("sort", items)
        return sorted(items)
    field = _need_key("sort", key)
    keys = [_field("sort", item, field, i) for i, item in enumerate(items)]
    _comparable("sort", keys, f"the '{field}' of item")
    order = sorted(range(len(items)), key=keys.__getitem__)
    return [items[i] for i in order]


def _identity(value: Any, depth: int = 0) -> Any:
    """A hashable stand-in equal exactly when the values are JSON-equal:
    numbers keep Python's ``1 == 1.0`` (same hash), a kind tag keeps ``true``
    apart from ``1``, objects ignore key order."""
    if depth > 128:
        raise OpFailure("limit", "filter 'unique': an item is nested too deeply")
    k = kind_of(value)
    if k == "list":
        return ("l", tuple(_identity(x, depth + 1) for x in value))
    if k == "object":
        return ("o", frozenset((key, _identity(x, depth + 1)) for key, x in value.items()))
    if k == "unsupported":
        raise OpFailure("type", "filter 'unique': an item is not a JSON value")
    return (k, value)


def _unique(v: Any) -> list[Any]:
    items = _need_list("unique", v)
    seen: set[Any] = set()
    kept: list[Any] = []
    for item in items:
        identity = _identity(item)
        if identity not in seen:
            seen.add(identity)
            kept.append(item)
    return kept


def _flatten(v: Any) -> list[Any]:
    items = _need_list("flatten", v)
    size = sum(len(x) if kind_of(x) == "list" else 1 for x in items)
    _check_size("flatten", size)
    flat: list[Any] = []
    for item in items:
        if kind_of(item) == "list":
            flat.extend(item)
        else:
            flat.append(item)
    return flat


def _zip(v: Any, other: Any) -> list[list[Any]]:
    left = _need_list("zip", v)
    if kind_of(other) != "list":
        raise OpFailure("type", f"filter 'zip' needs a list to pair with, got {kind_of(other)}")
    _check_size("zip", min(len(left), len(other)))
    return [[a, b] for a, b in zip(left, other)]


def _bound(value: Any, which: str) -> int | None:
    if value is None and which == "end":
        return None
    if type(value) is not int:
        got = kind_of(value)
        if got == "number":
            got = "a number with a fraction"
        raise OpFailure("type", f"filter 'slice' needs a whole number as its {which}, got {got}")
    return value


def _slice(v: Any, start: Any, end: Any = None) -> Any:
    k = kind_of(v)
    if k not in ("list", "string"):
        raise OpFailure("type", f"filter 'slice' needs a list or string, got {k}")
    a, b = _bound(start, "start"), _bound(end, "end")
    part = v[a:b]
    return list(part) if k == "list" else part


# ---------------------------------------------------------------- static


def _s_need_list(name: str, t: Type) -> None:
    k = kind(t)
    if k is not None and k != "list":
        raise OpFailure("type", f"filter '{name}' needs a list, got {k}")


def _s_arg(name: str, arg: Type, kinds: tuple[str, ...], wanted: str) -> None:
    """Fails when every member of the argument's type is known and wrong."""
    found = [kind(m) for m in members(arg)]
    if all(k is not None and k not in kinds for k in found):
        raise OpFailure("type", f"filter '{name}' needs {wanted}, got {found[0]}")


def _s_map(t: Type, args: list[Type]) -> Type:
    _s_need_list("map", t)
    _s_arg("map", args[0], ("string",), "a string key")
    return Array(ANY)


def _s_sum(t: Type, args: list[Type]) -> Type:
    _s_need_list("sum", t)
    return NUMBER


def _s_min_max(name: str) -> Any:
    def static(t: Type, args: list[Type]) -> Type:
        _s_need_list(name, t)
        return union(t.item, NULL) if isinstance(t, Array) else ANY

    return static


def _s_sort(t: Type, args: list[Type]) -> Type:
    _s_need_list("sort", t)
    if args:
        _s_arg("sort", args[0], ("string",), "a string key")
    return t


def _s_unique(t: Type, args: list[Type]) -> Type:
    _s_need_list("unique", t)
    return t


def _s_flatten(t: Type, args: list[Type]) -> Type:
    _s_need_list("flatten", t)
    if not isinstance(t, Array):
        return Array(ANY)
    parts = [m.item if isinstance(m, Array) else m for m in members(t.item)]
    return Array(union(*parts))


def _s_zip(t: Type, args: list[Type]) -> Type:
    _s_need_list("zip", t)
    _s_arg("zip", args[0], ("list",), "a list to pair with")
    other = args[0]
    left = t.item if isinstance(t, Array) else ANY
    right = other.item if isinstance(other, Array) else ANY
    return Array(Array(union(left, right)))


def _s_slice(t: Type, args: list[Type]) -> Type:
    k = kind(t)
    if k is not None and k not in ("list", "string"):
        raise OpFailure("type", f"filter 'slice' needs a list or string, got {k}")
    _s_arg("slice", args[0], ("number",), "a whole number as its start")
    if len(args) > 1:
        _s_arg("slice", args[1], ("number", "null"), "a whole number as its end")
    return t if k is not None else ANY


LIST_FILTERS: tuple[FilterSpec, ...] = (
    FilterSpec("map", 1, 1, _map, _s_map, "each item's field"),
    FilterSpec("sum", 0, 0, _sum, _s_sum, "sum of numbers"),
    FilterSpec("min", 0, 0, _min, _s_min_max("min"), "smallest item"),
    FilterSpec("max", 0, 0, _max, _s_min_max("max"), "largest item"),
    FilterSpec("sort", 0, 1, _sort, _s_sort, "ascending order, optionally by a field"),
    FilterSpec("unique", 0, 0, _unique, _s_unique, "without repeats"),
    FilterSpec("flatten", 0, 0, _flatten, _s_flatten, "lists of lists spliced one level"),
    FilterSpec("zip", 1, 1, _zip, _s_zip, "pairs with another list"),
    FilterSpec("slice", 1, 2, _slice, _s_slice, "items or characters a up to b"),
)
