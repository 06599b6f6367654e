"""A scheduled task's firing (LANGUAGE.md §12): its action runs as the action of a hook on
`task.due`, the standard event `chainlang serve` fires when the task is due.

Running it as a hook gives a firing everything a hook's action has, with no second
mechanism: the values it captured from the chain that scheduled it, the hooks in force
around its steps, a transcript of its own (an emit of `task.due`), and resume. The
project's own `post:task.due` hooks fire beside it (to log or watch every firing).

The action is checked again when it fires, against the project as it is now: a tool the
action calls may have gone since it was scheduled. A firing that does not check fails
(and counts towards the task's dead letter) with the diagnostics.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from chainlang.compile.hooks import CompiledHook
    from chainlang.diagnostics import Diagnostic
    from chainlang.pipeline import LoadedFile
    from chainlang.registry.registry import Registry
    from chainlang.store import TaskRecord

__all__ = ["DUE_EVENT", "FiringProject", "TaskFiring", "action_hook", "task_firing"]

DUE_EVENT = "task.due"


class _Chains(Protocol):
    @property
    def registry(self) -> "Registry": ...
    @property
    def context(self) -> "list[LoadedFile]": ...


class _Hooks(Protocol):
    def matching(self, phase: str, event: str) -> "Sequence[CompiledHook]": ...


class FiringProject(Protocol):
    """What a firing reads of the project it fires in (the run's `runtime.emit.Project`):
    described here, so the task system stays below the run that fires its tasks."""

    @property
    def digest(self) -> str: ...
    @property
    def loader(self) -> _Chains: ...
    @property
    def hooks(self) -> _Hooks | None: ...


def action_hook(task_id: str, action: list[Any]) -> dict[str, Any]:
    """A scheduled task's action as the hook that runs it: a firing of `task.due`."""
    return {"id": task_id, "trigger": f"post:{DUE_EVENT}", "action": action}


@dataclass(frozen=True)
class TaskFiring:
    """What firing one scheduled task needs: the hooks to fire for it (its own first), the
    digest a resume compares, and the diagnostics when its action no longer checks."""

    task_id: str
    top: tuple["CompiledHook", ...]
    digest: str
    diagnostics: list["Diagnostic"]

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


def task_firing(project: FiringProject, task: "TaskRecord") -> TaskFiring:
    """Check and compile the action of `task` (a schedule) within `project`."""
    from chainlang.compile.hooks import compile_hooks
    from chainlang.pipeline import check_project
    from chainlang.tasks.stored import hook_file

    data: dict[str, Any] = task.definition if isinstance(task.definition, dict) else {}
    loaded = hook_file(task.id, action_hook(task.id, list(data.get("action") or [])),
                       dict(data.get("captured") or {}))
    digest = hashlib.sha256(f"{project.digest}\0{loaded.source.text}".encode("utf-8", "surrogatepass")).hexdigest()
    diagnostics, _, _ = check_project([loaded], project.loader.registry, project.loader.context)
    if any(d.severity == "error" for d in diagnostics):
        return TaskFiring(task.id, (), digest, diagnostics)
    own = compile_hooks((h, loaded.chain) for h in loaded.chain.hooks).hooks
    watchers = project.hooks.matching("post", DUE_EVENT) if project.hooks is not None else ()
    return TaskFiring(task.id, tuple(own) + tuple(h for h in watchers if h.key not in {o.key for o in own}),
                      digest, diagnostics)
