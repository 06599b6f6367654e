"""A stored task's row read into a `TaskRecord`, whatever the row holds.

A row that cannot be read (edited by hand, damaged, written by another program: a moment
that is not ISO 8601, a definition that is not a JSON object, a count that is not a number,
a kind or status chainlang does not know) comes back quarantined: `problem` says why, in
the words `chainlang tasks show` prints, and the rest holds what of it could be read. One
bad row then never stops a reader of the others (the scheduler, `tasks list`, serve's page).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from .base import TASK_KINDS, TASK_STATUSES, TaskRecord

__all__ = ["readable_moment", "task_record"]


def task_record(row: Row[Any]) -> TaskRecord:
    """A stored task. A row that cannot be read (edited by hand, damaged, written by another
    program) comes back quarantined, `problem` saying why, with what of it could be read:
    one bad row must never stop a reader of the others (the scheduler, `tasks list`)."""
    problems: list[str] = []
    definition: dict[str, Any] = {}
    if not isinstance(row.definition, str):
        problems.append(f"its definition is not text but {type(row.definition).__name__}")
    else:
        try:
            found = json.loads(row.definition)
        except (ValueError, RecursionError) as exc:
            problems.append(f"its definition is not JSON ({str(exc)[:80]})")
        else:
            if isinstance(found, dict):
                definition = found
            else:
                problems.append(f"its definition is JSON but not an object ({type(found).__name__})")
    for name, choices in (("kind", TASK_KINDS), ("status", TASK_STATUSES)):
        if getattr(row, name) not in choices:
            problems.append(f"its {name} is {_shown(getattr(row, name))}, not one of {', '.join(choices)}")
    for name in _MOMENTS:
        problem = _moment_problem(name, getattr(row, name), optional=name not in ("created_at", "updated_at"))
        if problem:
            problems.append(problem)
    for name in ("failures", "version"):
        value = getattr(row, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"its {name} is {_shown(value)}, not a whole number")
    for name in ("origin", "lease_owner"):
        if getattr(row, name) is not None and not isinstance(getattr(row, name), str):
            problems.append(f"its {name} is {_shown(getattr(row, name))}, not text")
    if not problems:
        return TaskRecord(id=row.id, kind=row.kind, definition=definition, status=row.status,
                          created_at=row.created_at, updated_at=row.updated_at, next_run=row.next_run,
                          last_run=row.last_run, failures=int(row.failures), origin=row.origin,
                          lease_owner=row.lease_owner, lease_until=row.lease_until, version=int(row.version))

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return TaskRecord(id=str(row.id), kind=str(row.kind), definition=definition, status=str(row.status),
                      created_at=str(row.created_at), updated_at=str(row.updated_at), next_run=text(row.next_run),
                      last_run=text(row.last_run), failures=count(row.failures), origin=text(row.origin),
                      lease_owner=text(row.lease_owner), lease_until=text(row.lease_until),
                      version=count(row.version), problem="; ".join(problems))


_MOMENTS = ("next_run", "last_run", "lease_until", "created_at", "updated_at")


def _moment_problem(name: str, value: Any, optional: bool) -> str | None:
    """Why a stored moment cannot be read (None: it can), in the words `tasks show` prints."""
    if value is None:
        return None if optional else f"its {name} is missing"
    if not isinstance(value, str):
        return f"its {name} is {_shown(value)}, not an ISO 8601 moment"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return f"its {name} is not an ISO 8601 moment: {_shown(value)}"
    if moment.tzinfo is None:
        return f"its {name} has no time zone: {_shown(value)}"
    return None


def readable_moment(value: object) -> bool:
    return isinstance(value, str) and _moment_problem("", value, optional=False) is None


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
