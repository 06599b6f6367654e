"""`chainlang tasks list|show|cancel|retry`: the project's stored tasks (LANGUAGE.md §12),
read from the store of the project of the working directory."""

from __future__ import annotations

import json
from typing import Any

from chainlang.cli.moments import moment, moments
from chainlang.cli.projectstore import open_project_store, project_root
from chainlang.errors import UsageError


def tasks_command(action: str, task_id: str | None, status: str | None, as_json: bool) -> int:
    from chainlang.stdlib.task import describe
    from chainlang.store import StoreError

    store = open_project_store(project_root())
    if action == "list":
        # masked again when shown: a row stored before the store masked holds its secrets
        rows = [] if store is None else [_quarantined(t, store.redaction.task(describe(t)))
                                         for t in store.list_tasks(status=status)]
        if store is not None:
            store.close()
        if as_json:
            print(json.dumps({"tasks": moments(rows, precise=True)}, ensure_ascii=False))
        elif not rows:
            print("no stored tasks" + (f" with status {status}" if status else ""))
        else:
            width = max(len(str(row["task_id"])) for row in rows)  # ids of any length line up
            for row in rows:
                what = row.get("quarantined") or row.get("trigger") or moment(row.get("due")) or ""
                source = f"  from {row['source']}" if row.get("source") else ""  # a chain file's trigger
                print(f"{str(row['task_id']):{width}}  {row['type']:6} {row['status']:9} {what}{source}")
        return 0
    if task_id is None:
        raise UsageError(f"chainlang tasks {action} needs a TASK_ID (see chainlang tasks list)")
    if store is None:
        raise UsageError(f"{task_id}: no such task (this project has no stored tasks)")
    try:
        with store:
            if action == "show":
                task = store.get_task(task_id)
                if task is None:
                    raise StoreError(f"no task {task_id!r} (see chainlang tasks list)")
                body: dict[str, Any] = {**_quarantined(task, describe(task)), "created_at": task.created_at,
                                        "updated_at": task.updated_at,
                                        "definition": store.redaction.task(task.definition)}
                # each firing with how it ended: a dead task's failures say why
                body["runs"] = [{"run_id": r.run_id, "due_at": r.due_at, "status": r.status,
                                 **({"error": r.error} if r.error is not None else {}),
                                 "transcript": r.transcript} for r in store.runs(task_id)]
                print(json.dumps(moments(store.redaction.task(body), precise=as_json), ensure_ascii=False,
                                 indent=None if as_json else 2))
                return 0
            task = store.cancel_task(task_id) if action == "cancel" else store.retry_task(task_id)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        print(json.dumps(moments(_quarantined(task, store.redaction.task(describe(task))), precise=True),
                         ensure_ascii=False))
    else:
        print(f"{task.id}: {task.status}")
    return 0


def _quarantined(task: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A task as listed; a row the store cannot read is shown `quarantined`, with why (and the
    status it has in the store): serve does not fire it until it is fixed or cancelled."""
    if task.problem is None:
        return row
    return {**row, "type": task.kind, "status": "quarantined", "stored_status": task.status,
            "quarantined": task.problem}
