"""The project an open document belongs to, and checking its unsaved text.

The project is found as `chainlang check` finds it: chainlang.toml from the
file's directory upward. Its registry (stdlib, tools, MCP servers) and the
files every chain sees (named chains, hooks files) are cached per directory
for a few seconds, so typing does not re-import tools or re-read the project
on every keystroke; saving a document drops the cache. A tools `.py` file
edited since it was imported is imported again when the cache is rebuilt
(chainlang keeps tool modules for the life of a process, which for a server
is the whole editing session).

An untrusted workspace (see chainlang.lsp.trust) gets the standard events
only: its tools are not imported and its MCP servers not started; the view
says what was held back, and `unsure` tells which diagnostics those could
answer. Every view carries the project's secrets (API keys, [secrets]) so that
no diagnostic shows one.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.diagnostics import Diagnostic
from chainlang.redaction import Redactor

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
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
    held_back: list[str] = field(default_factory=list)  # untrusted: what was not loaded ("tools file 'x.py'")
    held_namespaces: set[str] | None = None  # namespaces of the held-back events; None: any name may be one
    secrets: Redactor = field(default_factory=Redactor)


class Projects:
    """Cached ProjectViews by directory; safe to use from the checking thread and the loop."""

    def __init__(self, trusted: bool = False) -> None:
        self._views: dict[str, ProjectView] = {}
        self._lock = threading.Lock()
        self.trusted = trusted  # set once, at initialize, before any view is made

    def forget(self) -> None:
        with self._lock:
            self._views.clear()

    def view(self, directory: Path) -> ProjectView:
        key = os.path.realpath(directory)
        with self._lock:
            cached = self._views.get(key)
            if cached is not None and time.monotonic() - cached.made < CACHE_SECONDS:
                return cached
        made = _make_view(directory, self.trusted)
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


def _make_view(directory: Path, trusted: bool) -> ProjectView:
    from chainlang.config.project import find_project_config
    from chainlang.config.secrets import known_secret_values
    from chainlang.errors import RegistryError, UsageError
    from chainlang.pipeline import build_project, context_files, default_registry, python_hook_files
    from chainlang.tasks.stored import stored_hook_files

    try:
        config = find_project_config(directory)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    secrets = Redactor(known_secret_values(config))
    held_back: list[str] = []
    held_namespaces: set[str] | None = set()
    if trusted:
        _forget_edited_tools()
        registry = default_registry((), directory)
        _note_tools()
    else:
        from chainlang.registry.registry import Registry
        from chainlang.registry.stdlib import stdlib_specs

        registry = Registry(stdlib_specs())
        held_back, held_namespaces = _held_back(config)
    context = context_files(directory, set(), stored_hook_files) + python_hook_files(registry)
    _, with_chains = build_project(context, registry)
    return ProjectView(registry, context, with_chains, time.monotonic(), held_back, held_namespaces, secrets)


def _held_back(config: "ProjectConfig | None") -> tuple[list[str], set[str] | None]:
    """What an untrusted view does not load, and the namespaces of the events that brings
    (None: a tools module may declare any name; MCP servers give `SERVER.TOOL`)."""
    from chainlang.registry.loading import is_file_ref

    if config is None:
        return [], set()
    held = [f"tools {'file' if is_file_ref(ref) else 'module'} '{ref}'" for ref in config.tools]
    servers = sorted(config.mcp.servers) if config.mcp is not None else []
    held += [f"MCP server '{name}'" for name in servers]
    return held, (None if config.tools else set(servers))


_EVENT_IN_TEXT = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
PROJECT_EVENT_RULES = frozenset({"CL014", "CL041"})  # unknown event, hook on an unknown event


def unsure(diag: Diagnostic, view: ProjectView, lines: list[str]) -> bool:
    """Whether `diag` says an event is unknown that the project's held-back tools or
    MCP servers may well provide: not an error while the workspace is untrusted."""
    if not view.held_back or diag.rule not in PROJECT_EVENT_RULES:
        return False
    if view.held_namespaces is None:
        return True
    line = lines[diag.line - 1] if 1 <= diag.line <= len(lines) else ""
    end = diag.end_column - 1 if diag.end_line == diag.line else len(line)
    found = _EVENT_IN_TEXT.search(line[diag.column - 1:end])
    return found is None or found.group().split(".", 1)[0] in view.held_namespaces


def check_document(path: str, text: str, projects: Projects) -> tuple[list[Diagnostic], ProjectView]:
    """The checker's diagnostics for `text`, the editor's unsaved content of `path`, and the
    view it was checked against. Raises UsageError for a broken project (bad chainlang.toml,
    a tool that does not load)."""
    from chainlang.pipeline import check_loaded, load_file

    view = projects.view(Path(path).parent)
    real = os.path.realpath(path)
    # the document's own saved copy is in the context when it is a named chain or hooks file: leave it out
    context = [f for f in view.context if os.path.realpath(f.path) != real]
    loaded = load_file(path, text=text)
    return [d for d in check_loaded([loaded], view.registry, context) if d.file == path], view
