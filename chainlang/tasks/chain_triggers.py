"""The `triggers:` of the project's chain files, kept in the store by `chainlang serve`
(LANGUAGE.md §12).

Each trigger is stored as the task system's own kind, with the file as its origin
(`file:PATH`, PATH relative to the project; `chainlang tasks list` shows it as the source):

- `{cron, tz?, inputs?}` a repeating schedule (`misfire: once`) whose action runs the chain
  with those inputs; the cron is read in `tz` (default UTC);
- `{event, where?}` a hook on `post:EVENT` with `where` as its condition, whose action runs
  the chain with the event's payload as its inputs (`chain.run`, which checks them).

A task's id is derived from its file and what the trigger says (`trigger-` and 12 hex
digits), so every serve process computes the same ids: registering again (a restart, a
second serve on the store, two at once) finds the task there and adds nothing. A trigger
the file changes is a new task and the old one is archived; one the file drops, or a file
that is gone, is archived. A file that does not check keeps the tasks it had (a save in
the middle of an edit does not unregister them): that is logged. Ids are never reused (the
store keeps archived tasks for their history): a trigger added back after it was archived
is stored as `ID-2`, `-3`...

`sync` is one pass (cheap when nothing changed: one read of the tasks); serve calls it at
start and whenever the project's files change (chainlang.serve.trigger_watch).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chainlang.pipeline import LoadedFile
    from chainlang.store import Store, TaskRecord


class Project(Protocol):
    """What the sync reads of a project (serve's checked project, chainlang.runtime.emit.Project):
    its root and its loader (the files, the registry)."""

    root: Path
    loader: Any

__all__ = ["ORIGIN_PREFIX", "SyncResult", "WantedTask", "source_of", "sync", "wanted_tasks"]

log = logging.getLogger("chainlang.serve")

ORIGIN_PREFIX = "file:"
_LIVE = ("pending", "active", "dead")  # a task still registered (a dead one waits for `tasks retry`)
_MAX_GENERATIONS = 1000


@dataclass(frozen=True)
class WantedTask:
    """A trigger as the task it is stored as."""

    base_id: str
    kind: str  # schedule | hook
    definition: dict[str, Any]
    source: str  # the file, relative to the project
    next_run: datetime | None = None


@dataclass
class SyncResult:
    """What syncing the triggers of chain files with the store did: tasks added, archived, kept."""
    added: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files whose triggers were left as they were, and why


def source_of(task: "TaskRecord") -> str | None:
    """The chain file a task was registered from (None: registered by a run)."""
    origin = task.origin or ""
    return origin[len(ORIGIN_PREFIX):] if origin.startswith(ORIGIN_PREFIX) else None


def _relative(root: Path, path: str) -> str:
    return Path(os.path.relpath(Path(path).resolve(), root.resolve())).as_posix()


def _chain_files(project: "Project") -> list["LoadedFile"]:
    """The project's chain files (not hooks files, nor stored hooks)."""
    return [f for f in project.loader.context if f.chain.kind == "chain" and not f.path.startswith(".chainlang")]


def wanted_tasks(project: "Project", now: datetime) -> tuple[dict[str, WantedTask], set[str], set[str], list[str]]:
    """The tasks the project's chain files ask for, by base id; the files seen (relative);
    the files whose triggers cannot be read now (they keep their tasks); why, one line each."""
    from chainlang.pipeline import check_project

    root = Path(project.root)
    wanted: dict[str, WantedTask] = {}
    seen: set[str] = set()
    broken: set[str] = set()
    problems: list[str] = []
    files = _chain_files(project)
    for loaded in files:
        source = _relative(root, loaded.path)
        seen.add(source)
        triggers = list(getattr(loaded.chain, "triggers", ()))
        if not triggers and not _mentions_triggers(loaded):
            continue
        others = [f for f in project.loader.context if f is not loaded]
        diagnostics, _, _ = check_project([loaded], project.loader.registry, others)
        errors = [d for d in diagnostics if d.severity == "error"]
        if errors:
            broken.add(source)
            first = errors[0]
            problems.append(f"{source}:{first.line}:{first.column}: {first.message} ({len(errors)} error(s); "
                            f"chainlang check {source}): its triggers are left as they were")
            continue
        for trigger in triggers:
            task = _task_of(loaded, trigger, source, now)
            wanted.setdefault(task.base_id, task)
    return wanted, seen, broken, problems


def _mentions_triggers(loaded: "LoadedFile") -> bool:
    """A file with a `triggers:` key the model could not read (it has errors, then)."""
    from chainlang.load.loader import MapNode

    root = loaded.chain.root
    return isinstance(root, MapNode) and "triggers" in root.index


def _task_of(loaded: "LoadedFile", trigger: Any, source: str, now: datetime) -> WantedTask:
    from zoneinfo import ZoneInfo

    from chainlang.schedules import parse_schedule

    said = trigger.definition()
    digest = hashlib.sha256(json.dumps({"file": source, "trigger": said}, sort_keys=True,
                                       ensure_ascii=False).encode("utf-8")).hexdigest()[:12]
    base_id = f"trigger-{digest}"
    path = _from_store(source)
    about = {"file": source, "chain": loaded.chain.name, "trigger": said}
    if trigger.kind == "cron":
        zone = ZoneInfo(trigger.tz) if trigger.tz else timezone.utc
        given = {"type": "repeat", "cron": trigger.cron}
        timing = parse_schedule(given, now.astimezone(zone))
        action = [{"chain.run": {"path": path, "inputs": dict(trigger.inputs)}}]
        definition: dict[str, Any] = {"schedule": given, "misfire": "once", "action": action, "captured": {},
                                      "timing": timing.to_json(), "chain_trigger": about}
        if trigger.tz:
            definition["schedule"] = {**given, "tz": trigger.tz}
        if trigger.description:
            definition["description"] = trigger.description
        return WantedTask(base_id, "schedule", definition, source, timing.first)
    hook: dict[str, Any] = {"id": base_id, "trigger": f"post:{trigger.event}",
                            "action": [{"chain.run": {"path": path, "inputs": "{event.payload}"}}]}
    if said.get("where"):
        hook["condition"] = said["where"]
    hook["description"] = trigger.description or f"the trigger of {source}"
    return WantedTask(base_id, "hook", {"hook": hook, "captured": {}, "chain_trigger": about}, source)


def _from_store(source: str) -> str:
    """The chain's path as the stored task's action names it: relative to the store's
    directory (`.chainlang/`), as `chain.run` reads a path relative to the calling file."""
    return "../" + source


def sync(store: "Store", project: "Project", now: datetime) -> SyncResult:
    """Make the stored tasks of the project's chain files what the files say now."""
    from chainlang.store import StoreError

    result = SyncResult()
    wanted, seen, broken, result.problems = wanted_tasks(project, now)
    stored = [t for t in store.list_tasks() if source_of(t) is not None]
    live: dict[str, "TaskRecord"] = {}
    taken: set[str] = {t.id for t in stored}
    for row in stored:
        base = _base(row.id)
        if row.status in _LIVE and base is not None:
            live.setdefault(base, row)
    for base_id, task in wanted.items():
        if base_id in live:
            result.kept.append(live[base_id].id)
            continue
        problem = _check(project, task)
        if problem is not None:
            result.problems.append(f"{task.source}: a trigger was not registered: {problem}")
            continue
        task_id = _free_id(base_id, taken)
        try:
            extra: dict[str, Any] = {"next_run": task.next_run, "status": "pending"} if task.kind == "schedule" else {}
            store.add_task(task.kind, task.definition, id=task_id, origin=ORIGIN_PREFIX + task.source, **extra)
        except StoreError as exc:
            fresh = store.get_task(task_id)
            if fresh is not None and fresh.status in _LIVE:  # another serve registered it at the same moment
                result.kept.append(task_id)
                continue
            result.problems.append(f"{task.source}: a trigger was not registered: {exc}")
            continue
        taken.add(task_id)
        result.added.append(task_id)
    for base, record in live.items():
        source = source_of(record) or ""
        if base in wanted or source in broken:
            continue
        if source in seen or not (Path(project.root) / source).exists():
            try:
                store.cancel_task(record.id)
            except StoreError as exc:
                result.problems.append(f"{source}: the trigger {record.id} could not be archived: {exc}")
                continue
            result.archived.append(record.id)
    return result


def _base(task_id: str) -> str | None:
    """The base id of a trigger's task id (`trigger-HEX` or `trigger-HEX-N`)."""
    if not task_id.startswith("trigger-"):
        return None
    head, _, tail = task_id.rpartition("-")
    return head if tail.isdigit() and head != "trigger" else task_id


def _free_id(base_id: str, taken: set[str]) -> str:
    if base_id not in taken:
        return base_id
    for n in range(2, _MAX_GENERATIONS):
        if f"{base_id}-{n}" not in taken:
            return f"{base_id}-{n}"
    raise ValueError(f"{base_id}: registered and archived {_MAX_GENERATIONS} times")


def _check(project: "Project", task: WantedTask) -> str | None:
    """Why the task's hook (or action, as its hook) does not check in the project (None: it does)."""
    from chainlang.pipeline import check_project
    from chainlang.tasks.firing import action_hook
    from chainlang.tasks.stored import hook_file

    hook = task.definition["hook"] if task.kind == "hook" else action_hook("trigger", task.definition["action"])
    loaded = hook_file("trigger", hook, {})
    others = [f for f in project.loader.context if f.path != loaded.path]
    diagnostics, _, _ = check_project([loaded], project.loader.registry, others)
    errors = [d for d in diagnostics if d.severity == "error"]
    if not errors:
        return None
    return "; ".join(f"{d.message}" for d in errors[:3])
