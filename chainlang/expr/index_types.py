"""Static checks of computed indexes (``x[expr]``, LANGUAGE.md §4).

What is certain before a run: an index whose type can only be a boolean, a
list or an object is an error; so is an index that can only be a string into a
value that can only be a list, and an index that can only be a number into a
value that can only be an object. Anything less certain (``ANY``, a union that
has a fitting member) is left to the run, where :mod:`chainlang.expr.values`
checks the index it got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from chainlang.expr.ast import Computed, Segment
from chainlang.expr.types import ANY, NULL, Array, Object, Type, kind, members

__all__ = ["index_problems"]

#: kinds an index may have at run time (null gives null)
_INDEX_KINDS = frozenset({"number", "string", "null"})


def _kinds(t: Type) -> set[str | None]:
    return {kind(m) for m in members(t)}


def index_problems(
    segments: Sequence[Segment],
    index_type: Callable[[Computed], Type],
    container_type: Callable[[int], Type | None],
) -> list[tuple[str, Computed]]:
    """The certain problems of the computed indexes in ``segments``:
    ``(message, segment)`` pairs. ``index_type`` types a segment's
    expression; ``container_type(k)`` is the type of the value the index at
    position ``k`` applies to (None: unknown or absent)."""
    problems: list[tuple[str, Computed]] = []
    for k, seg in enumerate(segments):
        if type(seg) is not Computed:
            continue
        t = index_type(seg)
        if t is ANY:
            continue
        kinds = _kinds(t)
        if None in kinds:
            continue
        if not kinds & _INDEX_KINDS:
            problems.append((
                "an index must be a whole number (into a list) or a string (into an object), "
                f"not {_article(t.describe())}",
                seg,
            ))
            continue
        container = container_type(k)
        if container is None or container is ANY:
            continue
        shapes = {kind(m) for m in members(container) if m is not NULL}
        fitting = kinds - {"null"}
        if shapes and None not in shapes and not shapes & {"list", "object"}:
            what = " or ".join(sorted(_article(s) for s in shapes if s))
            problems.append((f"only lists and objects can be indexed; this is {what}", seg))
        elif shapes == {"list"} and fitting == {"string"}:
            problems.append(("a list is indexed by a whole number, not by a string; convert it: x[i | int]", seg))
        elif shapes == {"object"} and fitting == {"number"}:
            problems.append(("an object is indexed by a string key, not by a number; convert it: x[i | string]", seg))
    return problems


def _article(text: str) -> str:
    return f"an {text}" if text[:1] in "aeiou" else f"a {text}"


def computed_step(t: Type) -> Type | None:
    """The type one computed index into ``t`` gives (``path_type``'s step):
    a list's item or null, any of an object's values or null (anything, for an
    object that may have other keys); null on anything else (as at run time:
    :func:`index_problems` reports it)."""
    if isinstance(t, Array):
        from chainlang.expr.types import union

        return union(t.item, NULL)
    if isinstance(t, Object):
        if not t.strict or not t.props:
            return ANY if not t.strict else NULL
        from chainlang.expr.types import union

        return union(*t.props.values(), NULL)
    return NULL


