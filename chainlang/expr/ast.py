"""The expression AST: small frozen nodes, each with ``start``/``end``.

``start`` and ``end`` are 0-based character offsets into the text the node was
parsed from (``end`` exclusive). For an expression embedded in a template
(``"Hi {user.name}"``) they are relative to the expression source, and
:class:`chainlang.expr.template.Embedded` records where that source starts in
the template.

Nodes are immutable and shared: ``parse_expression`` memoises by text, so the
same text always yields the same node objects.

Note on equality: nodes compare with dataclass equality, so ``Literal(1)``
equals ``Literal(1.0)`` and ``Literal(True)`` when their spans match (Python
``1 == 1.0 == True``). Use :func:`dump` when the JSON type matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from chainlang.expr.template import Template

__all__ = [
    "Expr",
    "Literal",
    "ListLit",
    "Ref",
    "Subscript",
    "Name",
    "Index",
    "Key",
    "Computed",
    "Segment",
    "Unary",
    "Not",
    "Binary",
    "Compare",
    "BoolOp",
    "Filter",
    "WORD_OPS",
    "COMPARE_OPS",
    "ARITH_OPS",
    "children",
    "iter_nodes",
    "iter_refs",
    "iter_template_refs",
    "computed_positions",
    "ref_prefix",
    "depth",
    "dump",
    "unparse",
]

#: word operators of :class:`Compare` (``not_in`` is written ``not in``)
WORD_OPS = ("contains", "in", "not_in", "matches", "startswith", "endswith")
#: symbolic comparison operators of :class:`Compare`
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
#: operators of :class:`Binary`
ARITH_OPS = ("+", "-", "*", "/", "%")


class Expr:
    """Base class of expression nodes."""

    __slots__ = ()
    start: int
    end: int


# ---------------------------------------------------------------- path segments


@dataclass(frozen=True, slots=True)
class Name:
    """A name in a reference path: ``tools`` and ``now`` in ``tools.now``."""

    name: str
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Index:
    """``[3]`` or ``[-1]`` (negative indices count from the end). The span
    covers the brackets."""

    value: int
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Key:
    """``['any key']``. The span covers the brackets."""

    value: str
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Computed:
    """``[expr]`` whose index is computed: ``jokes[best.result.id]``,
    ``rows[loop.pass - 1]``. At run time ``expr`` must give a whole number (a
    list index) or a string (an object key); null gives null. A literal index
    is never a ``Computed``: ``[0]`` is an :class:`Index`, ``['k']`` a
    :class:`Key`. The span covers the brackets."""

    expr: Expr
    start: int = 0
    end: int = 0


Segment = Union[Name, Index, Key, Computed]


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A JSON scalar written in the text: number, string, ``true``, ``false``,
    ``null``."""

    value: Any
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class ListLit(Expr):
    """``[a, b, ...]``; the items are expressions."""

    items: tuple[Expr, ...]
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Ref(Expr):
    """A reference: ``tools.now.result.iso``, ``team.members[0].result``,
    ``x['any key']``. ``segments[0]`` is always a :class:`Name`; resolving it
    is the caller's job (see ``evaluate``)."""

    segments: tuple[Segment, ...]
    start: int = 0
    end: int = 0

    @property
    def root(self) -> str:
        first = self.segments[0]
        assert isinstance(first, Name)
        return first.name

    def dotted(self) -> str:
        """The path as text (``a.b[0]['k']``, ``a[(i) + (1)]``)."""
        return _path_text(self.segments)

    @property
    def computed(self) -> bool:
        """Has the path a computed index (``a[b.c]``)?"""
        return any(type(s) is Computed for s in self.segments)


@dataclass(frozen=True, slots=True)
class Subscript(Expr):
    """A path applied to a computed value: ``(x | keys)[0]``, ``[1, 2][-1]``.
    Walked like JSON (missing → null), see ``walk_path``."""

    operand: Expr
    segments: tuple[Segment, ...]
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    """Unary minus (``op`` is ``"-"``)."""

    op: str
    operand: Expr
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Not(Expr):
    """``not x`` / ``NOT x``."""

    operand: Expr
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    """Arithmetic: ``op`` is one of ``+ - * / %``."""

    op: str
    left: Expr
    right: Expr
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    """``op`` is one of ``== != < <= > >=`` or a word operator
    ``contains in not_in matches startswith endswith``."""

    op: str
    left: Expr
    right: Expr
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class BoolOp(Expr):
    """``op`` is ``"and"`` or ``"or"`` (whatever the case in the source)."""

    op: str
    left: Expr
    right: Expr
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Filter(Expr):
    """``operand | name`` or ``operand | name(arg, ...)``; ``name_start`` and
    ``name_end`` delimit the filter name."""

    operand: Expr
    name: str
    args: tuple[Expr, ...]
    name_start: int = 0
    name_end: int = 0
    start: int = 0
    end: int = 0


