"""What one run shares between its chains and steps: the journal, the services, the
counters, the prepared events and the bindings of each compiled chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from chainlang.journal.records import Clock
from chainlang.runtime.context import Clock as RunClock

if TYPE_CHECKING:
    from pathlib import Path

    from chainlang.compile import ExecutionGraph
    from chainlang.compile.hooks import HookSet
    from chainlang.runtime.hooks import HookActions
    from chainlang.journal.records import Record
    from chainlang.registry.registry import Registry
    from chainlang.runtime.events import EventRuntime
    from chainlang.runtime.interceptors import Interceptor
    from chainlang.runtime.models import ModelService
    from chainlang.runtime.replay import Replay
    from chainlang.runtime.scope import Binder


@dataclass
class RunState:
    """Everything one run shares: the services, the counters, the compiled sub-chains."""

    run_id: str
    registry: "Registry"
    record: Callable[["Record"], Any]  # writes one record to the journal (and shows it)
    decider: Any  # a chainlang.runtime.decide.Decider
    clock: RunClock
    state_dir: "Path"
    facts: dict[str, Any]
    max_steps: int
    interceptors: tuple["Interceptor", ...] = ()
    commit: Callable[[], None] = lambda: None  # seals the journal up to here: before an action that may not repeat
    # lets the next record wait to share a write with later ones (an idempotent step's: its loss
    # in a crash only makes the step run again); chainlang.journal.jsonl.TranscriptWriter.defer_next
    defer: Callable[[], None] = lambda: None
    replay: "Replay | None" = None
    notify: Callable[[str], None] = lambda text: None
    load_chain: "Callable[[str, str], ExecutionGraph] | None" = None  # (name or path, caller file) → graph
    steps_run: int = 0
    # the event steps running now (in any branch), by path: see runtime/step.StepPipeline
    in_flight: dict[str, int] = field(default_factory=dict)
    events: dict[str, "EventRuntime"] = field(default_factory=dict)
    binders: dict[int, "Binder"] = field(default_factory=dict)
    hooks: "HookSet | None" = None  # the hooks of an emit (a run's are its chain's graph.hook_set)
    project: "Path | None" = None  # the project's directory (its store, for the task events)
    # the registry without the running chain's own declarations: what a stored hook is checked with
    base_registry: "Registry | None" = None
    captured: dict[str, dict[str, Any]] = field(default_factory=dict)  # step path → what its action captured
    actions: "HookActions | None" = None  # the post-hook actions running beside the chain
    models: "ModelService | None" = None  # the model tiers, under the run's budgets (§13)
    # makes the executor of each chain run: None is chainlang.runtime.invoke.LocalExecutor (tools in
    # this process); the Temporal engine gives one that runs each attempt as an activity
    executor: "Callable[[Any], Any] | None" = None
    # awaited with a chain loaded during the run, before its steps run: the Temporal engine reads
    # its {thread.ID.KEY} references there (chainlang.engine.temporal.threadrefs); None elsewhere
    read_ahead: "Callable[[list[ExecutionGraph]], Awaitable[None]] | None" = None
    # runs the chain agent.chain wrote elsewhere: the Temporal engine, as a child workflow
    # (chainlang.engine.temporal.children.run_written); None, or a None answer: in this run
    run_written: "Callable[..., Awaitable[Any]] | None" = None
    # how a `wait` waits (runtime/wait_step.py): None is the embedded engine's StoreWaiter
    # (runtime/waiting.py); Temporal gives one that waits for a signal with a timer
    waiter: Any = None
    detach: bool = False  # `run --detach`: the run ends as `waiting` at its first wait
    # step path → the exception its tool last raised in this process: in memory only (never
    # recorded), for the API's RunFailed.__cause__ (chainlang.runtime.raising)
    exceptions: dict[str, BaseException] = field(default_factory=dict, repr=False)
    _merged: dict[tuple[int, int], "HookSet"] = field(default_factory=dict, repr=False)

    def merged_hooks(self, outer: "HookSet | None", own: "HookSet") -> "HookSet":
        """The hooks in force in a sub-chain: its caller's and its own (made once per pair)."""
        if outer is None or not outer:
            return own
        key = (id(outer), id(own))
        merged = self._merged.get(key)
        if merged is None:
            merged = self._merged[key] = outer.with_hooks(own)
        return merged


class StepClock:
    """The run's clock as one step reads it: every reading is recorded (`clock` record with
    the step path), and on resume the readings recorded for the step are given back first."""

    __slots__ = ("run", "step")

    def __init__(self, run: RunState, step: str) -> None:
        self.run = run
        self.step = step

    def now(self) -> datetime:
        replayed = self.run.replay.clock.get(self.step) if self.run.replay else None
        if replayed:
            return datetime.fromisoformat(replayed.pop(0))
        value = self.run.clock.now()
        self.run.record(Clock(value.isoformat(), self.step))
        return value


__all__ = ["RunState", "StepClock"]
