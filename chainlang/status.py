"""The statuses and error types chainlang writes, as types: one place that names them all.

Transcripts, results and serve's replies carry them as plain strings (`"ok"`,
`"tool_error"`), so they are `Literal` types and plain `str` constants here, not enums:
`json.dumps`, `==` and `str()` see the same text as before. The journal's codec checks the
statuses it reads against these sets; the step pipeline and resume ask `retryable` whether
an attempt is tried again, so a live run and a resumed one cannot disagree.

Like `chainlang.errors`, this module imports nothing from chainlang: every layer may use it.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Final, Literal, Mapping, TypeGuard, get_args

__all__ = [
    "ERROR_TYPE_FORM", "ERROR_TYPES", "EXIT_CODES", "HOOK_STATUSES", "NEVER_RETRIED", "OUTCOMES", "RESERVED_TYPES", "RESUMABLE", "RETRIED", "RUN_STATUSES",
    "STEP_STATUSES",
    "ErrorType", "HookStatus", "Outcome", "RunStatus", "StepStatus", "is_outcome", "retryable",
]

# -- statuses

#: how a run ended, as `run_finished` records it (LANGUAGE.md §9)
RunStatus = Literal["ok", "broken", "failed", "limit", "interrupted", "waiting"]
#: what a run, an emit or a resume reports: a recorded status, or `invalid` (the chain or
#: the payload did not check: nothing ran) or `duplicate` (an emit id seen before)
Outcome = Literal["ok", "broken", "failed", "limit", "interrupted", "waiting", "invalid", "duplicate"]
#: how an attempt of a step ended (`step_finished`)
StepStatus = Literal["ok", "failed", "skipped", "cancelled"]
#: how a hook's action ended (`hook_finished`)
HookStatus = Literal["ok", "failed", "cancelled"]

OK: Final = "ok"
BROKEN: Final = "broken"
FAILED: Final = "failed"
LIMIT: Final = "limit"
INTERRUPTED: Final = "interrupted"
WAITING: Final = "waiting"  # ended at a wait (--detach, §15): resumed when its event or deadline comes
INVALID: Final = "invalid"
DUPLICATE: Final = "duplicate"
SKIPPED: Final = "skipped"
CANCELLED: Final = "cancelled"

RUN_STATUSES: frozenset[str] = frozenset(get_args(RunStatus))
#: the ends of a run that `resume` (and serve) continue
RESUMABLE: frozenset[str] = frozenset({INTERRUPTED, WAITING})
STEP_STATUSES: frozenset[str] = frozenset(get_args(StepStatus))
HOOK_STATUSES: frozenset[str] = frozenset(get_args(HookStatus))
OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))


def is_outcome(value: object) -> TypeGuard[Outcome]:
    """Whether `value` (a status read from outside: a serve reply, a worker's result) is an Outcome."""
    return isinstance(value, str) and value in OUTCOMES

#: the exit status of `chainlang run`, `emit` and `resume` for each outcome
EXIT_CODES: Final[Mapping[str, int]] = {OK: 0, BROKEN: 0, DUPLICATE: 0, FAILED: 1, INVALID: 1, INTERRUPTED: 1,
                                        LIMIT: 3, WAITING: 4}

# -- error types: the `type` of an error object (`{"type": ..., "message": ...}`)

ErrorType = Literal[
    # a step's attempt (docs/reference/execution.md, Errors)
    "tool_error",  # the tool raised an exception
    "timeout",  # the attempt, or a block, took longer than its timeout
    "result",  # the tool's result is not JSON, or its result schema rejects it
    "params",  # the params are still invalid after the decide model's answer
    "decide",  # nothing could decide, and the decide fallback is fail
    "expression",  # an expression in params, if, foreach or decide failed
    "foreach",  # a foreach expression did not give a list
    "unavailable",  # the event has no implementation this run can call
    "not_allowed",  # the event is not in an allow list in force
    "chain",  # the sub-chain it called failed or could not be loaded
    "model",  # the model an agent asked could not answer (also a failed model_call)
    "thread",  # its result could not be added to the run's thread
    "limit",  # a limit of the run stopped it (and the run)
    "fail",  # a `fail:` step ended the chain on purpose (runtime/flow.py)
    "cancelled",  # stopped while it ran (a sibling failed, the run stopped, a hook cancelled it)
    "failed",  # a failed step recorded without an error object (read back from an old transcript)
    # a hook
    "hook",  # a hook's condition or action failed
    "internal",  # a bug in chainlang (a run's end too)
    # a run's end
    "break",  # on_error: break ended the run (status broken)
    "interrupted",  # the run was stopped before its end: resume continues it
    "waiting",  # the run ended at a wait (--detach): its event, or its deadline, continues it
    "unsafe_resume",  # resume stopped at a step that is not idempotent and did not finish
    "secret",  # a secret the run needs is not set
    # a stored task's run, and the Temporal engine
    "invalid",  # the project's hooks, or a task's action, do not check
    "usage",  # a task's action cannot be started as written
    "worker",  # a Temporal worker cannot run it (its copy of the project differs)
    "temporal",  # Temporal does not know the workflow, or failed it
]

TOOL_ERROR: Final = "tool_error"
TIMEOUT: Final = "timeout"
RESULT: Final = "result"
PARAMS: Final = "params"
DECIDE: Final = "decide"
EXPRESSION: Final = "expression"
FOREACH: Final = "foreach"
UNAVAILABLE: Final = "unavailable"
NOT_ALLOWED: Final = "not_allowed"
CHAIN: Final = "chain"
MODEL: Final = "model"
THREAD: Final = "thread"
HOOK: Final = "hook"
INTERNAL: Final = "internal"
BREAK: Final = "break"
UNSAFE_RESUME: Final = "unsafe_resume"
SECRET: Final = "secret"
USAGE: Final = "usage"
WORKER: Final = "worker"
TEMPORAL: Final = "temporal"
FAIL: Final = "fail"
# LIMIT, CANCELLED, FAILED, INTERRUPTED and INVALID above are error types too (the same text)

ERROR_TYPES: frozenset[str] = frozenset(get_args(ErrorType))

#: the failures `retry` tries again: what a tool or a timeout did, which another attempt may not
#: do. Not retried: what would fail the same way again (params, decide, expression, allow
#: list, ...) and a sub-chain's failure (its own steps have their own `retry`).
RETRIED: frozenset[ErrorType] = frozenset({TOOL_ERROR, TIMEOUT, RESULT})


#: the types chainlang gives to failures that are not a tool's own: a tool's
#: `chainlang.StepError` may not claim them (a transcript saying `limit` or `cancelled` must
#: mean it), except `timeout` (a tool that gave up waiting on a service may say so). A type
#: added to ErrorType above is reserved, and never retried, at once.
RESERVED_TYPES: frozenset[str] = ERROR_TYPES - {TIMEOUT}
#: the form of every error type, chainlang's and a tool's own (checked in `retry.on` too)
ERROR_TYPE_FORM = re.compile(r"[a-z][a-z0-9_]*")
#: the types `retry` never tries again, whatever its `on` says: decided before the tool was
#: called (another attempt fails the same way), a sub-chain's failure (its own steps retry),
#: or a stop from outside the step (a limit, a cancellation, `fail:`, the run's end)
NEVER_RETRIED: frozenset[str] = ERROR_TYPES - RETRIED


def retryable(error: Mapping[str, Any] | None, on: Collection[str] | None = None) -> bool:
    """Whether `retry` tries a step again after an attempt that failed with `error`; `on` is
    the step's `retry.on` (None: every failure of a tool or a timeout, a tool's own types
    included). Asked by the step pipeline after each failed attempt, and by resume for an
    attempt that failed just before the run was interrupted (so both answer the same)."""
    kind = error.get("type") if error is not None else None
    if not isinstance(kind, str) or kind in NEVER_RETRIED:
        return False
    return kind in on if on is not None else True
