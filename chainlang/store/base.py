"""What the store's callers see without loading a database library: its error, its records
(an emit claim; a task, a lease on it, a run of it) and the checks of what callers pass in.

Kept apart from `store.py` so that `import chainlang.store` (and the CLI) stays light.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["MAX_KEY_LENGTH", "SUCCEEDED", "TASK_KINDS", "TASK_STATUSES", "EmitClaim", "Lease", "StoreError",
           "TaskRecord", "TaskRun", "check_key", "check_store_file", "check_text", "stamp"]

TASK_KINDS = ("hook", "schedule")  # a hook of task.register, a timed chain of task.schedule
TASK_STATUSES = ("pending", "active", "completed", "archived", "dead")
SUCCEEDED = frozenset({"ok", "broken"})  # the final run statuses that end with exit code 0

MAX_KEY_LENGTH = 200


class StoreError(Exception):
    """The store cannot do what was asked; the message names the file and what to do."""


@dataclass(frozen=True)
class EmitClaim:
    """An emit id's row: `new` is True only for the call that claimed it.

    A repeat (`new=False`) carries the first claim's event, run and transcript, so the
    caller can point at that run instead of starting another one.
    """

    new: bool
    key: str
    event: str
    run_id: str
    transcript: str
    status: str  # 'started', then the run's final status ('ok', 'failed', ...)
    created_at: str
    finished_at: str | None
    data: Any = None  # the payload, when it was given to the claim


_PLAIN = re.compile(r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]{1,%d}" % MAX_KEY_LENGTH)


def check_key(key: object, what: str = "emit id") -> str:
    """Return `key` if it can be an id in the store, else raise StoreError saying why."""
    if isinstance(key, str) and _PLAIN.fullmatch(key):  # the common case, at C speed
        return key
    if not isinstance(key, str):
        raise StoreError(f"the {what} must be text, not {type(key).__name__}")
    if not key:
        raise StoreError(f"the {what} is empty; give 1 to {MAX_KEY_LENGTH} characters")
    if len(key) > MAX_KEY_LENGTH:
        raise StoreError(f"the {what} is {len(key)} characters long; at most {MAX_KEY_LENGTH} are allowed")
    for i, ch in enumerate(key):
        if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            raise StoreError(f"the {what} has a control character ({ch!r}) at position {i + 1}; "
                             "use printable characters only")
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise StoreError(f"the {what} has bytes that are not UTF-8 at position {i + 1}; "
                             "use printable UTF-8 text only")
    return key


def check_text(**values: object) -> None:
    """Raise StoreError unless every value is non-empty text."""
    for name, value in values.items():
        if not isinstance(value, str) or not value:
            raise StoreError(f"{name} must be non-empty text, not {value!r}")


def stamp(value: object, what: str) -> str:
    """The stored form of a moment given as an aware datetime or ISO 8601 text.

    Every moment is stored in one form (UTC, to the microsecond: `schema.now()`'s), so
    that comparing the texts compares the moments. A moment without a time zone is
    refused: it would mean a different moment on another machine.
    """
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise StoreError(f"{what} is not an ISO 8601 moment: {value!r}") from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise StoreError(f"{what} must be a datetime or ISO 8601 text, not {type(value).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise StoreError(f"{what} has no time zone ({value!r}); give one, e.g. {moment.isoformat()}+00:00")
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class TaskRecord:
    """A stored task: a hook (`task.register`) or a timed chain (`task.schedule`).

    `definition` is the hook or schedule as given; `failures` counts the runs that failed
    in a row; `lease_owner`/`lease_until` name who may run it now; `version` grows by one
    with every change of the row.
    """

    id: str
    kind: str  # one of TASK_KINDS
    definition: dict[str, Any]
    status: str  # one of TASK_STATUSES
    created_at: str
    updated_at: str
    next_run: str | None
    last_run: str | None
    failures: int
    origin: str | None
    lease_owner: str | None
    lease_until: str | None
    version: int
    # why the stored row cannot be read (a moment that is not ISO 8601, a definition that is
    # not JSON, a wrong type): the task is quarantined, never fired; None for a sound row
    problem: str | None = None


@dataclass(frozen=True)
class Lease:
    """The right of `owner` to run `task_id` until `until` (see `Store.claim`).

    `reclaimed_from` names the owner of the expired lease this one replaced, if any.
    """

    task_id: str
    owner: str
    until: str
    version: int  # the task's version once the lease was taken
    reclaimed_from: str | None = None


@dataclass(frozen=True)
class TaskRun:
    """One firing of a task: the run it started, for one due moment (`due_at`).

    `new` is True only for the `start_run` call that recorded it; a repeat for the same
    due moment gets the first record with `new=False` (see `Store.start_run`).
    """

    id: int
    task_id: str
    run_id: str
    transcript: str
    due_at: str
    started_at: str
    finished_at: str | None
    status: str  # 'running', then the run's final status
    error: Any  # the run's error (JSON), None when it has none
    new: bool = False


def check_store_file(path: Path) -> bool:
    """Whether the SQLite store's file exists; StoreError when something else is at its path
    (a directory, a link to nothing): that is a mistake to fix, not a project without a store."""
    if path.is_symlink() and not path.exists():
        raise StoreError(f"the project's store {path} is a symbolic link to {os.readlink(path)}, which does not "
                         "exist; make the link point at the store (is a disk missing?), or remove the link to start "
                         "a new store")
    if path.exists() and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise StoreError(f"the project's store {path} is {what}, not an SQLite file; move it away (a new store is "
                         "then created), or name another file in [store] url of chainlang.toml")
    return path.is_file()
