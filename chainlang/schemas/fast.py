"""An exact fast predicate for the common subset of draft-07 JSON Schema.

`validator.is_valid(x)` costs ~15 µs even for a tiny schema, most of it
jsonschema's per-keyword machinery; a step's whole budget is ~20 µs. So a
schema that uses only the keywords below is compiled, once, into nested
closures whose answer is the same as `chainlang.schemas.safe.validator_for(schema)
.is_valid(value)` for every JSON value. Anything else (`$ref`, `multipleOf`,
`patternProperties`, unknown keywords, malformed keyword values, a schema
nested more than `max_depth` subschemas deep) gives None: use jsonschema.

Validation keywords: `type`, `enum`, `const`, `properties`, `required`,
`additionalProperties`, `minProperties`, `maxProperties`, `items` (one schema
or a list, with `additionalItems`), `minItems`, `maxItems`, `uniqueItems`,
`minLength`, `maxLength`, `pattern`, `minimum`, `maximum`,
`exclusiveMinimum`, `exclusiveMaximum`, `allOf`, `anyOf`, `oneOf`, `not`,
`if`/`then`/`else`. Ignored, as by jsonschema: `title`, `description`,
`default`, `examples`, `$comment`, `format` (no format checker is used),
`readOnly`, `writeOnly`, `x-*`, `$schema` (at the root only), `$id`.

Only the boolean is exact: when the check says False the caller runs
jsonschema for the messages. An exception inside the check (RE2 refuses a
string with a lone surrogate) also gives False, so jsonschema decides.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

__all__ = ["compile_fast_check"]

Check = Callable[[Any], bool]

# What a value is, as jsonschema's draft-07 type checker sees it.
_NULL, _BOOLEAN, _INTEGER, _NUMBER, _STRING, _ARRAY, _OBJECT, _OTHER = range(8)
_KINDS = range(8)
_KIND_OF: dict[type, int] = {
    type(None): _NULL, bool: _BOOLEAN, int: _INTEGER, float: _NUMBER, str: _STRING, list: _ARRAY, dict: _OBJECT,
}
_CLASS_OF = {kind: cls for cls, kind in _KIND_OF.items()}
_TYPE_KINDS: dict[str, frozenset[int]] = {
    "null": frozenset({_NULL}),
    "boolean": frozenset({_BOOLEAN}),
    "integer": frozenset({_INTEGER}),  # and whole floats, see _whole_float
    "number": frozenset({_INTEGER, _NUMBER}),
    "string": frozenset({_STRING}),
    "array": frozenset({_ARRAY}),
    "object": frozenset({_OBJECT}),
}

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "format", "readOnly", "writeOnly", "$schema", "$id"}
)
_KEYWORDS = _ANNOTATIONS | {
    "type", "enum", "const", "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    "items", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else",
}


class _Unsupported(Exception):
    """The schema leaves the supported subset: jsonschema has to validate it."""


class _Build:
    """What compiling one schema needs besides the node at hand."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.may_raise = False  # RE2 on a lone surrogate, `equal` on a very deep value


# keywords whose checks call code that may raise on odd values
_MAY_RAISE = frozenset({"pattern", "enum", "const", "uniqueItems"})


def compile_fast_check(schema: Any, *, max_depth: int = 32) -> Check | None:
    """A predicate equal to draft-07 `is_valid` for `schema`, or None when the schema is outside the subset."""
    build = _Build(max_depth)
    try:
        inner = _node(schema, 0, build)
    except _Unsupported:
        return None
    if not build.may_raise:
        return inner

    def check(value: Any) -> bool:
        try:
            return inner(value)
        except Exception:  # jsonschema would raise too, or stop at an earlier error: let it decide
            return False

    return check


def _valid(value: Any) -> bool:
    return True


def _invalid(value: Any) -> bool:
    return False


def _kind(value: Any) -> int:
    # jsonschema checks types with isinstance, so subclasses count (bool has none)
    if value is None:
        return _NULL
    if isinstance(value, int):
        return _INTEGER
    if isinstance(value, numbers.Number):
        return _NUMBER
    if isinstance(value, str):
        return _STRING
    if isinstance(value, list):
        return _ARRAY
    if isinstance(value, dict):
        return _OBJECT
    return _OTHER


