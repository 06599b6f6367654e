"""The project an open document belongs to, and checking its unsaved text.

The project is found as `chainlang check` finds it: chainlang.toml from the
file's directory upward. Its registry (stdlib, tools, MCP servers) and the
files every chain sees (named chains, hooks files) are cached per directory
for a few seconds, so typing does not re-import tools or re-read the project
on every keystroke; saving a document drops the cache. A tools `.py` file
edited since it was imported is imported again when the cache is rebuilt
(chainlang keeps tool modules for the life of a process, which for a server
is the whole editing session).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.diagnostics import Diagnostic

if TYPE_CHECKING:
    from chainlang.pipeline import LoadedFile
    from chainlang.registry.registry import Registry

CACHE_SECONDS = 10.0


@dataclass
class ProjectView:
    """What a document of one directory is checked against."""

    registry: "Registry"  # stdlib + tools (+ MCP), without the project's chains
    context: list["LoadedFile"]  # named chains and hooks files on disk
    with_chains: "Registry"  # registry + named chains + declared events: for completion and hover
    made: float


class Projects:
    """Cached ProjectViews by directory; safe to use from the checking thread and the loop."""

    def __init__(self) -> None:
        self._views: dict[str, ProjectView] = {}
        self._lock = threading.Lock()

    def forget(self) -> None:
        with self._lock:
            self._views.clear()

    def view(self, directory: Path) -> ProjectView:
        key = os.path.realpath(directory)
        with self._lock:
            cached = self._views.get(key)
            if cached is not None and time.monotonic() - cached.made < CACHE_SECONDS:
                return cached
        made = _make_view(directory)
        with self._lock:
            self._views[key] = made
        return made


_TOOL_MTIMES: dict[str, float] = {}  # module name of a tools file → its file's mtime when first seen


def _forget_edited_tools() -> None:
    """Drop the modules of tools files changed on disk since they were imported, so the
    next registry imports them afresh (module-name tools, i.e. packages, are left as they are)."""
    from chainlang.registry.loading import FILE_MODULE_PREFIX

    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not name.startswith(FILE_MODULE_PREFIX) or not path:
            continue
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = -1.0
        if _TOOL_MTIMES.get(name, mtime) != mtime:
            sys.modules.pop(name, None)
            _TOOL_MTIMES.pop(name, None)


def _note_tools() -> None:
    """Remember the mtime of each tools file just imported."""
    from chainlang.registry.loading import FILE_MODULE_PREFIX

    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith(FILE_MODULE_PREFIX) and path and name not in _TOOL_MTIMES:
            try:
                _TOOL_MTIMES[name] = os.stat(path).st_mtime
            except OSError:
                pass


def _make_view(directory: Path) -> ProjectView:
    from chainlang.pipeline import build_project, context_files, default_registry, python_hook_files

    _forget_edited_tools()
    registry = default_registry((), directory)
    _note_tools()
    context = context_files(directory, set()) + python_hook_files(registry)
    _, with_chains = build_project(context, registry)
    return ProjectView(registry, context, with_chains, time.monotonic())


def check_document(path: str, text: str, projects: Projects) -> list[Diagnostic]:
    """The checker's diagnostics for `text`, the editor's unsaved content of `path`.
    Raises UsageError for a broken project (bad chainlang.toml, a tool that does not load)."""
    from chainlang.pipeline import check_loaded, load_file

    view = projects.view(Path(path).parent)
    real = os.path.realpath(path)
    # the document's own saved copy is in the context when it is a named chain or hooks file: leave it out
    context = [f for f in view.context if os.path.realpath(f.path) != real]
    loaded = load_file(path, text=text)
    return [d for d in check_loaded([loaded], view.registry, context) if d.file == path]
