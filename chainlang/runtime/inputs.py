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
    """The chain's inputs: defaults filled, each validated against its schema. UsageError
    names every problem (unknown or missing inputs, invalid values)."""
    from chainlang.errors import UsageError
    from chainlang.runtime.decide import validate_params
    from chainlang.journal.values import find_non_json
    from chainlang.diagnostics.suggest import did_you_mean

    problems: list[str] = []
    for name, value in given.items():
        try:
            found = find_non_json(value, [])
        except RecursionError:
            found = ([], "is nested too deeply")
        if found is not None:
            problems.append(f"input '{name}': {found[1]} (inputs must be JSON values)")
    for name in given:
        if name not in graph.inputs:
            hint = did_you_mean(name, list(graph.inputs))
            declared = ", ".join(sorted(graph.inputs)) or "none"
            problems.append(f"unknown input '{name}' (declared: {declared})" + (f"; {hint}" if hint else ""))
    inputs = apply_input_defaults(graph, {k: v for k, v in given.items() if k in graph.inputs})
    for name, schema in graph.inputs.items():
        if name not in inputs:
            problems.append(f"missing input '{name}': give it with --input {name}=VALUE")
            continue
        for message in validate_params(schema if isinstance(schema, dict) else {}, inputs[name]):
            problems.append(f"input '{name}': {message}")
    if problems:
        raise UsageError("; ".join(problems))
    return inputs
