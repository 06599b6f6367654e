"""JSON Schema validation of untrusted schemas (chain inputs, event payloads, tool params).

Chains may be written by a model or an attacker, and so may the schemas inside
them. Two things jsonschema would otherwise do are unsafe here:

- resolve a `$ref` to a URL or a file by fetching it (network access, local
  file disclosure): every validator built here uses a reference registry that
  refuses all retrieval, and the checker reports non-local `$ref` (CL033);
- match `pattern` / `patternProperties` with Python's backtracking `re`
  (catastrophic on `^(a+)+$`): here they are matched with RE2, like the
  expression language's `matches`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterator

from jsonschema import Draft7Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from chainlang.schemas.meta import schema_problems as schema_problems  # re-exported: its home needs no jsonschema


def _refuse(uri: str) -> Any:
    raise NoSuchResource(uri)


_NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


def _compile(pattern: str) -> tuple[Any, str | None]:
    from chainlang.expr.evaluate import compile_regex

    return compile_regex(pattern)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    compiled, problem = _compile(pattern)
    if compiled is None:
        yield ValidationError(f"pattern {pattern!r} cannot be used: {problem}")
    elif compiled.search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        compiled, problem = _compile(pattern)
        if compiled is None:
            yield ValidationError(f"pattern {pattern!r} cannot be used: {problem}")
            continue
        for key, value in instance.items():
            if compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


SafeDraft7Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft7Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def validator_for(schema: dict[str, Any]) -> Any:
    """A draft-07 validator that never fetches and matches patterns in linear time."""
    return SafeDraft7Validator(schema, registry=_NO_RETRIEVAL)


def iter_errors(validator: Any, instance: Any) -> list[ValidationError]:
    """The validation errors; a schema whose `$ref` cannot be resolved validates nothing
    (the checker reports that reference itself, as CL033)."""
    try:
        return list(validator.iter_errors(instance))
    except Unresolvable:
        return []
    except Exception as exc:  # jsonschema wraps referencing errors in a private type
        if isinstance(exc.__cause__, Unresolvable) or "Unresolvable" in type(exc).__name__:
            return []
        raise


def json_kind(value: Any) -> str:
    """The JSON Schema type name of a JSON value (booleans are not integers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@lru_cache(maxsize=1)
def meta_validator() -> Any:
    return Draft7Validator(Draft7Validator.META_SCHEMA)
