"""Static types: a small lattice shared by the checker and the runtime.

``ANY`` (unknown), ``NULL``, ``BOOL``, ``NUMBER``, ``STRING``,
``Array(item)``, ``Object(props, strict)`` and ``Union(members)``. A strict
object has exactly the listed properties (JSON Schema ``additionalProperties:
false``, or a literal JSON value); a loose one may have others, of unknown
type. Unions stay small: more than 8 members, or any member ``ANY``, widen to
``ANY``.

:func:`check_expression` reports only what is *certain*: a problem is
reported when every combination of the operand types fails (so ``ANY`` never
produces an issue, and a union is reported only when each member fails).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chainlang.expr.ast import (
    Binary,
    BoolOp,
    Compare,
    Computed,
    Expr,
    Filter,
    Index,
    ListLit,
    Literal,
    Name,
    Not,
    Ref,
    Segment,
    Subscript,
    Unary,
    ref_prefix,
)
from chainlang.expr.operators import (
    OpFailure,
    arith_kind,
    neg_check,
    order_check,
    word_check,
)

if TYPE_CHECKING:
    from chainlang.expr.template import Template

__all__ = [
    "Type",
    "Prim",
    "ANY",
    "NULL",
    "BOOL",
    "NUMBER",
    "STRING",
    "Array",
    "Object",
    "Union",
    "union",
    "members",
    "kind",
    "type_from_schema",
    "type_of_value",
    "path_type",
    "TypeIssue",
    "check_expression",
    "check_template",
]

MAX_UNION = 8
MAX_TYPE_DEPTH = 32


class Type:
    """Base class of static types."""

    __slots__ = ()

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Prim(Type):
    """A primitive type; ``name`` is ``any``, ``null``, ``boolean``,
    ``number`` or ``string``."""

    name: str

    def describe(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name.upper() if self.name != "boolean" else "BOOL"


ANY = Prim("any")
NULL = Prim("null")
BOOL = Prim("boolean")
NUMBER = Prim("number")
STRING = Prim("string")


@dataclass(frozen=True, slots=True)
class Array(Type):
    """A list whose items have type ``item``."""

    item: Type = ANY

    def describe(self) -> str:
        return "list" if self.item is ANY else f"list of {self.item.describe()}"


class Object(Type):
    """An object with known properties. ``strict``: no other property exists
    (absent keys are definitely absent), else unlisted keys are ``ANY``."""

    __slots__ = ("props", "strict", "_hash")

    props: Mapping[str, Type]
    strict: bool
    _hash: int | None

    def __init__(self, props: Mapping[str, Type] | None = None, strict: bool = False) -> None:
        object.__setattr__(self, "props", MappingProxyType(dict(props or {})))
        object.__setattr__(self, "strict", bool(strict))
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Object types are immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Object):
            return NotImplemented
        return self.strict == other.strict and dict(self.props) == dict(other.props)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.strict, frozenset(self.props.items())))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"Object({dict(self.props)!r}, strict={self.strict})"

    def describe(self) -> str:
        return "object"


@dataclass(frozen=True, slots=True)
class Union(Type):
    """One of several types (build with :func:`union`)."""

    members: frozenset[Type]

    def describe(self) -> str:
        return " or ".join(sorted(m.describe() for m in self.members))


def union(*types: Type) -> Type:
    """The union of types: flattened, deduplicated, ``ANY`` if any member is
    ``ANY`` or there are more than 8 members; a single member is itself."""
    flat: set[Type] = set()
    for t in types:
        if t is ANY:
            return ANY
        if isinstance(t, Union):
            flat.update(t.members)
        else:
            flat.add(t)
    if not flat or len(flat) > MAX_UNION:
        return ANY
    if len(flat) == 1:
        return next(iter(flat))
    return Union(frozenset(flat))


def members(t: Type) -> tuple[Type, ...]:
    """The members of a union, or ``(t,)``."""
    if isinstance(t, Union):
        return tuple(sorted(t.members, key=repr))
    return (t,)


def kind(t: Type) -> str | None:
    """The JSON kind of a non-union type (``None`` for ``ANY`` and unions)."""
    if isinstance(t, Prim):
        return None if t is ANY else t.name
    if isinstance(t, Array):
        return "list"
    if isinstance(t, Object):
        return "object"
    return None


# ---------------------------------------------------------------- constructing


_SCHEMA_TYPES: dict[str, Type] = {
    "null": NULL,
    "boolean": BOOL,
    "integer": NUMBER,
    "number": NUMBER,
    "string": STRING,
}


def type_from_schema(schema: Any, _depth: int = 0) -> Type:
    """The type of values valid against a JSON Schema (a subset: ``type`` as a
    string or list, ``properties`` (a property missing from ``required`` may
    be absent, so its type includes ``NULL``), ``additionalProperties: false``
    (strict), ``items``, ``enum``, ``const``, ``anyOf``/``oneOf`` (union),
    OpenAPI's ``nullable``). Anything it does not understand (``$ref``,
    ``allOf``...) is ``ANY``: unknown, never wrong."""
    if not isinstance(schema, Mapping) or _depth > MAX_TYPE_DEPTH:
        return ANY
    d = _depth + 1
    if "const" in schema:
        return type_of_value(schema["const"], d)
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return union(*(type_of_value(v, d) for v in schema["enum"]))
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            return union(*(type_from_schema(o, d) for o in options))
    if "$ref" in schema or "allOf" in schema:
        return ANY
    declared = schema.get("type")
    if declared is None:
        if "properties" in schema or "additionalProperties" in schema:
            declared = "object"
        elif "items" in schema:
            declared = "array"
        else:
            return ANY
    names = declared if isinstance(declared, list) else [declared]
    result: list[Type] = []
    for name in names:
        if not isinstance(name, str):
            return ANY
        if name in _SCHEMA_TYPES:
            result.append(_SCHEMA_TYPES[name])
        elif name == "array":
            items = schema.get("items")
            if isinstance(items, list):
                item = union(*(type_from_schema(i, d) for i in items)) if items else ANY
            else:
                item = type_from_schema(items, d) if items is not None else ANY
            result.append(Array(item))
        elif name == "object":
            props = schema.get("properties")
            required = schema.get("required")
            required = set(required) if isinstance(required, list) else set()
            typed = {}
            if isinstance(props, Mapping):
                # a property that is not required may be absent: null then
                typed = {
                    str(k): type_from_schema(v, d) if k in required
                    else union(type_from_schema(v, d), NULL)
                    for k, v in props.items()
                }
            result.append(Object(typed, strict=schema.get("additionalProperties") is False))
        else:
            return ANY
    if schema.get("nullable") is True:
        result.append(NULL)
    return union(*result)


def type_of_value(value: Any, _depth: int = 0) -> Type:
    """The type of a literal JSON value. Objects are strict (their keys are
    all known); a list's item type is the union of its items' types."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if _depth > MAX_TYPE_DEPTH:
        return ANY
    if isinstance(value, (list, tuple)):
        if not value:
            return Array(ANY)
        return Array(union(*(type_of_value(v, _depth + 1) for v in value)))
    if isinstance(value, Mapping):
        return Object({str(k): type_of_value(v, _depth + 1) for k, v in value.items()}, True)
    return ANY


