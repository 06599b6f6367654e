"""Resume: what an earlier attempt of a run recorded, and the decisions made from it.

The walker goes through the chain again from the top; for each event step the pipeline
asks this module whether the step finished before (its recorded outcome is used), is to
go on retrying, or started without an end (run again if that is safe, else stop and ask).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chainlang.journal.records import Decide, HookFinished, ModelCall, StepFinished, StepStarted
from chainlang.runtime.outcomes import ResumeBlocked
from chainlang.runtime.retry_policy import tries_again

if TYPE_CHECKING:
    from chainlang.runtime.events import EventRuntime


@dataclass
class Replay:
    """What an earlier attempt of this run recorded (from its transcript)."""

    finished: dict[str, StepFinished] = field(default_factory=dict)  # step path → its last end
    started: dict[str, StepStarted] = field(default_factory=dict)  # step path → its last start
    decisions: dict[str, list[Decide]] = field(default_factory=dict)  # step path → decisions, in order
    clock: dict[str, list[str]] = field(default_factory=dict)  # step path → clock readings
    # step path → when (the journal's ts) its first clock reading was recorded: the start of a
    # repeat's delay (chainlang.runtime.loops), whose rest a resume waits
    clock_at: dict[str, str] = field(default_factory=dict)
    # step path → when (the journal's ts) its last attempt ended: a failed one to be retried
    # ended as the wait before the next attempt began, whose rest a resume waits (step.py)
    finished_at: dict[str, str] = field(default_factory=dict)
    # hook firings by (step path or "" for an emitted event, hook key)
    hooks_fired: set[tuple[str, str]] = field(default_factory=set)
    hooks_finished: dict[tuple[str, str], HookFinished] = field(default_factory=dict)
    hooks_ended: set[tuple[str, str]] = field(default_factory=set)  # finished or dropped: not run again
    # step path → the answers its model calls got, in order (a failed call is asked again)
    model_calls: dict[str, list[ModelCall]] = field(default_factory=dict)
    model_calls_made: int = 0  # every recorded call, failed ones too: what the budget already spent
    model_tokens_used: int = 0
    # step path → the wait it began and how that wait ended (§15; runtime/wait_step.py)
    waits_started: dict[str, Any] = field(default_factory=dict)
    waits_finished: dict[str, Any] = field(default_factory=dict)
    rerun: frozenset[str] = frozenset()  # unfinished non-idempotent steps the user says to run again
    skip: frozenset[str] = frozenset()  # ... or to skip

    def add_model_call(self, call: ModelCall) -> None:
        self.model_calls_made += 1
        self.model_tokens_used += sum(v for v in call.usage.values() if isinstance(v, int) and not isinstance(v, bool))
        if call.answer is not None:
            self.model_calls.setdefault(call.step, []).append(call)

    def retries_left(self, ipath: str, done: StepFinished, retry: Any = None) -> bool:
        """A failed attempt that was to be retried when the run was interrupted (in the wait
        before the next attempt): the resume goes on with the next attempt, after what is
        left of that wait (retry_wait_began). `retry` is the step's `retry` (its `on` says
        which error types are tried again)."""
        if done.status != "failed":
            return False
        started = self.started.get(ipath)
        most = started.max_attempts if started is not None else None
        # the live run's own rule (step.py), so a resumed run retries exactly what a live one does
        return most is not None and tries_again(retry, done.attempt, done.error, most)

    def retry_wait_began(self, ipath: str) -> str | None:
        """When the wait before the next attempt began, if the run stopped in it: the `ts`
        of the failed attempt's end. None when the last attempt did not end (it runs again,
        the wait before it was served)."""
        return self.finished_at.get(ipath) if ipath in self.finished else None

    def first_attempt(self, rt: "EventRuntime", ipath: str) -> int:
        """The attempt to start with. An attempt that started and did not finish is run
        again (same attempt number, so the same idempotency key) if the event is
        idempotent, a chain, or the user said so; otherwise the run stops here."""
        started = self.started.get(ipath)
        if started is None:
            return 1
        if ipath in self.finished:  # that attempt failed and is to be retried
            return started.attempt + 1
        # no end recorded, or `cancelled` (interrupted mid-call: its effect is just as unknown)
        if rt.spec.idempotent or rt.runs_chain or ipath in self.rerun:
            return started.attempt
        name = rt.spec.name
        raise ResumeBlocked(ipath, name, (
            f"step {ipath} ({name}) started but did not finish before the run was interrupted, and "
            f"{name} is not idempotent: it may or may not have taken effect. Check, then resume with "
            f"--rerun {ipath} to run it again or --skip {ipath} to go on without it"))


__all__ = ["Replay"]
