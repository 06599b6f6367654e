"""The errors of chainlang, at the bottom of the package graph.

Every package may import this module, and it imports nothing from chainlang, so an
error raised deep down (a transcript lock, a configuration file) can be caught by name
high up (the CLI, serve, an application) without the lower package importing the higher
one, and without anybody testing the wording of a message. Errors that stay inside one
package live in that package (`journal.integrity.IntegrityError`, `store.base.StoreError`,
`runtime.outcomes.LimitExceeded`, ...).

The hierarchy an application catches (the classes are exported from `chainlang`):

    ChainlangError
    ├── UsageError            how chainlang was called (a path, an option): nothing ran
    │   ├── InputError        the inputs (or an event's payload) given do not fit
    │   ├── ConfigError       chainlang.toml cannot be read (also a RegistryError)
    │   └── RunInUse          another process holds the run's transcript
    ├── RegistryError         the registered events do not fit together
    ├── ChainInvalid          the chain has check errors: nothing ran
    └── RunError              a run ended without succeeding (carries `.result`)
        ├── RunFailed         a step failed (`.step`, `.error_type`, the tool's exception as __cause__)
        │   └── ModelError    a model (an agent's, decide's) could not answer
        ├── LimitExceeded     a limit of the run stopped it (`.limit`)
        ├── RunInterrupted    the run was stopped before its end: resume continues it
        └── RunWaiting        the run ended at a wait (detached): its event or deadline continues it

`RunResult.raise_for_status()` and `EmitResult.raise_for_status()` raise the `RunError`
(or `ChainInvalid`, `InputError`) of a result that did not succeed. The CLI turns a
`UsageError` or a `RegistryError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Sequence

__all__ = [
    "ChainInvalid", "ChainlangError", "ConfigError", "InputError", "InputProblem", "LimitExceeded", "ModelError",
    "RegistryError", "RunError", "RunFailed", "RunInUse", "RunInterrupted", "RunWaiting", "UsageError",
]


class ChainlangError(Exception):
    """The base of every error chainlang raises on purpose: `except chainlang.ChainlangError`
    catches them all (and nothing else: a bug in chainlang is not one of them)."""


class UsageError(ChainlangError):
    """A problem with how chainlang was called (a missing path, a transcript that cannot be
    resumed, ...): nothing ran; exit code 2 in the CLI. The message says what is wrong and
    how to fix it."""


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the inputs given to a chain. `kind`: missing (a required input
    was not given), unknown (the chain declares no such input), invalid (its schema refuses
    the value: `detail` says why) or not_json (the value is not a JSON value: `detail` says
    where). `expected`: what the input's schema asks for, in words (e.g. "an integer"), or
    None; `declared`: the chain's inputs, for an unknown one; `hint`: a did-you-mean."""

    name: str
    kind: Literal["missing", "unknown", "invalid", "not_json"]
    detail: str = ""
    expected: str | None = None
    declared: tuple[str, ...] = ()
    hint: str | None = None

    def __str__(self) -> str:
        where = f"inputs[{self.name!r}]"
        if self.kind == "missing":
            needs = f" ({self.expected})" if self.expected else ""
            return f"{where}: missing; the chain needs it{needs}: add it to inputs"
        if self.kind == "unknown":
            declared = ", ".join(self.declared) or "none"
            hint = f"; {self.hint}" if self.hint else ""
            return f"{where}: the chain declares no such input (declared: {declared}){hint}"
        if self.kind == "not_json":
            return f"{where}: {self.detail} (inputs must be JSON values)"
        return f"{where}: {self.detail}"


class InputError(UsageError):
    """The inputs given to a chain do not fit its declared inputs: nothing ran. `problems`
    lists every one (`InputProblem`); `name` and `problem` are the first's input name and
    what is wrong with it, in words. The message speaks of `inputs['NAME']` (the CLI says
    `--input NAME=VALUE` instead). An emit's data that does not fit the event's payload
    schema is one too (`name` is `data`, `result` the EmitResult)."""

    def __init__(self, problems: Sequence[InputProblem], *, message: str | None = None, result: Any = None) -> None:
        if not problems:
            raise ValueError("an InputError needs at least one problem")
        self.problems: tuple[InputProblem, ...] = tuple(problems)
        first = self.problems[0]
        self.name: str = first.name
        self.problem: str = str(first).split(": ", 1)[1]
        self.result = result  # an emit's EmitResult (status invalid), when it comes from one
        super().__init__(message or "; ".join(str(p) for p in self.problems))

    def mask(self, mask: Callable[[str], str]) -> None:
        """Pass every text of the error (its message, each problem's detail) through `mask`,
        in place: a run's redaction, before the error leaves the run (a value the schema
        refused may quote a secret)."""
        self.problems = tuple(replace(p, detail=mask(p.detail)) for p in self.problems)
        self.problem = mask(self.problem)
        self.args = tuple(mask(arg) if isinstance(arg, str) else arg for arg in self.args)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (a serve worker, a process pool) with its fields
        return (_rebuild, (type(self), self.args, self.__dict__))


