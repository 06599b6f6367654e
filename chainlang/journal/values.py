"""Plain JSON values as a run records them, and the idempotency key of a step attempt."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def idempotency_key(run_id: str, step: str, attempt: int) -> str:
    """The idempotency key of one attempt of one step: 32 lowercase hex characters.

    It is the first 128 bits of SHA-256 over the JSON text `[run_id, step, attempt]`
    (compact separators, UTF-8), so it depends on exactly those three values: the same
    run id, step path and attempt number give the same key in every process and on every
    resume, and changing any of them gives a different key. Encoding the triple as JSON
    keeps it unambiguous (`("a.b", "c")` and `("a", "b.c")` differ). `attempt` counts
    from 1.
    """
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("idempotency_key: run_id must be a non-empty string")
    if not isinstance(step, str) or not step:
        raise ValueError("idempotency_key: step must be a non-empty string")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"idempotency_key: attempt must be an integer >= 1, got {attempt!r}")
    text = json.dumps([run_id, step, attempt], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def describe_path(path: list[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out and part.isidentifier():
            out += f".{part}"
        elif not out and part.isidentifier():
            out = part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


#: integers beyond this have more digits than Python writes as text (sys.get_int_max_str_digits)
_MAX_JSON_INT = 10**4000


def is_plain_json(value: Any, tuples: bool = True) -> bool:
    """Fast check (exact builtin types only) that `value` is plain JSON; False means "look
    closer". With `tuples=False`, a tuple is not plain (the caller turns it into a list)."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return bool(-_MAX_JSON_INT < value < _MAX_JSON_INT)
    if t is dict:
        for key, item in value.items():
            if type(key) is not str or not is_plain_json(item, tuples):
                return False
        return True
    if t is list or (t is tuple and tuples):
        for item in value:
            if not is_plain_json(item, tuples):
                return False
        return True
    if t is float:
        return bool(-math.inf < value < math.inf)
    return False


def find_non_json(value: Any, path: list[str | int]) -> tuple[list[str | int], str] | None:
    """The first place in `value` that is not plain JSON, with why; None when all of it is."""
    t = type(value)
    if t is float or isinstance(value, float):
        if not -math.inf < value < math.inf:
            return path, f"{value!r} is not a JSON number"
        return None
    if isinstance(value, int) and not isinstance(value, bool) and not -_MAX_JSON_INT < value < _MAX_JSON_INT:
        return path, "is an integer too large to write as JSON text (more than 4,000 digits)"
    if t in _SCALARS or isinstance(value, (str, int)):
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = find_non_json(item, [*path, i])
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"has a {type(key).__name__} key; JSON object keys are strings"
            found = find_non_json(item, [*path, key])
            if found is not None:
                return found
        return None
    return path, f"is a {t.__module__}.{t.__qualname__}, not a JSON value"


__all__ = ["describe_path", "find_non_json", "idempotency_key", "is_plain_json"]