def _whole_float(value: Any) -> bool:
    # draft-06+ "integer": 1.0 is one, 1.5 and Decimal(1) are not
    return isinstance(value, float) and value.is_integer()


def _count(value: Any) -> int:
    """A non-negative integer keyword value (minLength, maxItems, ...)."""
    if type(value) is not int or value < 0:
        raise _Unsupported
    return value


def _number(value: Any) -> int | float:
    if type(value) is int or type(value) is float:
        return value
    raise _Unsupported


# dict and list subclasses (ruamel's CommentedMap) are what jsonschema's isinstance checks accept
def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _Unsupported
    return value


def _node(schema: Any, depth: int, build: _Build) -> Check:
    if schema is True:
        return _valid
    if schema is False:
        return _invalid
    if not isinstance(schema, dict) or depth > build.max_depth:
        raise _Unsupported
    for key in schema:
        if key not in _KEYWORDS and not (isinstance(key, str) and key.startswith("x-")):
            raise _Unsupported
    # jsonschema picks another validator class for a subschema with `$schema`
    if depth and "$schema" in schema:
        raise _Unsupported
    if "$id" in schema:  # a bad `$id` makes jsonschema's URL joining raise
        if not isinstance(schema["$id"], str):
            raise _Unsupported
        try:
            urlsplit(schema["$id"])
        except ValueError:
            raise _Unsupported from None
    if not _MAY_RAISE.isdisjoint(schema):
        build.may_raise = True

    def sub(child: Any) -> Check:
        return _node(child, depth + 1, build)

    # checks by the kind of value they apply to; `anything` applies to all
    numeric: list[Check] = []
    string: list[Check] = []
    array: list[Check] = []
    obj: list[Check] = []
    anything: list[Check] = []

    # -- numbers
    for keyword, make in _NUMERIC.items():
        if keyword in schema:
            numeric.append(make(_number(schema[keyword])))

    # -- strings
    # len() counts code points, as jsonschema does
    if "minLength" in schema:
        string.append(_at_least(_count(schema["minLength"])))
    if "maxLength" in schema:
        string.append(_at_most(_count(schema["maxLength"])))
    if "pattern" in schema:
        string.append(_pattern(schema["pattern"]))

    # -- arrays
    if "items" in schema:
        array.extend(_items(schema, sub))
    elif "additionalItems" in schema:
        sub(schema["additionalItems"])  # ignored without a list of items, but must be in the subset
    if "minItems" in schema:
        array.append(_at_least(_count(schema["minItems"])))
    if "maxItems" in schema:
        array.append(_at_most(_count(schema["maxItems"])))
    if "uniqueItems" in schema:
        flag = schema["uniqueItems"]
        if type(flag) is not bool:
            raise _Unsupported
        if flag:
            array.append(uniq)

    # -- objects
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        check = _object(schema, sub)
        if check is not _valid:
            obj.append(check)
    if "minProperties" in schema:
        obj.append(_at_least(_count(schema["minProperties"])))
    if "maxProperties" in schema:
        obj.append(_at_most(_count(schema["maxProperties"])))

    # -- any value
    if "enum" in schema:
        anything.append(_enum(_list(schema["enum"])))
    if "const" in schema:
        expected = schema["const"]
        anything.append(lambda value: equal(value, expected))
    if "allOf" in schema:
        anything.extend(sub(child) for child in _list(schema["allOf"]))
    if "anyOf" in schema:
        anything.append(_any_of(tuple(sub(child) for child in _list(schema["anyOf"]))))
    if "oneOf" in schema:
        anything.append(_one_of(tuple(sub(child) for child in _list(schema["oneOf"]))))
    if "not" in schema:
        negated = sub(schema["not"])
        anything.append(lambda value: not negated(value))
    conditional = _if_then_else(schema, sub)
    if conditional is not None:
        anything.append(conditional)

    allowed, whole_floats = _types(schema.get("type"))
    by_kind = {_INTEGER: numeric, _NUMBER: numeric, _STRING: string, _ARRAY: array, _OBJECT: obj}
    plan = tuple(_all(by_kind.get(kind, []) + anything) if kind in allowed else None for kind in _KINDS)
    return _dispatch(plan, _all(numeric + anything) if whole_floats else None)