class RunInUse(UsageError):
    """Another process holds the transcript's lock (a run, or a resume of it, is still going).
    `pid` is the holder's process id when its head file names it."""

    def __init__(self, transcript: str | os.PathLike[str], pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{os.fspath(transcript)}: the run is in use by {who} (a chainlang run or resume of it "
                         "is still going); wait for it to end or stop it, then try again")
        self.transcript = os.fspath(transcript)
        self.pid = pid

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.transcript, self.pid))


class RegistryError(ChainlangError):
    """A problem with the set of registered events (e.g. a name declared twice); its
    subclasses in `chainlang.registry.errors` say which part of the registry."""


class ConfigError(RegistryError, UsageError):
    """A `chainlang.toml` that cannot be read or does not follow the config schema (read by
    the config, model, store and task layers, below the registry). Both a RegistryError
    and a UsageError: either `except` catches it."""


class ChainInvalid(ChainlangError):
    """The chain (or the project's hooks, for an emit) has check errors: nothing ran.
    `diagnostics` are the checker's findings (each with `file`, `line`, `column`,
    `message`, `rule` and `hint`); the message names the first error with its position.
    `result` is the RunResult or EmitResult whose status is `invalid`, when there is one."""

    def __init__(self, diagnostics: Sequence[Any], *, result: Any = None, what: str = "the chain") -> None:
        self.diagnostics: list[Any] = list(diagnostics)
        self.result = result
        errors = [d for d in self.diagnostics if getattr(d, "severity", "error") == "error"]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            hint = getattr(first, "hint", None)
            text = (f"{what} does not check: {first}{more}" + (f"; {hint}" if hint else "")
                    + "; fix it (chainlang check shows every error) and run it again")
        else:
            text = f"{what} does not check; see .diagnostics"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class RunError(ChainlangError):
    """A run (or an emit) that started and ended without succeeding. `result` is its
    RunResult or EmitResult (status, error, transcript, run_id), `status` and `error`
    (the run's error object: `type`, `message`, and `step`, `event` when a step ended it)
    come from it; `transcript` is where the run is recorded."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result
        self.status: str | None = getattr(result, "status", None)
        error = getattr(result, "error", None)
        self.error: dict[str, Any] = dict(error) if isinstance(error, dict) else {}
        self.transcript: Any = getattr(result, "transcript", None)
        self.run_id: str | None = getattr(result, "run_id", None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class RunFailed(RunError):
    """A step failed and ended the run (status `failed`). `step` is the step's path (as in
    the transcript; None when no step ended it, e.g. a hook), `event` the event it called,
    `error_type` the error's type (`tool_error`, `timeout`, `result`, `params`, `fail`, ...:
    docs/reference/execution.md) and `error` the whole error object. For an emit whose
    hook actions failed, `error_type` is `hook` and `step`, `event` are those of the first
    failed action's step (each hook's own error is in `result.fired`).

    When the tool ran in this process (the embedded engine) and raised, that exception is
    this error's `__cause__`, with its traceback. A tool that ran elsewhere (a Temporal
    worker) left only its message in `error`: then there is no cause."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message, result)
        step = self.error.get("step")
        self.step: str | None = str(step) if step is not None else None
        event = self.error.get("event")
        self.event: str | None = str(event) if event is not None else None
        self.error_type: str = str(self.error.get("type", "failed"))


class ModelError(RunFailed):
    """A step failed because a model could not answer: an agent's model or a model_call
    (`error_type` `model`), or nothing could decide a step's params (`decide`)."""


class LimitExceeded(RunError):
    """A limit of the run (max_steps, max_depth, the run's timeout, a model budget...)
    stopped it (status `limit`). `limit` names it as the chain's `limits:` does."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message, result)
        limit = self.error.get("limit")
        self.limit: str | None = str(limit) if limit is not None else None


class RunInterrupted(RunError):
    """The run was stopped before its end (cancelled, Ctrl-C, its process stopped): status
    `interrupted`. Its transcript keeps what it did: resume continues it."""


class RunWaiting(RunError):
    """A detached run ended at a wait (status `waiting`): the event it waits for (or its
    deadline) continues it, or a resume once that came. Only raised by raise_for_status:
    whether waiting is a failure is the caller's call."""


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickles an error whose __init__ takes more than its message, with its fields."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error
