"""The checks of `chainlang.toml`'s tables, declared on their dataclasses' fields.

Each table of the file is a frozen dataclass (config/model.py); each field carries what a
value must be in its metadata (`text`, `integer`, `flag`, `texts`, `table`, ...), and a table
may check its values together (`check_table`). `build` turns a parsed TOML table into the
dataclass, or collects every problem as `{"loc", "msg", "type"}`, the shape and wording
pydantic gives (the messages users saw before), for `config/project.py` to show.

This replaces pydantic here: importing it was about 40 % of a cold command in a project
(0.35 G instructions of ~1.1 G) for a file of a few lines. The types are strict: a TOML
boolean is not a number, a quoted number is not a number.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import MISSING, dataclass
from typing import Any, Callable

__all__ = ["Problem", "Spec", "build", "checked", "flag", "integer", "key_names", "mapping", "table", "tables", "text", "texts"]

Problem = dict[str, Any]  # {"loc": (...), "msg": "...", "type": "..."}


@dataclass(frozen=True)
class Spec:
    """What one field's value must be."""

    kind: str  # text, integer, flag, texts, mapping (of texts), table, tables, any
    optional: bool = False  # None is its default and not a value the file can give (TOML has no null)
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    ge: int | None = None
    le: int | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any], Any] | None = None  # called first with the raw value; raises ValueError; returns it
    of: type | None = None  # the dataclass of a table, or of each table of `tables`
    description: str = ""


def _field(spec: Spec, default: Any = MISSING, factory: Any = MISSING) -> Any:
    if factory is not MISSING:
        return dataclasses.field(default_factory=factory, metadata={"spec": spec})
    return dataclasses.field(default=default, metadata={"spec": spec})


def text(default: Any = MISSING, *, optional: bool = False, min_length: int | None = None,
         max_length: int | None = None, pattern: str | None = None, choices: tuple[str, ...] = (),
         check: Callable[[Any], Any] | None = None, description: str = "") -> Any:
    """A string (None by default when `optional`); `choices`: one of these."""
    return _field(Spec("text", optional, min_length, max_length, pattern, choices=choices, check=check,
                       description=description), None if optional else default)


def integer(default: Any = MISSING, *, optional: bool = False, ge: int | None = None, le: int | None = None,
            description: str = "") -> Any:
    return _field(Spec("integer", optional, ge=ge, le=le, description=description), None if optional else default)


def checked(check: Callable[[Any], Any], *, description: str = "") -> Any:
    """Any value `check` accepts (None by default)."""
    return _field(Spec("any", optional=True, check=check, description=description), None)


def flag(default: bool, *, description: str = "") -> Any:
    return _field(Spec("flag", description=description), default)


def texts(*, max_length: int | None = None, check: Callable[[Any], Any] | None = None, description: str = "") -> Any:
    """A list of strings (empty by default)."""
    return _field(Spec("texts", max_length=max_length, check=check, description=description), factory=list)


def mapping(*, description: str = "") -> Any:
    """A table of strings (empty by default)."""
    return _field(Spec("mapping", description=description), factory=dict)


def table(of: type, *, description: str = "") -> Any:
    """An optional sub-table (None when absent)."""
    return _field(Spec("table", optional=True, of=of, description=description), None)


def tables(of: type, *, max_length: int | None = None, check: Callable[[Any], Any] | None = None,
           description: str = "") -> Any:
    """A table of sub-tables by name (empty by default); `check` sees the raw table first."""
    return _field(Spec("tables", max_length=max_length, check=check, of=of, description=description), factory=dict)


def key_names(pattern: str, what: Callable[[str], str]) -> Callable[[Any], Any]:
    """A `check` of a table's keys: each matches `pattern`, else `what(key)` is the message."""
    compiled = re.compile(pattern)

    def check(value: Any) -> Any:
        if isinstance(value, dict):
            for name in value:
                if not compiled.fullmatch(name):
                    raise ValueError(what(name))
        return value

    return check