def path_type(t: Type, segments: Sequence[Segment]) -> Type | None:
    """The type found by walking ``segments`` into a value of type ``t``.

    ``None`` means the path is definitely absent (a key a strict object does
    not have, an index into a string, a number or null...): at run time it
    evaluates to null. ``ANY`` when unknown. A list index may be out of range,
    so it gives the item type or ``NULL``; through a union, members where the
    path is absent add ``NULL``."""
    for i, seg in enumerate(segments):
        if t is ANY:
            return ANY
        if isinstance(t, Union):
            rest = segments[i:]
            found: list[Type] = []
            absent = False
            for member in members(t):
                r = path_type(member, rest)
                if r is None:
                    absent = True
                else:
                    found.append(r)
            if not found:
                return None
            return union(*found, NULL) if absent else union(*found)
        step = _step(t, seg)
        if step is None:
            return None
        t = step
    return t


def _step(t: Type, seg: Segment) -> Type | None:
    if isinstance(seg, Computed):  # x[expr]: any item of a list, any value of an object
        from chainlang.expr.index_types import computed_step

        return computed_step(t)
    if isinstance(seg, Index):
        # the index may be out of range: null then
        return union(t.item, NULL) if isinstance(t, Array) else None
    key = seg.name if isinstance(seg, Name) else seg.value
    if isinstance(t, Object):
        if key in t.props:
            return t.props[key]
        return None if t.strict else ANY
    return None


