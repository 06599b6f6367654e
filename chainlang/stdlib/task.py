"""The `task` standard events backed by the project's store (LANGUAGE.md §12).

- `task.register` stores a hook. It is checked first, exactly as a hook of a hooks file
  (with the values of this chain its action captured); a hook that does not check fails the
  step with the diagnostics and nothing is stored. From then on it is in force for every
  later run, emit and check of the project, until `task.cancel`. Its task id is the `id`
  given, or derived from the step attempt's idempotency key, so a step that runs again after
  a crash finds the hook it stored instead of storing a second one.
- `task.list` lists the stored tasks; `task.cancel` archives one.

`task.schedule` is declared, not implemented: its tasks need `chainlang serve` to fire.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext
    from chainlang.store import Store, TaskRecord

__all__ = ["cancel", "list_tasks", "register"]

_STATUSES = ("pending", "active", "completed", "archived", "dead")


def register(ctx: "RunContext", trigger: str, action: list[Any], condition: str | None = None, priority: int = 0,
             max_depth: int | None = None, id: str | None = None, mode: str | None = None,
             description: str | None = None) -> dict[str, Any]:
    """Store a hook of the project; returns `{"task_id": ...}`."""
    from chainlang.diagnostics import has_errors
    from chainlang.tasks.stored import check_hook

    root = _project(ctx)
    task_id = id or "task-" + hashlib.sha256(ctx.idempotency_key.encode("utf-8")).hexdigest()[:12]
    origin = f"{ctx.run_id}/{ctx.step}"
    definition: dict[str, Any] = {"id": task_id, "trigger": trigger, "action": action}
    optional = {"condition": condition, "max_depth": max_depth, "mode": mode, "description": description}
    definition.update({k: v for k, v in optional.items() if v is not None})
    if priority:
        definition["priority"] = priority
    with _store(root) as store:
        existing = store.get_task(task_id)
        if existing is not None:
            if existing.origin == origin and existing.status == "active":
                return {"task_id": task_id}  # this very step stored it before an interruption
            raise ValueError(f"a task with id {task_id!r} exists already ({existing.status}, registered by "
                             f"{existing.origin or 'another run'}); cancel it first (chainlang tasks cancel "
                             f"{task_id}) or give another id")
        diagnostics = check_hook(root, ctx.registry, task_id, definition, dict(ctx.captured))
        if has_errors(diagnostics):
            errors = [d for d in diagnostics if d.severity == "error"]
            shown = "; ".join(f"{d.line}:{d.column}: {d.message}" for d in errors[:3])
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise ValueError(f"the hook does not check, so it was not stored: {shown}{more}")
        store.add_task("hook", {"hook": definition, "captured": dict(ctx.captured)}, id=task_id, origin=origin)
    return {"task_id": task_id}


def list_tasks(ctx: "RunContext", filter: dict[str, Any] | None = None, status: str | None = None) -> dict[str, Any]:
    """The stored tasks (optionally of one status, and whose fields equal `filter`'s)."""
    from chainlang.tasks.stored import store_exists

    root = _project(ctx)
    if not store_exists(root):
        return {"tasks": []}
    with _store(root) as store:
        tasks = [describe(task) for task in store.list_tasks(status=status)]
    wanted = dict(filter or {})
    return {"tasks": [t for t in tasks if all(t.get(k) == v for k, v in wanted.items())]}


def cancel(ctx: "RunContext", task_id: str) -> dict[str, Any]:
    """Archive a stored task: a hook stops firing, a schedule stops running."""
    from chainlang.store import StoreError

    with _store(_project(ctx)) as store:
        try:
            task = store.cancel_task(task_id)
        except StoreError as exc:
            raise ValueError(str(exc)) from None
    return {"task_id": task.id, "status": task.status}


def describe(task: "TaskRecord") -> dict[str, Any]:
    """A task as `task.list` and `chainlang tasks` show it."""
    data = task.definition if isinstance(task.definition, dict) else {}
    out: dict[str, Any] = {"task_id": task.id, "status": task.status}
    if task.kind == "hook":
        hook = data.get("hook") or {}
        out["type"] = "hook"
        for key in ("trigger", "condition", "action"):
            if key in hook:
                out[key] = hook[key]
    else:
        out["type"] = str(data.get("type", "once"))
        for key in ("at", "interval", "cron", "action"):
            if key in data:
                out[key] = data[key]
        if task.next_run:
            out["due"] = task.next_run
    if task.last_run:
        out["last_run"] = task.last_run
    out["failures"] = task.failures
    if task.origin:
        out["origin"] = task.origin
    return out


def _project(ctx: "RunContext") -> Any:
    if ctx.project is None:
        raise ValueError("the task events need the project's store: run them with chainlang run or chainlang emit")
    return ctx.project


def _store(root: Any) -> "Store":
    from chainlang.store import StoreError, open_store

    try:
        return open_store(root)
    except StoreError as exc:
        raise ValueError(f"the project's store cannot be opened: {exc}") from None
