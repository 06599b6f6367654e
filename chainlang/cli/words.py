"""The CLI's words for errors the Python API words for its callers.

The library speaks of `inputs['n']` (chainlang.errors.InputError); on the command line the
same problem is fixed with `--input n=VALUE`, so the CLI renders the error's fields
itself rather than showing the API's message.
"""

from __future__ import annotations

from chainlang.errors import InputError, InputProblem, UsageError


def cli_message(exc: UsageError) -> str:
    """The one line `chainlang` prints for a usage error."""
    if isinstance(exc, InputError):
        return "; ".join(input_problem(p) for p in exc.problems)
    return str(exc)


def input_problem(problem: InputProblem) -> str:
    """One problem with the inputs, in terms of `--input NAME=VALUE`."""
    name = problem.name
    if problem.kind == "missing":
        return f"missing input '{name}': give it with --input {name}=VALUE"
    if problem.kind == "unknown":
        declared = ", ".join(problem.declared) or "none"
        return f"unknown input '{name}' (declared: {declared})" + (f"; {problem.hint}" if problem.hint else "")
    if problem.kind == "not_json":
        return f"input '{name}': {problem.detail} (inputs must be JSON values)"
    return f"input '{name}': {problem.detail}"


__all__ = ["cli_message", "input_problem"]
