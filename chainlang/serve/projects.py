"""The hooks in force for `chainlang serve`, loaded once and loaded again when the project
changes: a file of the project (looked at once a second: the modification times of its
directories and of the files that matter), or the hooks that `task.register` stored,
perhaps in another process (a cheap read of the store, at every event).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.store import Store
    from chainlang.runtime.emit import Project

__all__ = ["Projects"]

_SCAN_EVERY = 1.0  # seconds between two looks at the project's files
_SKIP_DIRS = frozenset({".chainlang", ".git", "node_modules", "__pycache__", ".venv", "venv", "site"})


class Projects:
    """The project's hooks in force, loaded again when a file or a stored hook changed."""

    def __init__(self, root: Path, tools: Sequence[str], registry: "Registry | None", store: "Store") -> None:
        self.root, self.tools, self.registry, self.store = root, tuple(tools), registry, store
        # an SQLite store is read by a read-only connection of its own (cheap, at every event);
        # a PostgreSQL one through the store
        self.store_path = store.path if store.dialect == "sqlite" else None
        self._files: tuple[Any, ...] = ()
        self._scanned = 0.0
        self._hooks: Any = None
        self._reader: sqlite3.Connection | None = None
        self.project: "Project | None" = None
        self.loads = 0

    def current(self) -> "Project":
        from chainlang.runtime.emit import load_project

        now = time.monotonic()
        files = self._files
        if now - self._scanned >= _SCAN_EVERY or self.project is None:
            files, self._scanned = self._fingerprint(), now
        hooks = self._stored_hooks()
        if self.project is None or files != self._files or hooks != self._hooks:
            self.project = load_project(self.root, self.tools, self.registry)
            self._files, self._hooks = files, hooks
            self.loads += 1
        return self.project

    def _fingerprint(self) -> tuple[Any, ...]:
        """The modification times of the project's directories and of its files that matter."""
        seen: list[Any] = []
        for directory, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            try:
                seen.append((directory, os.stat(directory).st_mtime_ns))
            except OSError:
                continue
            for name in sorted(files):
                if name.endswith((".yaml", ".yml", ".py", ".toml")):
                    try:
                        info = os.stat(os.path.join(directory, name))
                    except OSError:
                        continue
                    seen.append((name, info.st_mtime_ns, info.st_size))
            if len(seen) > 20_000:
                break
        return tuple(seen)

    def _stored_hooks(self) -> Any:
        """A stamp of the hooks stored in the store: it changes when one is added or cancelled."""
        if self.store_path is None:
            from chainlang.store import StoreError

            try:
                return self.store.hooks_stamp()
            except StoreError as exc:
                return ("unreadable", str(exc))
        if self._reader is None:
            if not self.store_path.is_file():
                return None
            try:
                self._reader = sqlite3.connect(f"file:{self.store_path}?mode=ro", uri=True, timeout=5,
                                               check_same_thread=False)
            except sqlite3.Error:
                return None
        try:
            return self._reader.execute("SELECT count(*), max(updated_at) FROM tasks WHERE kind = 'hook' "
                                        "AND status = 'active'").fetchone()
        except sqlite3.Error as exc:
            return ("unreadable", str(exc))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