def _types(declared: Any) -> tuple[frozenset[int], bool]:
    """The kinds `type` accepts, and whether whole floats pass as "integer"."""
    if declared is None:
        return frozenset(_KINDS), False
    names = [declared] if isinstance(declared, str) else _list(declared)
    kinds: set[int] = set()
    for name in names:
        if not isinstance(name, str) or name not in _TYPE_KINDS:
            raise _Unsupported  # jsonschema raises UnknownType
        kinds |= _TYPE_KINDS[name]
    return frozenset(kinds), "integer" in names and "number" not in names


def _all(checks: list[Check]) -> Check:
    checks = [check for check in checks if check is not _valid]
    if not checks:
        return _valid
    if _invalid in checks:
        return _invalid
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def all_of(value: Any) -> bool:
        for check in every:
            if not check(value):
                return False
        return True

    return all_of


def _dispatch(plan: tuple[Check | None, ...], whole_float: Check | None) -> Check:
    """One schema node: the check for the value's kind (None when `type` rejects that kind).

    `whole_float` is the check for floats like 1.0 when `type` says "integer" but not "number"."""
    kind_of = _KIND_OF
    if whole_float is None and all(check is _valid for check in plan):
        return _valid
    general: Check
    if all(check is None or check is _valid for check in plan) and whole_float in (None, _valid):
        accepted = tuple(check is not None for check in plan)
        integers = whole_float is not None

        def type_only(value: Any) -> bool:
            kind = kind_of.get(type(value))
            return accepted[_kind(value) if kind is None else kind] or (integers and _whole_float(value))

        general = type_only
    else:
        def node(value: Any) -> bool:
            kind = kind_of.get(type(value))
            check = plan[_kind(value) if kind is None else kind]
            if check is None:
                return whole_float is not None and _whole_float(value) and whole_float(value)
            return check is _valid or check(value)

        general = node
    # `type` with one JSON type: test the exact Python class first (the common, valid case)
    kinds = [kind for kind, check in enumerate(plan) if check is not None]
    if len(kinds) != 1 or kinds[0] == _OTHER:
        return general
    exact = _CLASS_OF[kinds[0]]
    check = plan[kinds[0]]
    if check is _valid:
        return lambda value: type(value) is exact or general(value)
    assert check is not None
    return lambda value: check(value) if type(value) is exact else general(value)


def _at_least(size: int) -> Check:
    return lambda value: len(value) >= size


def _at_most(size: int) -> Check:
    return lambda value: len(value) <= size


# Each comparison written as jsonschema writes it, so NaN and mixed int/float compare alike.
def _minimum(bound: int | float) -> Check:
    return lambda value: not value < bound


def _maximum(bound: int | float) -> Check:
    return lambda value: not value > bound


def _exclusive_minimum(bound: int | float) -> Check:
    return lambda value: not value <= bound


def _exclusive_maximum(bound: int | float) -> Check:
    return lambda value: not value >= bound


_NUMERIC: dict[str, Callable[[int | float], Check]] = {
    "minimum": _minimum,
    "maximum": _maximum,
    "exclusiveMinimum": _exclusive_minimum,
    "exclusiveMaximum": _exclusive_maximum,
}


def _pattern(pattern: Any) -> Check:
    # the same RE2 compilation as chainlang.schemas.safe's `pattern`, done once here instead of per value
    from chainlang.expr.evaluate import compile_regex

    if not isinstance(pattern, str):
        raise _Unsupported
    compiled, _ = compile_regex(pattern)
    if compiled is None:  # every string would fail with "cannot be used": leave the message to jsonschema
        raise _Unsupported
    search = compiled.search
    return lambda value: search(value) is not None