# ---------------------------------------------------------------- checking


@dataclass(frozen=True, slots=True)
class TypeIssue:
    """A certain problem found statically. ``category`` is ``type``,
    ``filter`` or ``regex``; offsets as in the AST."""

    category: str
    message: str
    start: int
    end: int


RefType = Callable[[Ref], "Type | None"]


class _Checker:
    def __init__(self, ref_type: RefType) -> None:
        self.ref_type = ref_type
        self.issues: list[TypeIssue] = []

    def report(self, category: str, message: str, start: int, end: int) -> None:
        self.issues.append(TypeIssue(category, message, start, end))

    def apply1(self, t: Type, rule: Callable[[Type], Type], node: Expr,
               span: tuple[int, int] | None = None) -> Type:
        try:
            return self.apply1_quiet(t, rule)
        except OpFailure as failure:  # every member fails: the issue is certain
            start, end = span or (node.start, node.end)
            self.report(failure.category, failure.message, start, end)
            return ANY

    def apply2(self, a: Type, b: Type, rule: Callable[[Type, Type], Type], node: Expr) -> Type:
        return self.apply1(a, lambda ma: self.apply1_quiet(b, lambda mb: rule(ma, mb)), node)

    @staticmethod
    def apply1_quiet(t: Type, rule: Callable[[Type], Type]) -> Type:
        results: list[Type] = []
        failure: OpFailure | None = None
        for m in members(t):
            try:
                results.append(rule(m))
            except OpFailure as f:
                failure = failure or f
        if results:
            return union(*results)
        assert failure is not None
        raise failure

    def indexes(self, segments: tuple[Segment, ...], container: Callable[[int], Type | None]) -> None:
        """Type the computed indexes of a path (x[expr]) and report what is certainly wrong."""
        from chainlang.expr.index_types import index_problems

        for message, seg in index_problems(segments, lambda seg: self.visit(seg.expr), container):
            self.report("type", message, seg.start, seg.end)

    def visit(self, e: Expr) -> Type:
        cls = type(e)
        if cls is Literal:
            return type_of_value(e.value)  # type: ignore[attr-defined]
        if cls is Ref:
            if e.computed:  # type: ignore[attr-defined]
                self.indexes(e.segments, lambda k: self.ref_type(ref_prefix(e, k)))  # type: ignore[attr-defined]
            t = self.ref_type(e)  # type: ignore[arg-type]
            return NULL if t is None else t
        if cls is ListLit:
            items = [self.visit(i) for i in e.items]  # type: ignore[attr-defined]
            return Array(union(*items)) if items else Array(ANY)
        if cls is Subscript:
            s: Subscript = e  # type: ignore[assignment]
            operand = self.visit(s.operand)
            self.indexes(s.segments, lambda k: path_type(operand, s.segments[:k]))
            t = path_type(operand, s.segments)
            return NULL if t is None else t
        if cls is Unary:
            operand = self.visit(e.operand)  # type: ignore[attr-defined]
            return self.apply1(operand, _neg_rule, e)
        if cls is Not:
            self.visit(e.operand)  # type: ignore[attr-defined]
            return BOOL
        if cls is BoolOp:
            self.visit(e.left)  # type: ignore[attr-defined]
            self.visit(e.right)  # type: ignore[attr-defined]
            return BOOL
        if cls is Binary:
            b: Binary = e  # type: ignore[assignment]
            left, right = self.visit(b.left), self.visit(b.right)
            return self.apply2(left, right, lambda x, y: _arith_rule(b.op, x, y), e)
        if cls is Compare:
            return self.compare(e)  # type: ignore[arg-type]
        if cls is Filter:
            return self.filter(e)  # type: ignore[arg-type]
        raise TypeError(f"not an expression node: {e!r}")

    def compare(self, c: Compare) -> Type:
        left, right = self.visit(c.left), self.visit(c.right)
        op = c.op
        if op in ("==", "!="):
            return BOOL
        if op in ("<", "<=", ">", ">="):
            return self.apply2(left, right, lambda x, y: _order_rule(op, x, y), c)
        subject, other = (right, left) if op in ("in", "not_in") else (left, right)
        self.apply2(subject, other, lambda x, y: _word_rule(op, x, y), c)
        pattern = c.right
        if op == "matches" and isinstance(pattern, Literal) and isinstance(pattern.value, str):
            from chainlang.expr.evaluate import regex_error

            problem = regex_error(pattern.value)
            if problem is not None:
                self.report("regex", problem, c.right.start, c.right.end)
        return BOOL

    def filter(self, f: Filter) -> Type:
        from chainlang.expr.filters import (
            FILTERS,
            arity_problem,
            unknown_filter_message,
        )

        operand = self.visit(f.operand)
        args = [self.visit(a) for a in f.args]
        spec = FILTERS.get(f.name)
        if spec is None:
            self.report("filter", unknown_filter_message(f.name), f.name_start, f.name_end)
            return ANY
        problem = arity_problem(spec, len(f.args))
        if problem is not None:
            self.report("filter", problem, f.name_start, f.name_end)
            return ANY
        return self.apply1(operand, lambda m: spec.static(m, args), f, (f.name_start, f.name_end))


