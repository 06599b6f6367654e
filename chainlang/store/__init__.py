"""The project's store: one database per project (by default the SQLite file
`.chainlang/store.db`) holding what must outlive a run and be shared between processes:
the ids of `chainlang emit --id` (so an external event is handled once); the tasks of
`task.register` and `task.schedule` (hooks and timed chains), with the leases that let
one process at a time run a due task, their runs (one per due moment, never two), and
the dead letters (tasks whose runs failed too often in a row, until retried); and an
append-only event log of every change (see `tasks.py` for the task model). Later also
threads and the journal. Every write is one transaction, committed to disk before it
returns; the schema is versioned and migrated forward when a store is opened (see
`schema.py`).

SQLAlchemy is imported only when a store is opened: `Store`, `open_store` and
`SCHEMA_VERSION` load on first use, so importing this package (and starting the CLI)
stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import EmitClaim, Lease, StoreError, TaskRecord, TaskRun

if TYPE_CHECKING:
    from .schema import SCHEMA_VERSION
    from .store import Store, open_store

__all__ = ["SCHEMA_VERSION", "EmitClaim", "Lease", "Store", "StoreError", "TaskRecord", "TaskRun", "open_store"]


def __getattr__(name: str) -> Any:
    if name in ("Store", "open_store"):
        from . import store

        return getattr(store, name)
    if name == "SCHEMA_VERSION":
        from . import schema

        return schema.SCHEMA_VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