def _items(schema: dict[str, Any], sub: Callable[[Any], Check]) -> list[Check]:
    items = schema["items"]
    if not isinstance(items, list):
        each = sub(items)
        if "additionalItems" in schema:
            if not isinstance(items, dict):
                raise _Unsupported  # jsonschema takes len() of a boolean `items` here and raises
            sub(schema["additionalItems"])  # ignored next to a single items schema
        if each is _valid:
            return []
        if each is _invalid:
            return [lambda value: not value]

        def all_items(value: list[Any]) -> bool:
            for item in value:
                if not each(item):
                    return False
            return True

        return [all_items]

    prefix = tuple(sub(child) for child in items)
    size = len(prefix)
    rest = sub(schema.get("additionalItems", True))

    def tuple_items(value: list[Any]) -> bool:
        for item, check in zip(value, prefix):
            if not check(item):
                return False
        if rest is _valid or len(value) <= size:
            return True
        if rest is _invalid:
            return False
        for item in value[size:]:
            if not rest(item):
                return False
        return True

    return [tuple_items]


def _object(schema: dict[str, Any], sub: Callable[[Any], Check]) -> Check:
    """`properties`, `required` and `additionalProperties` in one pass over the value."""
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(key, str) for key in properties):
        raise _Unsupported
    required = tuple(_list(schema.get("required", [])))
    if not all(isinstance(key, str) for key in required):
        raise _Unsupported
    checked = {key: check for key, child in properties.items() if (check := sub(child)) is not _valid}
    declared = frozenset(properties)
    extra = sub(schema.get("additionalProperties", True))

    if extra is _valid:
        if not checked and not required:
            return _valid

        def open_object(value: dict[str, Any]) -> bool:
            for key in required:
                if key not in value:
                    return False
            for key, check in checked.items():
                if key in value and not check(value[key]):
                    return False
            return True

        return open_object

    def closed_object(value: dict[str, Any]) -> bool:
        for key in required:
            if key not in value:
                return False
        for key, item in value.items():
            check = checked.get(key)
            if check is not None:
                if not check(item):
                    return False
            elif key not in declared and not extra(item):
                return False
        return True

    return closed_object


def _enum(members: list[Any]) -> Check:
    # strings equal only strings under jsonschema's `equal`: a set lookup for them, `equal` for the rest
    strings = frozenset(member for member in members if isinstance(member, str))
    others = tuple(member for member in members if not isinstance(member, str))

    def enum(value: Any) -> bool:
        if isinstance(value, str):
            return value in strings
        for member in others:
            if equal(member, value):
                return True
        return False

    return enum


def _any_of(options: tuple[Check, ...]) -> Check:
    if _valid in options:
        return _valid

    def any_of(value: Any) -> bool:
        for option in options:
            if option(value):
                return True
        return False

    return any_of


def _one_of(options: tuple[Check, ...]) -> Check:
    def one_of(value: Any) -> bool:
        found = False
        for option in options:
            if option(value):
                if found:
                    return False
                found = True
        return found

    return one_of


def _if_then_else(schema: dict[str, Any], sub: Callable[[Any], Check]) -> Check | None:
    # `then` and `else` mean nothing without `if`, but they still have to be in the subset
    then = sub(schema["then"]) if "then" in schema else _valid
    otherwise = sub(schema["else"]) if "else" in schema else _valid
    if "if" not in schema:
        return None
    condition = sub(schema["if"])
    if then is _valid and otherwise is _valid:
        return None

    def if_then_else(value: Any) -> bool:
        return then(value) if condition(value) else otherwise(value)

    return if_then_else


# -- jsonschema's equality, copied from jsonschema._utils (4.x) so that the fast check does not
# import jsonschema (~90 ms): `enum`, `const` and `uniqueItems` compare as jsonschema does
# (True is not 1, sequences and mappings element by element). tests/test_schema_fastpath.py
# holds the fast check to jsonschema's answers.


def equal(one: Any, two: Any) -> bool:
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(equal(i, j) for i, j in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(key in two and equal(value, two[key]) for key, value in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE, _FALSE = object(), object()


def _unbool(element: Any) -> Any:
    if element is True:
        return _TRUE
    if element is False:
        return _FALSE
    return element


def uniq(container: Any) -> bool:
    try:
        ordered = sorted(_unbool(i) for i in container)
        for i, j in zip(ordered, itertools.islice(ordered, 1, None)):
            if equal(i, j):
                return False
    except (NotImplementedError, TypeError):
        seen: list[Any] = []
        for e in container:
            e = _unbool(e)
            for i in seen:
                if equal(i, e):
                    return False
            seen.append(e)
    return True