def _neg_rule(t: Type) -> Type:
    k = kind(t)
    if k is not None:
        neg_check(k)
    return NUMBER


def _arith_rule(op: str, a: Type, b: Type) -> Type:
    ka, kb = kind(a), kind(b)
    if ka is not None and kb is not None:
        result = arith_kind(op, ka, kb)
        if result == "number":
            return NUMBER
        if result == "string":
            return STRING
        assert isinstance(a, Array) and isinstance(b, Array)
        return Array(union(a.item, b.item))
    known = ka or kb
    if known is None:
        return NUMBER if op != "+" else ANY
    # one side unknown: fails for certain only if the known side fits no case
    fits = ("number", "string", "list") if op == "+" else ("number",)
    if known not in fits:
        arith_kind(op, ka or "unknown", kb or "unknown")  # raises
    if op != "+" or known == "number":
        return NUMBER
    return a if ka is not None else b


def _order_rule(op: str, a: Type, b: Type) -> Type:
    ka, kb = kind(a), kind(b)
    if ka is not None and kb is not None:
        order_check(op, ka, kb)
    elif (ka or kb) not in (None, "number", "string"):
        order_check(op, ka or "unknown", kb or "unknown")  # raises
    return BOOL


def _word_rule(op: str, subject: Type, other: Type) -> Type:
    ks, ko = kind(subject), kind(other)
    if ks is None or ks == "null":
        return BOOL
    # with the other side unknown, only a subject that fits no case is certain
    word_check(op, ks, ko if ko is not None else "string")
    return BOOL


def check_expression(
    expr: Expr, ref_type: Callable[[Ref], Type | None]
) -> tuple[Type, list[TypeIssue]]:
    """The static type of ``expr`` and the problems that are certain.

    ``ref_type`` gives the type of each reference (``None`` is taken as
    ``NULL``: the path is absent, so it evaluates to null)."""
    checker = _Checker(ref_type)
    result = checker.visit(expr)
    return result, checker.issues


def check_template(
    template: Template, ref_type: Callable[[Ref], Type | None]
) -> tuple[Type, list[TypeIssue]]:
    """Like :func:`check_expression` for a template: its type is the single
    expression's type, ``STRING`` otherwise. Issue offsets are in the template
    text."""
    from chainlang.expr.template import Embedded

    checker = _Checker(ref_type)
    result: Type = STRING
    issues: list[TypeIssue] = []
    for part in template.parts:
        if isinstance(part, Embedded):
            checker.issues = []
            t = checker.visit(part.expr)
            if template.single is not None:
                result = t
            issues.extend(
                TypeIssue(i.category, i.message, i.start + part.offset, i.end + part.offset)
                for i in checker.issues
            )
    return result, issues
