"""How the standard events that keep state (task, thread, memory) reach the project's store:
the project of the run, and its store opened where `[store] url` says, their problems as the
step's error (ValueError)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext
    from chainlang.store import Store

__all__ = ["memory_tier", "open_store", "project_of"]


def project_of(ctx: "RunContext", family: str) -> Path:
    """The run's project directory; the `family` events (task, thread...) need one."""
    if ctx.project is None:
        raise ValueError(f"the {family} events need the project's store: run them with chainlang run or chainlang emit")
    return ctx.project


def open_store(root: Path) -> "Store":
    """The project's store (created if needed)."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    try:
        return project_store(root)
    except StoreError as exc:
        raise ValueError(f"the project's store cannot be opened: {exc}") from None


def memory_tier(ctx: "RunContext") -> str:
    """The model tier the thread and memory events ask (`[models] memory`), or "embedded"
    (no model; also for a ctx of a run without model tiers)."""
    return str(ctx.models.memory) if ctx.models is not None else "embedded"