# ---------------------------------------------------------------- walking


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of a node, in source order."""
    cls = type(expr)
    if cls is Literal:
        return ()
    if cls is Ref:
        return _computed_exprs(expr.segments)  # type: ignore[attr-defined]
    if cls is Subscript:
        return (expr.operand, *_computed_exprs(expr.segments))  # type: ignore[attr-defined]
    if cls is Binary or cls is Compare or cls is BoolOp:
        return (expr.left, expr.right)  # type: ignore[attr-defined]
    if cls is Filter:
        return (expr.operand, *expr.args)  # type: ignore[attr-defined]
    if cls is Unary or cls is Not:
        return (expr.operand,)  # type: ignore[attr-defined]
    if cls is ListLit:
        return expr.items  # type: ignore[attr-defined,no-any-return]
    raise TypeError(f"not an expression node: {expr!r}")


def _computed_exprs(segments: tuple[Segment, ...]) -> tuple[Expr, ...]:
    return tuple(s.expr for s in segments if type(s) is Computed)


def computed_positions(segments: tuple[Segment, ...]) -> tuple[int, ...]:
    """Where a path has computed indexes (positions in ``segments``)."""
    return tuple(i for i, s in enumerate(segments) if type(s) is Computed)


@lru_cache(maxsize=4096)
def ref_prefix(ref: Ref, k: int) -> Ref:
    """The reference made of the first ``k`` segments of ``ref`` (the value a
    computed index at position ``k`` indexes). The same object for the same
    ``ref`` and ``k``, so that a checker can record its type by identity."""
    segments = ref.segments[:k]
    return Ref(segments, ref.start, segments[-1].end)


def iter_nodes(expr: Expr) -> Iterator[Expr]:
    """Every node of the tree, pre-order (iterative: no recursion)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def iter_refs(expr: Expr) -> Iterator[Ref]:
    """Every :class:`Ref` in the expression, filter arguments included, in
    source order."""
    for node in iter_nodes(expr):
        if type(node) is Ref:
            yield node


def iter_template_refs(template: Template) -> Iterator[Ref]:
    """Every :class:`Ref` of every expression embedded in a template."""
    from chainlang.expr.template import Embedded

    for part in template.parts:
        if isinstance(part, Embedded):
            yield from iter_refs(part.expr)


def depth(expr: Expr) -> int:
    """Height of the tree (a leaf has depth 1). Iterative."""
    best = 0
    stack = [(expr, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        for child in children(node):
            stack.append((child, d + 1))
    return best


# ---------------------------------------------------------------- printing


def dump(expr: Expr | Segment) -> str:
    """A canonical, type-exact text of a tree with its spans (tests compare
    dumps: unlike ``==`` it tells ``1`` from ``1.0`` and ``true``)."""
    if isinstance(expr, Name):
        return f"Name({expr.name!r})@{expr.start}:{expr.end}"
    if isinstance(expr, (Index, Key)):
        return f"{type(expr).__name__}({_typed(expr.value)})@{expr.start}:{expr.end}"
    if isinstance(expr, Computed):
        return f"Computed({dump(expr.expr)})@{expr.start}:{expr.end}"
    cls = type(expr)
    span = f"@{expr.start}:{expr.end}"
    if cls is Literal:
        return f"Literal({_typed(expr.value)}){span}"  # type: ignore[attr-defined]
    if cls is Ref or cls is Subscript:
        segs = ",".join(dump(s) for s in expr.segments)  # type: ignore[attr-defined]
        if cls is Ref:
            return f"Ref({segs}){span}"
        return f"Subscript({dump(expr.operand)};{segs}){span}"  # type: ignore[attr-defined]
    if cls is ListLit:
        return f"List({','.join(dump(i) for i in expr.items)}){span}"  # type: ignore[attr-defined]
    if cls is Filter:
        f: Filter = expr  # type: ignore[assignment]
        args = ",".join(dump(a) for a in f.args)
        return f"Filter({dump(f.operand)}|{f.name}@{f.name_start}:{f.name_end}({args})){span}"
    if cls is Unary:
        return f"Unary({expr.op}{dump(expr.operand)}){span}"  # type: ignore[attr-defined]
    if cls is Not:
        return f"Not({dump(expr.operand)}){span}"  # type: ignore[attr-defined]
    b: Binary = expr  # type: ignore[assignment]
    return f"{cls.__name__}({dump(b.left)} {b.op} {dump(b.right)}){span}"


def _typed(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"


def _quote(text: str) -> str:
    out = ["'"]
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def _path_text(segments: tuple[Segment, ...]) -> str:
    out = []
    for i, seg in enumerate(segments):
        if isinstance(seg, Name):
            out.append(seg.name if i == 0 else "." + seg.name)
        elif isinstance(seg, Index):
            out.append(f"[{seg.value}]")
        elif isinstance(seg, Computed):
            out.append(f"[{unparse(seg.expr)}]")
        else:
            out.append(f"[{_quote(seg.value)}]")
    return "".join(out)


def _literal_text(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _quote(value)
    return repr(value)


def unparse(expr: Expr) -> str:
    """Source text for a tree, fully parenthesised where precedence needs it:
    ``parse_expression(unparse(e))`` gives back the same tree (spans aside)."""
    cls = type(expr)
    if cls is Literal:
        return _literal_text(expr.value)  # type: ignore[attr-defined]
    if cls is Ref:
        return _path_text(expr.segments)  # type: ignore[attr-defined]
    if cls is Subscript:
        s: Subscript = expr  # type: ignore[assignment]
        inner = unparse(s.operand)
        if type(s.operand) is not ListLit:
            inner = f"({inner})"
        tail = _path_text((Name("_"), *s.segments))[1:]
        return inner + tail
    if cls is ListLit:
        return "[" + ", ".join(unparse(i) for i in expr.items) + "]"  # type: ignore[attr-defined]
    if cls is Filter:
        f: Filter = expr  # type: ignore[assignment]
        text = f"({unparse(f.operand)}) | {f.name}"
        if f.args:
            text += "(" + ", ".join(unparse(a) for a in f.args) + ")"
        return text
    if cls is Unary:
        return f"-({unparse(expr.operand)})"  # type: ignore[attr-defined]
    if cls is Not:
        return f"not ({unparse(expr.operand)})"  # type: ignore[attr-defined]
    b: Binary = expr  # type: ignore[assignment]
    op = "not in" if b.op == "not_in" else b.op
    return f"({unparse(b.left)}) {op} ({unparse(b.right)})"
