"""The `task` standard events backed by the project's store (LANGUAGE.md §12).

- `task.register` stores a hook. It is checked first, exactly as a hook of a hooks file
  (with the values of this chain its action captured); a hook that does not check fails the
  step with the diagnostics and nothing is stored. From then on it is in force for every
  later run, emit and check of the project, until `task.cancel`. Its task id is the `id`
  given, or derived from the step attempt's idempotency key, so a step that runs again after
  a crash finds the hook it stored instead of storing a second one.
- `task.schedule` stores a timed chain: its times read against the run's clock, its action
  checked as the action of a hook on `task.due` (the event `chainlang serve` fires when the
  task is due), with the values it captured.
- `task.list` lists the stored tasks; `task.cancel` archives one.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from chainlang.stdlib.projectstore import open_store, project_of
from chainlang.tasks.firing import action_hook

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext
    from chainlang.store import Store, TaskRecord

__all__ = ["cancel", "list_tasks", "register", "schedule"]

_STATUSES = ("pending", "active", "completed", "archived", "dead")


def register(ctx: "RunContext", trigger: str, action: list[Any], condition: str | None = None, priority: int = 0,
             max_depth: int | None = None, id: str | None = None, mode: str | None = None,
             description: str | None = None) -> dict[str, Any]:
    """Store a hook of the project; returns `{"task_id": ...}`."""
    root, task_id, origin = project_of(ctx, "task"), _task_id(ctx, id), f"{ctx.run_id}/{ctx.step}"
    definition: dict[str, Any] = {"id": task_id, "trigger": trigger, "action": action}
    optional = {"condition": condition, "max_depth": max_depth, "mode": mode, "description": description}
    definition.update({k: v for k, v in optional.items() if v is not None})
    if priority:
        definition["priority"] = priority
    with open_store(root) as store:
        if _stored_before(store, task_id, origin) is not None:
            return {"task_id": task_id}  # this very step stored it before an interruption
        _check(root, ctx, task_id, definition)
        given = {"hook": definition, "captured": dict(ctx.captured)}
        _warn_if_masked(ctx, task_id, given, _add(store, "hook", given, task_id, origin))
    return {"task_id": task_id}


def schedule(ctx: "RunContext", type: str, action: list[Any], at: str | None = None, interval: str | None = None,
             cron: str | None = None, misfire: str = "once", id: str | None = None,
             description: str | None = None) -> dict[str, Any]:
    """Store a timed chain of the project; returns `{"task_id": ..., "next_run": ...}`.

    The times are read against the run's clock now; `chainlang serve` runs the action when
    it is due, as a firing of `task.due`.
    """
    from chainlang.schedules import ScheduleError, parse_schedule

    root, task_id, origin = project_of(ctx, "task"), _task_id(ctx, id), f"{ctx.run_id}/{ctx.step}"
    given = {k: v for k, v in {"type": type, "at": at, "interval": interval, "cron": cron}.items() if v is not None}
    try:
        timing = parse_schedule(given, ctx.now())
    except ScheduleError as exc:
        raise ValueError(f"the task was not scheduled: {exc}") from None
    definition: dict[str, Any] = {"schedule": given, "misfire": misfire, "action": action,
                                  "captured": dict(ctx.captured), "timing": timing.to_json()}
    if description is not None:
        definition["description"] = description
    with open_store(root) as store:
        found = _stored_before(store, task_id, origin)
        if found is not None:
            return {"task_id": task_id, "next_run": str((found.definition.get("timing") or {}).get("first"))}
        _check(root, ctx, task_id, action_hook(task_id, action), "action")
        _warn_if_masked(ctx, task_id, definition,
                        _add(store, "schedule", definition, task_id, origin, next_run=timing.first, status="pending"))
    return {"task_id": task_id, "next_run": timing.first.isoformat()}


def list_tasks(ctx: "RunContext", filter: dict[str, Any] | None = None, status: str | None = None) -> dict[str, Any]:
    """The stored tasks (optionally of one status, and whose fields equal `filter`'s)."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import store_exists

    root = project_of(ctx, "task")
    try:
        if not store_exists(root):
            return {"tasks": []}
    except StoreError as exc:
        raise ValueError(f"the project's store cannot be opened: {exc}") from None
    with open_store(root) as store:
        tasks = [_on_clock(describe(task), ctx) for task in store.list_tasks(status=status)]
    wanted = dict(filter or {})
    return {"tasks": [t for t in tasks if all(_matches(t, k, v) for k, v in wanted.items())]}


def _on_clock(task: dict[str, Any], ctx: "RunContext") -> dict[str, Any]:
    """The task's moments in the zone of the run's clock, as task.schedule's next_run."""
    from datetime import datetime

    zone = ctx.now().tzinfo
    for key in ("due", "last_run"):
        if isinstance(task.get(key), str):
            try:
                task[key] = datetime.fromisoformat(task[key]).astimezone(zone).isoformat()
            except ValueError:
                pass
    return task


def _matches(task: dict[str, Any], key: str, wanted: Any) -> bool:
    """A field equals the filter's value; a moment (`due`, `last_run`) also matches its
    date (`{due: "{tools.now.date}"}`: the tasks due that day)."""
    value = task.get(key)
    if key in ("due", "last_run") and isinstance(wanted, str) and isinstance(value, str) and len(wanted) == 10:
        return value[:10] == wanted
    return bool(value == wanted)


def cancel(ctx: "RunContext", task_id: str) -> dict[str, Any]:
    """Archive a stored task: a hook stops firing, a schedule stops running."""
    from chainlang.store import StoreError

    with open_store(project_of(ctx, "task")) as store:
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
        for key in ("trigger", "condition", "action", "description"):
            if key in hook:
                out[key] = hook[key]
    else:
        timing = data.get("schedule") or {}
        out["type"] = str(timing.get("type", "once"))
        for key in ("at", "interval", "cron"):
            if key in timing:
                out[key] = timing[key]
        for key in ("action", "description"):
            if key in data:
                out[key] = data[key]
        if task.next_run:
            out["due"] = task.next_run
    if task.last_run:
        out["last_run"] = task.last_run
    out["failures"] = task.failures
    if task.origin:
        out["origin"] = task.origin
        if task.origin.startswith("file:"):  # a chain file's `triggers:` (chainlang.tasks.chain_triggers)
            out["source"] = task.origin[len("file:"):]
    return out


def _task_id(ctx: "RunContext", given: str | None) -> str:
    # derived from the step attempt's key: the same step run again (a resume) finds its task
    return given or "task-" + hashlib.sha256(ctx.idempotency_key.encode("utf-8")).hexdigest()[:12]


def _stored_before(store: "Store", task_id: str, origin: str) -> "TaskRecord | None":
    """The task this very step stored before an interruption; raises if another owns the id."""
    existing = store.get_task(task_id)
    if existing is None:
        return None
    if existing.origin == origin:  # whatever became of it since (fired, completed, cancelled)
        return existing
    if existing.status in ("archived", "completed"):  # kept for its history: the id stays taken
        raise ValueError(f"the task id {task_id!r} was used before ({existing.status}, registered by "
                         f"{existing.origin or 'another run'}); ids are never reused: give another id")
    raise ValueError(f"a task with id {task_id!r} exists already ({existing.status}, registered by "
                     f"{existing.origin or 'another run'}); cancel it first (chainlang tasks cancel "
                     f"{task_id}) or give another id")


def _check(root: Any, ctx: "RunContext", task_id: str, hook: dict[str, Any], what: str = "hook") -> None:
    """Check the hook (or a schedule's action, as its hook) as a hook of a hooks file."""
    from chainlang.diagnostics import has_errors
    from chainlang.tasks.stored import check_hook

    diagnostics = check_hook(root, ctx.registry, task_id, hook, dict(ctx.captured))
    if has_errors(diagnostics):
        errors = [d for d in diagnostics if d.severity == "error"]
        shown = "; ".join(f"{d.line}:{d.column}: {d.message}" for d in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ValueError(f"the {what} does not check, so it was not stored: {shown}{more}")


def _add(store: "Store", kind: str, definition: dict[str, Any], task_id: str, origin: str,
         **extra: Any) -> "TaskRecord":
    from chainlang.store import StoreError

    try:
        return store.add_task(kind, definition, id=task_id, origin=origin, **extra)
    except StoreError as exc:
        raise ValueError(str(exc)) from None


def _warn_if_masked(ctx: "RunContext", task_id: str, given: dict[str, Any], stored: "TaskRecord") -> None:
    """Say so when the store masked a secret in what the task runs (its action, or the values
    it captured): it fires with `***` in its place. A description masked changes nothing it does."""
    import json

    def runs(definition: dict[str, Any]) -> str:
        hook = definition.get("hook")
        ran = {k: v for k, v in hook.items() if k != "description"} if isinstance(hook, dict) else definition.get("action")
        return json.dumps([ran, definition.get("captured")], sort_keys=True, default=str)

    if runs(given) != runs(stored.definition):
        ctx.notify(f"task {task_id}: a secret in its action or in the values it captured is stored as *** and "
                   "will be *** when it fires; to use a secret there, write {secrets.NAME} (read when it fires)")
