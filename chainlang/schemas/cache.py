"""The one cache of compiled schemas: for each distinct schema, its exact fast check and
(built on first need) its safe jsonschema validator.

Schemas are mostly shared objects (a registry's event specs), so an entry is found by
identity first (it keeps the schema alive, so its id is not reused), then by the
schema's canonical JSON text. Both maps are bounded: a long-lived process that checks
many projects clears them when they grow past `MAX_ENTRIES`.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from chainlang.schemas.fast import compile_fast_check

MAX_ENTRIES = 4096
MAX_MESSAGE = 240  # characters of one validation message


class SchemaEntry:
    """One schema, compiled: `fast(value)` is True when valid (None: the schema is beyond
    the fast subset); `validator` is the safe jsonschema validator."""

    __slots__ = ("schema", "fast", "_validator")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.fast = compile_fast_check(schema)
        self._validator: Any = None

    @property
    def validator(self) -> Any:
        if self._validator is None:
            from chainlang.schemas.safe import validator_for

            self._validator = validator_for(self.schema)
        return self._validator

    def messages(self, value: Any) -> list[str]:
        """What is wrong with `value`, sorted by location, each naming its location first
        (`days: 'three' is not of type 'integer'`) except at the top; empty when valid."""
        from chainlang.schemas.safe import iter_errors

        try:
            errors = iter_errors(self.validator, value)
        except Exception as exc:  # a schema jsonschema cannot work with: report, never crash
            return [_shorten(f"the schema cannot be used: {type(exc).__name__}: {exc}")]
        found: set[tuple[str, str]] = set()
        for error in errors:
            where = location(list(error.absolute_path))
            text = _shorten(" ".join(str(error.message).split()))
            found.add((where, f"{where}: {text}" if where else text))
        return [text for _, text in sorted(found)]

    def check(self, value: Any) -> list[str]:
        """`messages`, answered by the fast check when the value is valid."""
        fast = self.fast
        if fast is not None and fast(value):
            return []
        return self.messages(value)


_BY_ID: dict[int, SchemaEntry] = {}
_BY_TEXT: dict[str, SchemaEntry] = {}


def entry(schema: dict[str, Any]) -> SchemaEntry:
    """The compiled entry of `schema` (built once per distinct schema)."""
    found = _BY_ID.get(id(schema))
    if found is not None and found.schema is schema:
        return found
    text = json.dumps(schema, sort_keys=True, default=str)
    found = _BY_TEXT.get(text)
    if found is None:
        if len(_BY_TEXT) >= MAX_ENTRIES:
            _BY_TEXT.clear()
        found = SchemaEntry(schema)
        _BY_TEXT[text] = found
    if len(_BY_ID) >= MAX_ENTRIES:
        _BY_ID.clear()
    if found.schema is schema:
        _BY_ID[id(schema)] = found
    return found


def messages(schema: dict[str, Any], value: Any) -> list[str]:
    """What is wrong with `value` against `schema` (empty when it is valid)."""
    return entry(schema).check(value)


def checker(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """`check(value)` → the messages (empty when valid), for a schema checked many times."""
    return entry(schema).check


def location(path: list[Any]) -> str:
    """A JSON path as messages show it: `filter.due`, `slots[0].n` (empty at the top)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


__all__ = ["SchemaEntry", "checker", "entry", "location", "messages"]
