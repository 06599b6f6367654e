"""What a tool receives as `ctx`: the run's facts and services, never the interpreter itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Protocol


class Clock(Protocol):
    """The run's clock. Pinned by `--now`; every reading is recorded and replayed on resume."""

    def now(self) -> datetime: ...


@dataclass(frozen=True)
class FixedClock:
    """A pinned clock (`chainlang run --now ISO`): always the same aware datetime."""

    at: datetime

    def now(self) -> datetime:
        return self.at


class SystemClock:
    """The machine's clock, as an aware datetime in the local time zone."""

    def now(self) -> datetime:
        return datetime.now().astimezone()


ProgressReporter = Callable[[str, "float | None"], None]
Notifier = Callable[[str], None]


@dataclass(frozen=True)
class RunContext:
    """Passed to a tool whose function has a `ctx` parameter.

    - `idempotency_key` is stable for this step attempt across resumes (run id + step path
      + attempt), so a tool can make its side effect happen at most once.
    - `progress(message, fraction)` reports progress: shown live and recorded as
      `step_progress` in the transcript. `fraction` is 0.0–1.0 or None.
    - `notify(text)` shows a line to the user (stderr of `chainlang run`).
    - `state_dir` is where tools keep files of the run's project (notifications log, stores).
    """

    run_id: str
    chain: str | None
    step: str
    event: str
    attempt: int
    idempotency_key: str
    clock: Clock
    state_dir: Path
    progress: ProgressReporter = field(default=lambda message, fraction=None: None)
    notify: Notifier = field(default=lambda text: None)
    # for the engine's own events (task.*): the project's directory, the run's registry, and
    # the values of this chain that the step's action captured
    project: Path | None = None
    registry: Any = None
    captured: dict[str, Any] = field(default_factory=dict)
    # for the agent events (§13): the run's model tiers as this step asks them (budgeted,
    # recorded), the run's decider, and the allow lists in force (what a model may plan with)
    models: Any = None
    decider: Any = None
    allow: tuple[tuple[str, ...], ...] = ()

    def now(self) -> datetime:
        return self.clock.now()
