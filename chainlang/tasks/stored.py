"""Hooks kept in the project's store (`task.register`, LANGUAGE.md §12): checked when they
are registered exactly as a hook of a hooks file, and in force from then on for every run,
emit and check of the project.

A stored hook is kept as its definition (the keys of a hook in a hooks file) and the
values of the registering chain its action captured (by reference text). To be checked,
compiled or fired it becomes a hooks file of its own, named `.chainlang/store.db#TASK_ID`,
whose hook resolves the captured references from those values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.diagnostics import Diagnostic
    from chainlang.pipeline import LoadedFile
    from chainlang.registry.registry import Registry
    from chainlang.store import Store, TaskRecord

STORE_FILE = Path(".chainlang") / "store.db"
HOOK_KEYS = ("id", "trigger", "condition", "priority", "after", "action", "mode", "max", "max_depth", "on_error",
             "description")


def store_url(root: Path) -> str | None:
    """`[store] url` of the project at `root` (None: the default `.chainlang/store.db`)."""
    config = _config(root)
    return config.store.url if config is not None and config.store is not None else None


def _config(root: Path) -> Any:
    """The project's chainlang.toml at `root` (None without one); StoreError when unreadable."""
    from chainlang.config.project import CONFIG_NAME, load_config
    from chainlang.errors import ConfigError

    toml = Path(root) / CONFIG_NAME
    if not toml.is_file():
        return None
    try:
        return load_config(toml)
    except ConfigError as exc:
        from chainlang.store import StoreError  # imported only here: a check without a store never needs it

        raise StoreError(str(exc)) from None


def store_exists(root: Path) -> bool:
    """Whether the project at `root` has a store yet (reading never creates one)."""
    return find_store(root)[0]


def find_store(root: Path) -> tuple[bool, Path | None]:
    """Whether the project at `root` has a store yet, and its SQLite file when `[store] url`
    names it plainly (None: PostgreSQL, or a url only SQLAlchemy's parser can read)."""
    url = store_url(root)
    file = root / STORE_FILE if url is None else _plain_sqlite_file(root, url)
    if file is None:
        from chainlang.store.store import store_exists as exists

        return exists(root, url), None
    if not os.path.lexists(file):
        return False, file  # nothing at the file's path, not even a dangling link: nothing to import
    from chainlang.store.base import check_store_file

    return check_store_file(file), file  # read without SQLAlchemy (~0.3 s of imports)


def _plain_sqlite_file(root: Path, url: str) -> Path | None:
    """The file of a plain `sqlite:///PATH` url, read without SQLAlchemy; None for any other url
    (PostgreSQL, a query, escapes, no file), which the store's own parser judges."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = url[len(prefix):]
    if not path or any(c in path for c in "?#%") or path == ":memory:" or path.startswith("file:"):
        return None
    return root / path  # an absolute PATH (sqlite:////abs) stays itself


def project_store(root: Path) -> "Store":
    """Open the store of the project at `root` where `[store] url` says (creating it), its
    writes masking the project's known secrets (API keys, `[secrets]`)."""
    from chainlang.config.secrets import known_secret_values
    from chainlang.store import open_store

    config = _config(root)
    url = config.store.url if config is not None and config.store is not None else None
    return open_store(root, url, secrets=known_secret_values(config))


def hook_file(task_id: str, definition: dict[str, Any], captured: dict[str, Any]) -> "LoadedFile":
    """The stored hook as a hooks file of its own, its captured values set on its hook."""
    from chainlang.pipeline import load_file

    text = json.dumps({"hooks": [definition]}, indent=2, ensure_ascii=False) + "\n"
    loaded = load_file(f"{STORE_FILE.as_posix()}#{task_id}", text=text, kind="hooks")
    for hook in loaded.chain.hooks:
        hook.captured = dict(captured)
    return loaded


def stored_hook_files(root: Path) -> list["LoadedFile"]:
    """The active stored hooks of the project at `root` (none without a store: it is not
    created for reading)."""
    from chainlang.errors import UsageError

    try:
        exists, file = find_store(root)
        if not exists:
            return []
    except Exception as exc:
        from chainlang.store import StoreError  # imported only here and below: without a store it is never needed

        if isinstance(exc, StoreError):
            raise UsageError(str(exc)) from None
        raise
    if file is not None:
        from chainlang.store.peek import has_active_hooks

        if has_active_hooks(file) is False:
            return []  # the common case, told without opening the store (SQLAlchemy, jsonschema: ~0.5 s)
    from chainlang.store import StoreError

    try:
        with project_store(root) as store:
            tasks = store.list_tasks(status="active", kind="hook")
    except StoreError as exc:
        raise UsageError(f"the project's stored hooks cannot be read: {exc}") from None
    return [_file_of(task) for task in tasks if task.problem is None]  # a row that cannot be read is quarantined


def _file_of(task: "TaskRecord") -> "LoadedFile":
    data = task.definition if isinstance(task.definition, dict) else {}
    return hook_file(task.id, dict(data.get("hook") or {}), dict(data.get("captured") or {}))


def check_hook(root: Path, registry: "Registry", task_id: str, definition: dict[str, Any],
               captured: dict[str, Any]) -> list["Diagnostic"]:
    """The diagnostics of a hook about to be stored, checked with the project around it."""
    from chainlang.pipeline import check_project, context_files

    loaded = hook_file(task_id, definition, captured)
    context = [f for f in context_files(root, set(), stored_hook_files) if f.path != loaded.path]
    diagnostics, _, _ = check_project([loaded], registry, context)
    return diagnostics


__all__ = ["HOOK_KEYS", "STORE_FILE", "check_hook", "find_store", "hook_file", "project_store", "store_exists",
           "store_url", "stored_hook_files"]
