"""The project a store command works on (`chainlang tasks`, `chainlang threads`): the directory
of the nearest chainlang.toml from the working directory (or from `--project DIR`), and its store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chainlang.errors import UsageError

__all__ = ["open_project_store", "project_root"]


def project_root(project: str | None = None) -> Path:
    """The project's directory: chainlang.toml's, found from `project` (default: the working
    directory) upwards; without one, the starting directory itself."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    start = Path.cwd() if project is None else Path(project)
    if project is not None and not start.is_dir():
        raise UsageError(f"--project {project}: not a directory; give the project's directory (where chainlang.toml is)")
    try:
        config = find_project_config(start)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    return Path(config.root) if config is not None else start


def open_project_store(root: Path, create: bool = False) -> Any:
    """The store of the project at `root`; None when it has none and `create` is false (a
    command that only reads never creates one)."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store, store_exists

    try:
        if not create and not store_exists(root):
            return None
        return project_store(root)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
