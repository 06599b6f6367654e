"""The thread operations of `Store` (LANGUAGE.md §13): threads, their summaries and status,
and what happened in them (thread_events)."""

from __future__ import annotations

from typing import Any


class ThreadMethods:
    """Mixed into `Store` (see `store.py`)."""

    path: Any
