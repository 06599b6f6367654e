"""A chain's inputs: given on the command line, by a calling chain or by the API; defaults
filled in, each checked against its schema before anything runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.compile import copy_json

if TYPE_CHECKING:
    from chainlang.compile import ExecutionGraph


def apply_input_defaults(graph: "ExecutionGraph", inputs: dict[str, Any]) -> dict[str, Any]:
    out = dict(inputs)
    for name, schema in graph.inputs.items():
        if name not in out and isinstance(schema, dict) and "default" in schema:
            out[name] = copy_json(schema["default"])
    return out


def check_inputs(graph: "ExecutionGraph", given: dict[str, Any]) -> dict[str, Any]:
    """The chain's inputs: defaults filled, each validated against its schema. InputError
    names every problem (unknown or missing inputs, invalid values), in the words of the
    Python API (`inputs['n']`); the CLI renders the same problems in its own words."""
    from chainlang.errors import InputError, InputProblem
    # the decide package's validate_params, without importing the deciders (and jsonschema,
    # which a schema of plain types never needs: chainlang.schemas.cache)
    from chainlang.schemas.cache import messages as validate_params
    from chainlang.journal.values import find_non_json
    from chainlang.diagnostics.suggest import did_you_mean

    problems: list[InputProblem] = []
    for name, value in given.items():
        try:
            found = find_non_json(value, [])
        except RecursionError:
            found = ([], "is nested too deeply")
        if found is not None:
            problems.append(InputProblem(name, "not_json", found[1]))
    for name in given:
        if name not in graph.inputs:
            hint = did_you_mean(name, list(graph.inputs))
            problems.append(InputProblem(name, "unknown", declared=tuple(sorted(graph.inputs)), hint=hint or None))
    inputs = apply_input_defaults(graph, {k: v for k, v in given.items() if k in graph.inputs})
    for name, schema in graph.inputs.items():
        if name not in inputs:
            problems.append(InputProblem(name, "missing", expected=expected_value(schema)))
            continue
        for message in validate_params(schema if isinstance(schema, dict) else {}, inputs[name]):
            problems.append(InputProblem(name, "invalid", message))
    if problems:
        raise InputError(problems)
    return inputs


_ARTICLES = {"string": "a text", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "array": "a list", "object": "a mapping", "null": "null"}


def expected_value(schema: Any) -> str | None:
    """What an input's schema asks for, in words ("an integer", "one of 'a', 'b'"), or None."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "one of " + ", ".join(repr(v) for v in schema["enum"][:8])
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _ARTICLES:
        return _ARTICLES[kind]
    if isinstance(kind, list) and kind and all(isinstance(k, str) and k in _ARTICLES for k in kind):
        return " or ".join(_ARTICLES[k] for k in kind)
    return None