def build(cls: type, raw: Any, loc: tuple[Any, ...], problems: list[Problem]) -> Any:
    """`raw` (a parsed TOML table) as a `cls`, or None with its problems appended."""
    if not isinstance(raw, dict):
        problems.append({"loc": loc, "msg": f"Input should be a valid dictionary or instance of {cls.__name__}",
                         "type": "model_type"})
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    before = len(problems)
    values: dict[str, Any] = {}
    for key in raw:
        if key not in fields:
            problems.append({"loc": (*loc, key), "msg": "Extra inputs are not permitted", "type": "extra_forbidden"})
    for name, field in fields.items():
        if name not in raw:
            if field.default is MISSING and field.default_factory is MISSING:
                problems.append({"loc": (*loc, name), "msg": "Field required", "type": "missing"})
            continue
        values[name] = _value(field.metadata["spec"], raw[name], (*loc, name), problems)
    if len(problems) > before:
        return None
    made = cls(**values)
    check_table = getattr(cls, "check_table", None)
    if check_table is not None:
        try:
            check_table(made)
        except ValueError as exc:
            problems.append({"loc": loc, "msg": f"Value error, {exc}", "type": "value_error"})
            return None
    return made


def _value(spec: Spec, value: Any, loc: tuple[Any, ...], problems: list[Problem]) -> Any:
    if spec.check is not None:
        try:
            value = spec.check(value)
        except ValueError as exc:
            problems.append({"loc": loc, "msg": f"Value error, {exc}", "type": "value_error"})
            return None
    kind = spec.kind
    if kind == "any":
        return value
    if kind == "text":
        return _text(spec, value, loc, problems)
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append({"loc": loc, "msg": "Input should be a valid integer", "type": "int_type"})
        elif spec.ge is not None and value < spec.ge:
            problems.append({"loc": loc, "msg": f"Input should be greater than or equal to {spec.ge}",
                             "type": "greater_than_equal"})
        elif spec.le is not None and value > spec.le:
            problems.append({"loc": loc, "msg": f"Input should be less than or equal to {spec.le}",
                             "type": "less_than_equal"})
        return value
    if kind == "flag":
        if not isinstance(value, bool):
            problems.append({"loc": loc, "msg": "Input should be a valid boolean", "type": "bool_type"})
        return value
    if kind == "texts":
        if not isinstance(value, list):
            problems.append({"loc": loc, "msg": "Input should be a valid list", "type": "list_type"})
            return value
        if spec.max_length is not None and len(value) > spec.max_length:
            problems.append({"loc": loc, "msg": f"List should have at most {spec.max_length} items after validation, "
                                                f"not {len(value)}", "type": "too_long"})
        for index, item in enumerate(value):
            if not isinstance(item, str):
                problems.append({"loc": (*loc, index), "msg": "Input should be a valid string", "type": "string_type"})
        return list(value)
    if kind in ("mapping", "tables"):
        if not isinstance(value, dict):
            problems.append({"loc": loc, "msg": "Input should be a valid dictionary", "type": "dict_type"})
            return value
        if spec.max_length is not None and len(value) > spec.max_length:
            problems.append({"loc": loc, "msg": f"Dictionary should have at most {spec.max_length} items after "
                                                "validation, not more", "type": "too_long"})
            return value
        if kind == "mapping":
            for key, item in value.items():
                if not isinstance(item, str):
                    problems.append({"loc": (*loc, key), "msg": "Input should be a valid string", "type": "string_type"})
            return dict(value)
        assert spec.of is not None
        return {key: build(spec.of, item, (*loc, key), problems) for key, item in value.items()}
    assert kind == "table" and spec.of is not None
    return build(spec.of, value, loc, problems)


def _text(spec: Spec, value: Any, loc: tuple[Any, ...], problems: list[Problem]) -> Any:
    if spec.choices:
        if value not in spec.choices or not isinstance(value, str):
            quoted = [f"'{choice}'" for choice in spec.choices]
            shown = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
            problems.append({"loc": loc, "msg": f"Input should be {shown}", "type": "literal_error"})
        return value
    if not isinstance(value, str):
        problems.append({"loc": loc, "msg": "Input should be a valid string", "type": "string_type"})
    elif spec.min_length is not None and len(value) < spec.min_length:
        plural = "character" if spec.min_length == 1 else "characters"
        problems.append({"loc": loc, "msg": f"String should have at least {spec.min_length} {plural}",
                         "type": "string_too_short"})
    elif spec.max_length is not None and len(value) > spec.max_length:
        problems.append({"loc": loc, "msg": f"String should have at most {spec.max_length} characters",
                         "type": "string_too_long"})
    elif spec.pattern is not None and not re.search(spec.pattern, value):
        problems.append({"loc": loc, "msg": f"String should match pattern '{spec.pattern}'",
                         "type": "string_pattern_mismatch"})
    return value
