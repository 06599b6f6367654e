"""How a step, a block or a run ends other than ok: the exceptions the walker and the
step pipeline raise to each other, and the error objects recorded for them (§9)."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any, Callable

from chainlang.status import ErrorType


class StepFailed(Exception):
    """A step (or block) failed and its `on_error` is `fail`: the enclosing chain fails."""

    def __init__(self, path: str, event: str | None, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.path = path
        self.event = event
        self.error = error


class ChainBroken(Exception):
    """`on_error: break` or a decide `break`: the chain stops cleanly."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


class LimitExceeded(Exception):
    """A limit of §8 stopped the run (exit code 3)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


class RunWaiting(Exception):
    """The run stops at a wait and ends as `waiting` (exit 4): `run --detach`, or a serve
    that lets go of a waiting run. Its event, its deadline or a cancel continues it (§15)."""

    def __init__(self, path: str, event: str, deadline: str | None, question: dict[str, Any] | None = None) -> None:
        super().__init__(f"the run waits at step {path} for {event}")
        self.path = path
        self.event = event
        self.deadline = deadline
        self.question = question


class ResumeBlocked(Exception):
    """Resuming would re-run a non-idempotent step that started but did not finish."""

    def __init__(self, path: str, event: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.event = event
        self.message = message


class ChainFailed(Exception):
    """A sub-chain failed: the calling step fails with this error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


class ChainLoadError(Exception):
    """A sub-chain cannot be run (not found, outside the project, check errors)."""


class EventUnavailable(Exception):
    """The event has no implementation this run can call."""


class ToolFailed(Exception):
    """A tool's attempt failed where it ran (a Temporal worker), which made its error there:
    the step records that error as it is, its type (`tool_error`, or `result` for a result
    that is not JSON) and its message."""

    def __init__(self, message: str, kind: ErrorType = "tool_error") -> None:
        super().__init__(message)
        self.message = message
        self.kind: ErrorType = kind


def error_of(kind: ErrorType, message: str, **extra: Any) -> dict[str, Any]:
    """An error object: its `type` (one of chainlang.status.ErrorType), its message, and more members."""
    return {"type": kind, "message": message, **extra}


def first_of_group(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception a failed group stands for: a limit first, then a blocked resume, a
    failure, a break; anything else (a bug, a cancellation) as it is."""
    flat: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            flat.append(exc)

    walk(group)
    for kind in (LimitExceeded, ResumeBlocked, StepFailed, ChainBroken):
        for exc in flat:
            if isinstance(exc, kind):
                return exc
    return flat[0]


# what the walker measures durations with: the process's performance counter, or, for a run
# that Temporal replays, the workflow's time (the same on every replay)
TIMER: ContextVar[Callable[[], float]] = ContextVar("chainlang_timer", default=time.perf_counter)


def perf() -> float:
    """Now, in seconds, for measuring a duration (see TIMER)."""
    return TIMER.get()()


def ms_since(start: float) -> float:
    return round((perf() - start) * 1000, 3)


def seconds(value: float) -> str:
    return f"{value:.10g}s"  # never 1.2096e+06s: a timeout may last up to a year


def short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kind_text(value: Any) -> str:
    from chainlang.expr.values import kind_of

    kind = kind_of(value)
    return {"null": "null", "object": "an object", "string": "a string", "number": "a number",
            "boolean": "a boolean"}.get(kind, kind)
