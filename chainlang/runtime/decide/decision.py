"""The decide model's vocabulary (LANGUAGE.md §5): the three decisions, what a decider
is asked, the `Decider` protocol, the errors, and the params validation every decider
and the interpreter share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from chainlang.schemas.cache import entry, messages

__all__ = [
    "ACTIONS",
    "DECISION_SCHEMA",
    "DEFAULT_TIMEOUT",
    "FALLBACKS",
    "Action",
    "DecideError",
    "DecideRequest",
    "Decider",
    "DeciderConfigError",
    "Decision",
    "DecisionNeeded",
    "Fallback",
    "Undecided",
    "validate_params",
]

Action = Literal["continue", "skip", "break"]
Fallback = Literal["fail", "skip", "break"]

ACTIONS: tuple[Action, ...] = ("continue", "skip", "break")
FALLBACKS: tuple[Fallback, ...] = ("fail", "skip", "break")
DEFAULT_TIMEOUT = 60.0  # seconds; `timeout` in `[decide]`

#: The answer a decider gives (draft-07). The three alternatives are `anyOf`, not
#: `oneOf`: their `action` constants exclude each other, and `anyOf` is what the
#: structured-output modes of OpenAI-compatible servers understand most widely.
DECISION_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "decision",
    "description": "continue with (repaired) params, skip the step, or break the chain",
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "action": {"type": "string", "const": "continue"},
                "params": {"type": "object", "description": "the params to run the event with"},
            },
            "required": ["action", "params"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"action": {"type": "string", "const": "skip"}},
            "required": ["action"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"action": {"type": "string", "const": "break"}},
            "required": ["action"],
            "additionalProperties": False,
        },
    ],
}

_SOURCES = ("embedded", "model", "fallback")
MAX_MESSAGE = 240  # characters of one validation message
MAX_REASON = 400  # characters of a reason
_MAX_VALUE = 40  # characters of a value shown in a reason


# -- decisions and requests ----------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One answer of the decide model.

    `params` is set for `continue` only. `reason` is a short line for the transcript;
    `source` says who decided: `embedded`, `model` or `fallback`.
    """

    action: Action
    params: dict[str, Any] | None = None
    reason: str = ""
    source: str = "embedded"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a decision is continue, skip or break, not {self.action!r}")
        if self.action == "continue" and not isinstance(self.params, dict):
            raise ValueError("a continue decision carries its params (an object)")
        if self.action != "continue" and self.params is not None:
            raise ValueError(f"a {self.action} decision carries no params")
        if self.source not in _SOURCES:
            raise ValueError(f"a decision's source is embedded, model or fallback, not {self.source!r}")

    def answer(self) -> dict[str, Any]:
        """The decision in the seed format: `{"action": ..., "params": ...}` (params for continue only)."""
        if self.action == "continue":
            return {"action": "continue", "params": self.params}
        return {"action": self.action}

    def to_record(self) -> dict[str, Any]:
        """JSON for the transcript: the answer plus `reason` and `source` (see `from_record`)."""
        return {**self.answer(), "reason": self.reason, "source": self.source}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Decision:
        """The decision recorded by `to_record` (reused on resume). ValueError if it is not one."""
        if not isinstance(record, dict):
            raise ValueError("a recorded decision is an object")
        answer = {key: value for key, value in record.items() if key not in ("reason", "source")}
        problems = decision_problems(answer)
        if problems:
            raise ValueError(f"not a recorded decision: {problems[0]}")
        return cls(
            action=answer["action"],
            params=answer.get("params"),
            reason=str(record.get("reason", "")),
            source=str(record.get("source", "embedded")),
        )


@dataclass(frozen=True)
class DecideRequest:
    """What a decider is asked about one step.

    `errors` are the validation messages of `params` against `params_schema` (empty
    when only a condition is asked); `condition` is the step's `decide:` text;
    `context` is the JSON data the condition may refer to (built by the interpreter).
    """

    event: str
    description: str
    params_schema: dict[str, Any]
    params: dict[str, Any]
    errors: list[str] = field(default_factory=list)
    condition: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    # the run's model service as the step sees it (chainlang.runtime.models.StepModels): a
    # tier decider asks through it, so the call is budgeted, recorded and replayed
    models: Any = field(default=None, compare=False, repr=False)


@runtime_checkable
class Decider(Protocol):
    """Anything that decides a step; raises `Undecided` when it cannot."""

    async def decide(self, request: DecideRequest) -> Decision: ...


class DecideError(Exception):
    """Base class of the decide model's errors. Messages are single lines."""


class Undecided(DecideError):
    """This decider cannot decide; `reason` says why (one line). A chain of deciders
    goes on to the next one, then to the fallback."""

    def __init__(self, reason: str) -> None:
        self.reason = one_line(reason)
        super().__init__(self.reason)


class DecisionNeeded(DecideError):
    """No decider could decide and the fallback is `fail`: the step fails with this message."""

    def __init__(self, message: str, event: str = "", reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.event = event
        self.reasons = reasons


class DeciderConfigError(DecideError):
    """The model decider cannot be used as configured (e.g. its API key variable is not set)."""


# -- validation ---------------------------------------------------------------------------


def validate_params(schema: dict[str, Any], params: Any) -> list[str]:
    """The validation messages of `params` against `schema` (draft-07, no fetching, RE2
    patterns), sorted by location; empty when they are valid (chainlang.schemas.cache)."""
    return messages(schema, params)


def decision_problems(answer: Any) -> list[str]:
    """Why `answer` is not one of the three decisions (empty when it is one)."""
    from chainlang.schemas.safe import iter_errors

    return [one_line(error.message) for error in iter_errors(entry(DECISION_SCHEMA).validator, answer)]


# -- text helpers (shared by the deciders) ----------------------------------------------


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_value(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return shorten(text, _MAX_VALUE)
