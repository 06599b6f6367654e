"""`thread.list {status?, since?, limit?}` (LANGUAGE.md §13): the project's threads, the most
recently updated first, as `{threads: [{thread_id, summary, status, created_at, updated_at}]}`:
what seed 001's end-of-day loop goes over ("for each active thread -> memory.append").
Its own module: `thread.py` is the routing of messages."""

from __future__ import annotations

from datetime import date, datetime, time, timezone
from typing import TYPE_CHECKING, Any

from chainlang.stdlib.projectstore import open_store, project_of

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["LIST_LIMIT", "MAX_LIST", "list_threads"]


LIST_LIMIT = 50  # thread.list's default `limit`
MAX_LIST = 500  # and its largest


def list_threads(ctx: "RunContext", status: str = "active", since: str | None = None,
                 limit: int = LIST_LIMIT) -> dict[str, Any]:
    """The project's threads of a status (`any`: all), updated at or after `since` (a date is
    that day from its start on the run's clock), the most recently updated first, at most
    `limit`. A project with no store has none (and gets no store)."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import store_exists

    if status not in ("active", "archived", "any"):
        raise ValueError(f"thread.list: status must be active, archived or any, not {status!r}")
    if type(limit) is not int or not 1 <= limit <= MAX_LIST:
        raise ValueError(f"thread.list: limit must be a whole number from 1 to {MAX_LIST}, not {limit!r}")
    start = _since(since, ctx) if since is not None else None
    root = project_of(ctx, "thread")
    try:
        if not store_exists(root):
            return {"threads": []}
    except StoreError as exc:
        raise ValueError(f"the project's store cannot be opened: {exc}") from None
    with open_store(root) as store:
        try:
            threads = store.list_threads(status=None if status == "any" else status)
        except StoreError as exc:
            raise ValueError(f"{exc}") from None
    out = []
    for thread in threads:  # the most recently updated first
        if start is not None and _moment(thread.updated_at) < start:
            break
        out.append({"thread_id": thread.id, "summary": thread.summary, "status": thread.status,
                    "created_at": thread.created_at, "updated_at": thread.updated_at})
        if len(out) == limit:
            break
    return {"threads": out}


def _since(given: Any, ctx: "RunContext") -> datetime:
    """The moment `since` names: an ISO date-time (without an offset: on the run's clock), or
    a date (YYYY-MM-DD: its start on the run's clock)."""
    zone = ctx.now().tzinfo
    text = given.strip() if isinstance(given, str) else ""
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), time(), zone)
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or not text:
        raise ValueError(f"thread.list: since must be a date (YYYY-MM-DD) or an ISO date-time such as "
                         f"2026-11-19T08:00:00+00:00, not {given!r}")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def _moment(stamp: str) -> datetime:
    moment = datetime.fromisoformat(stamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
