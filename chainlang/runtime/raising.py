"""Which error a run's result raises: `RunResult.raise_for_status()` and
`EmitResult.raise_for_status()` (and the API's `raise_on_failure=True`) turn a status into
one of chainlang.errors' classes, with a message in the words of the Python API.

Also here: how the exception a tool raised in this process reaches the RunResult (never
the transcript), to be the `__cause__` of the RunFailed: `execute` (runtime/runner.py)
gives the run a dict through `KEPT`, the embedded engine's run shares it as its
`RunState.exceptions`, and each step whose tool raised (runtime/invoke.tool_failure)
leaves its exception there under its path.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from chainlang.errors import (ChainInvalid, ChainlangError, InputError, InputProblem, LimitExceeded, ModelError,
                              RunFailed, RunInterrupted, RunWaiting)
from chainlang.status import DECIDE, MODEL, TOOL_ERROR

#: the exceptions the tools of the run executing now raised, by step path (set by execute)
KEPT: ContextVar[dict[str, BaseException] | None] = ContextVar("chainlang_kept_exceptions", default=None)

# the statuses that are not a failure: no error
_SUCCEEDED = frozenset({"ok", "broken", "duplicate"})
# the error types that say a model could not answer
_MODEL_TYPES = frozenset({MODEL, DECIDE})


def error_for(result: Any) -> ChainlangError | None:
    """The error a RunResult or EmitResult stands for (None: it succeeded: ok, broken, or a
    duplicate emit). For a failed run whose tool raised in this process, the error's
    `__cause__` is that exception (with its traceback)."""
    status = result.status
    if status in _SUCCEEDED:
        return None
    if status == "invalid":
        return _invalid(result)
    what = _what(result)
    error: dict[str, Any] = result.error if isinstance(result.error, dict) else {}
    message = _sentence(error.get("message"))
    where = _where(result)
    if status == "failed":
        return _failed(result, what, error, message, where)
    if status == "limit":
        limit = error.get("limit")
        named = f" {limit}" if limit else ""
        fix = (f"; raise limits.{limit} in the chain, or make it do less" if limit else "")
        return LimitExceeded(f"{what} stopped at its limit{named}: {message}{fix}{where}", result)
    if status == "interrupted":
        again = (f"; continue it with chainlang.resume({str(result.transcript)!r})"
                 if result.transcript is not None else "")
        return RunInterrupted(f"{what} was interrupted before its end{again}", result)
    if status == "waiting":
        return RunWaiting(f"{what} is waiting: {message}{where}", result)
    return RunFailed(f"{what} ended with the status {status!r}: {message}{where}", result)  # a status of a newer run


def raise_for_status(result: Any) -> None:
    """Raise `error_for(result)`, if there is one."""
    error = error_for(result)
    if error is not None:
        raise error


def _failed(result: Any, what: str, error: dict[str, Any], message: str, where: str) -> RunFailed:
    """RunFailed (ModelError) for a failed run, or an emit whose hook actions failed: then
    the step and event are those of the first failed action's step."""
    step, event, kind = error.get("step"), error.get("event"), str(error.get("type", "failed"))
    at = f" at step {step}" + (f" ({event})" if event else "") if step is not None else ""
    action = next((f for f in getattr(result, "fired", None) or ()
                   if isinstance(f, dict) and f.get("status") == "failed" and isinstance(f.get("error"), dict)), None)
    detail = ""
    if action is not None:  # an emit: which hook failed, where, and why
        first: dict[str, Any] = action["error"]
        step, event = first.get("step"), first.get("event")
        detail = (f" (hook {action.get('hook')}" + (f", step {step}" if step is not None else "")
                  + (f" ({event})" if event else "") + f": {first.get('type')}: {_sentence(first.get('message'))})")
    cause = getattr(result, "exception", None)
    fix = "; the tool's exception is this error's __cause__" if cause is not None else ""
    cls = ModelError if kind in _MODEL_TYPES else RunFailed
    failed = cls(f"{what} failed{at}: {kind}: {message}{detail}{fix}{where}", result)
    if action is not None:
        failed.step = str(step) if step is not None else None
        failed.event = str(event) if event is not None else None
    if cause is not None:
        failed.__cause__ = cause
    return failed


def _invalid(result: Any) -> ChainlangError:
    """An emit whose data does not fit the payload is the caller's input; otherwise the chain
    (or the hooks) did not check."""
    event = getattr(result, "event", None)
    problems = list(getattr(result, "errors", None) or ())
    if event is not None and problems:
        return InputError([InputProblem("data", "invalid", str(p)) for p in problems],
                          message=f"the data of {event} does not fit its payload schema: "
                                  f"{'; '.join(str(p) for p in problems)}; give data that does",
                          result=result)
    what = f"the hooks of the project (emitting {event})" if event is not None else "the chain"
    return ChainInvalid(result.diagnostics, result=result, what=what)


def _what(result: Any) -> str:
    event = getattr(result, "event", None)
    kind = f"the emit of {event}" if event is not None else "the run"
    return f"{kind} {result.run_id}" if result.run_id else kind


def _where(result: Any) -> str:
    return f" (transcript: {result.transcript})" if result.transcript is not None else ""


def _sentence(text: Any) -> str:
    return str(text).rstrip(".") if text else "no message"


def kept_exception(kept: dict[str, BaseException], error: dict[str, Any] | None) -> BaseException | None:
    """The exception of the step that failed a run, if its tool raised it in this process."""
    if not error or error.get("type") != TOOL_ERROR or error.get("step") is None:
        return None
    return kept.get(str(error["step"]))


__all__ = ["KEPT", "error_for", "kept_exception", "raise_for_status"]
