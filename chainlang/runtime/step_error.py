"""`chainlang.StepError(type, message)`: how a tool fails its step with an error type of its
own (`declined`, `not_found`, `rate_limited`) instead of `tool_error`, so that `retry.on`,
`catch` and hooks can tell a declined card from a timeout (LANGUAGE.md §2).

The type is checked where the failure is recorded (`error_of_step_error`), on the run's
process and on a Temporal worker alike: lowercase, `[a-z][a-z0-9_]*`, and not one of the
types chainlang gives to failures that are not a tool's (`limit`, `cancelled`, `params`,
...), which would make the transcript say something that did not happen. A type that does
not pass fails the step as a `tool_error` whose message says why.

It imports only chainlang.status, and `chainlang.StepError` is loaded lazily, so
`import chainlang` stays light.
"""

from __future__ import annotations

from typing import Any

from chainlang.status import ERROR_TYPE_FORM, RESERVED_TYPES

__all__ = ["MAX_TYPE_LENGTH", "StepError", "error_of_step_error", "type_problem"]

MAX_TYPE_LENGTH = 64
_MAX_MESSAGE = 1000  # as a tool_error's message (chainlang.runtime.invoke.tool_message)


class StepError(Exception):
    """Raise it in a tool to fail the step with error type `type` and `message`:

        raise chainlang.StepError("declined", "the card was declined")

    The step records `{"type": "declined", "message": "the card was declined"}`; a
    `retry` with `on: [timeout]` does not try it again."""

    def __init__(self, type: str, message: str = "") -> None:  # noqa: A002 - the contract's word
        super().__init__(type, message)
        self.type = type
        self.message = message

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else str(self.type)


def type_problem(kind: Any) -> str | None:
    """What is wrong with `kind` as a tool's error type, or None when it can be used."""
    if not isinstance(kind, str):
        return f"the type must be a string, not {type(kind).__name__}"
    shown = kind if len(kind) <= MAX_TYPE_LENGTH else kind[:MAX_TYPE_LENGTH] + "…"
    if len(kind) > MAX_TYPE_LENGTH:
        return f"the type {shown!r} is longer than {MAX_TYPE_LENGTH} characters"
    if not ERROR_TYPE_FORM.fullmatch(kind):
        return (f"the type {shown!r} is invalid: write lowercase letters, digits and _, "
                "starting with a letter ([a-z][a-z0-9_]*), e.g. 'card_declined'")
    if kind in RESERVED_TYPES:
        return (f"the type {kind!r} is one of chainlang's own error types, for failures that are not a "
                f"tool's: name what happened in the tool's own words, e.g. '{kind}_error' or 'declined'")
    return None


def error_of_step_error(exc: StepError) -> dict[str, Any]:
    """The step's error object for a StepError its tool raised: `{type, message}`, or a
    `tool_error` saying why the type cannot be used."""
    message = " ".join(str(exc.message).split())[:_MAX_MESSAGE]
    problem = type_problem(exc.type)
    if problem is not None:
        said = f" (its message: {message})" if message else ""
        return {"type": "tool_error", "message": f"the tool raised chainlang.StepError, but {problem}{said}"}
    return {"type": exc.type, "message": message}
