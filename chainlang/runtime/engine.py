"""The engine seam: what an engine does with work admitted here (LANGUAGE.md §14).

The front half of every command is the engine's business of nobody: a chain is checked
and prepared, its inputs and secrets read, its transcript locked and opened (a
`runtime.session.Session`); an emit's payload is checked and its key claimed. Then an
`Engine` runs it: the embedded engine in this process (`runtime.embedded`), or Temporal's
workers (`chainlang.engine.temporal`), whose records the session writes as they come.
The engine of a project is chosen once, from its configuration, by
`chainlang.engine.engine_for`; this package knows only the protocol and its own engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.compile.hooks import CompiledHook
    from chainlang.config.project import ProjectConfig
    from chainlang.runtime.emit import EmitResult, Project
    from chainlang.runtime.host import RunEnd
    from chainlang.runtime.prepare import Prepared
    from chainlang.runtime.replay import Replay
    from chainlang.runtime.session import Session

__all__ = ["Engine", "EngineChooser", "EngineUnavailable", "FireJob", "RunJob", "embedded_only"]


class EngineUnavailable(UsageError):
    """The engine cannot be reached now (Temporal's frontend is down): nothing it holds is
    lost, and asking again later may succeed, unlike the other UsageErrors."""


@dataclass
class RunJob:
    """A chain run admitted: checked, its inputs and secrets read, its transcript open."""

    prepared: "Prepared"
    run_id: str
    header: dict[str, Any]  # the run_started record's content
    inputs: dict[str, Any]
    pinned: datetime | None = None  # --now
    replay: "Replay | None" = None  # a resume: what the transcript recorded
    decider: Any = None  # the caller's (it closes it); None: the engine makes and closes its own
    detach: bool = False  # end as `waiting` at a wait instead of waiting in this process (§15)
    answers: Any = None  # `--answer`: runtime.scripted_answers.ScriptedAnswers (None: none)


@dataclass
class FireJob:
    """An emit admitted (its payload checked, its key claimed), or a scheduled task's firing."""

    project: "Project"
    run_id: str
    header: dict[str, Any]  # with "emit": {"event", "data", "id"?, "task"?}
    pinned: datetime | None = None
    replay: "Replay | None" = None
    decider: Any = None
    top: "tuple[CompiledHook, ...] | None" = None  # the hooks to fire (a task's action); None: the event's
    task: tuple[str, str] | None = None  # a task's firing: (task id, the digest of its plan)

    @property
    def event(self) -> str:
        return str(self.header["emit"]["event"])


class Engine(Protocol):
    """What runs admitted work. `run` and `fire` write through the session and return how
    the work ended; `resume` continues an interrupted transcript (or refuses, where the
    engine continues runs by itself); `ended` takes over an emit whose process died; `wake`
    tells runs whose waits were settled in the store (§15)."""

    kind: str

    def decider(self, config: "ProjectConfig | None") -> Any:
        """What decides the work's `decide` steps here (None: the engine's workers decide)."""
        ...

    async def run(self, job: RunJob, session: "Session") -> "RunEnd": ...

    async def fire(self, job: FireJob, session: "Session") -> "RunEnd": ...

    async def resume(self, transcript: Path, **options: Any) -> Any: ...

    async def ended(self, project: "Project", run_id: str, event: str, where: Path,
                    **options: Any) -> "EmitResult | None": ...

    async def wake(self, root: Path, waits: Any) -> list[str]:
        """Tell the runs whose waits were just settled in the store (a delivery, a cancel:
        WaitRows, or {run_id, step, engine}) that they may go on (§15); what could not be told
        now, one line each (the store has it: the engine's own sweep tells them later)."""
        ...


#: picks the engine of a project from its configuration (chainlang.engine.engine_for)
EngineChooser = Callable[["ProjectConfig | None"], Engine]


def embedded_only(config: "ProjectConfig | None") -> Engine:
    """The chooser of code that calls the runtime directly: the embedded engine, and a clear
    refusal for a project configured for another (whose runs must not silently run here)."""
    from chainlang.config.engine_kind import engine_kind
    from chainlang.runtime.embedded import EMBEDDED

    kind = engine_kind(config)
    if kind != "embedded":
        raise UsageError(f"this project runs on the {kind} engine ([engine] in chainlang.toml): start its runs with "
                         "the chainlang command or chainlang.run, which hand them to that engine")
    return EMBEDDED
