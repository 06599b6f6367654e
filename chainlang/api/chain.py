"""A chain of an open project, checked and compiled once, run many times."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from datetime import datetime

    from chainlang.api.project import Project
    from chainlang.compile import ExecutionGraph
    from chainlang.diagnostics import Diagnostic
    from chainlang.runtime.prepare import Prepared
    from chainlang.runtime.runner import RunResult

__all__ = ["Chain"]


class Chain:
    """A checked, compiled chain of `project` (from `project.chain(...)` or
    `project.chain_from_text(...)`). `run` does only a run's own work: its inputs, its
    transcript, its steps."""

    def __init__(self, project: "Project", prepared: "Prepared") -> None:
        self.project = project
        self.prepared = prepared
        if prepared.graph is None:
            from chainlang.errors import ChainInvalid

            raise ChainInvalid(prepared.diagnostics, what=f"the chain {prepared.path.name}")

    @property
    def name(self) -> str | None:
        """Its `chain:` name (None for an unnamed chain file)."""
        return self.graph.name

    @property
    def file(self) -> Path:
        """Its file (for a chain from text, the name it was checked under: no such file)."""
        return self.prepared.path

    @property
    def graph(self) -> "ExecutionGraph":
        """The compiled execution graph (what `chainlang graph` draws)."""
        graph = self.prepared.graph
        assert graph is not None  # a chain with errors is never made (ChainInvalid)
        return graph

    @property
    def inputs(self) -> dict[str, Any]:
        """Its inputs' JSON Schemas, by name."""
        return {name: dict(schema) for name, schema in self.graph.inputs.items()}

    def check(self) -> list["Diagnostic"]:
        """What checking it found: never an error (a chain with errors is not made), but
        warnings and notes, with their positions."""
        return list(self.prepared.diagnostics)

    async def run(self, inputs: Mapping[str, Any] | None = None, *, now: "datetime | str | None" = None,
                  thread: str | None = None, transcript: str | os.PathLike[str] | None = None,
                  notify: Callable[[str], None] | None = None, decider: Any = None, detach: bool = False,
                  answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
        """Run the chain with `inputs` and return how it ended.

        - `now` pins the run's clock (a datetime or ISO 8601 text);
        - `thread` attaches the run to a stored thread;
        - `transcript` is this run's transcript path (default: a new file in the project's
          transcripts directory);
        - `notify` receives its notifications (default: the project's, else the `chainlang`
          logger); `decider` answers its `decide` steps (default: the project's [decide]);
        - `detach`: a run that reaches a wait ends as `waiting` instead of waiting here;
          `answers` answers its `user.ask` steps (step id → answer);
        - `raise_on_failure`: a run that did not end ok raises (RunFailed, LimitExceeded,
          RunInterrupted...) instead of returning; otherwise `result.raise_for_status()`.

        Raises InputError for inputs the chain does not take."""
        from chainlang.runtime.runner import start_run

        project = self.project
        project._check_open()
        if inputs is not None and not isinstance(inputs, Mapping):
            from chainlang.errors import UsageError

            raise UsageError(f"inputs must be a dict of input names to values, not {type(inputs).__name__}")
        result = await start_run(
            self.prepared, project.engine, dict(inputs or {}), now=now, transcript=transcript,
            runs_dir=project.runs_dir, tools=project.tool_refs, notify=notify or project.notify, decider=decider,
            thread=thread, detach=detach, answers=dict(answers) if answers else None, key=project.key, memory=project.in_memory)
        if raise_on_failure:
            result.raise_for_status()
        return result

    def run_sync(self, inputs: Mapping[str, Any] | None = None, *, now: "datetime | str | None" = None,
                 thread: str | None = None, transcript: str | os.PathLike[str] | None = None,
                 notify: Callable[[str], None] | None = None, decider: Any = None, detach: bool = False,
                 answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
        """`run` for code without an event loop."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.run(inputs, now=now, thread=thread, transcript=transcript, notify=notify,
                                 decider=decider, detach=detach, answers=answers, raise_on_failure=raise_on_failure))

    def __repr__(self) -> str:
        return f"<chainlang.Chain {self.name or self.file}>"
