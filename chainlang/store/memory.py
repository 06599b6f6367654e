"""The memory operations of `Store` (LANGUAGE.md §13): the journal and the knowledge
organized from it, searched with the full-text indexes of schema version 4."""

from __future__ import annotations

from typing import Any


class MemoryMethods:
    """Mixed into `Store` (see `store.py`)."""

    path: Any
