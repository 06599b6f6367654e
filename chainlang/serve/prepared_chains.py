"""The chain files that `chainlang serve` resumes runs of (serve/waits.py), each loaded,
checked and compiled once, not at every resume.

A chain is kept by its path and the sha256 of its bytes, read at every resume: a
file whose content changed is prepared again (and the resume compares the digest its run
recorded, as always). Everything kept is dropped when the project changes
(serve/projects.py: a hooks file, chainlang.toml, a tool, a named chain, a stored hook), since
a chain is checked and compiled with the project around it. A chain of the serve project is
prepared with the project serve loaded for its events (its configuration, registry and
files); a chain in a nested project under it gets that project read once; a chain outside
serve's directory, whose changes serve does not watch, is prepared afresh each time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.runtime.prepare import Prepared, ProjectBase
    from chainlang.serve.projects import Projects

__all__ = ["PreparedChains"]

_KEEP = 64  # chains kept at most (a digest per version of a file): past it, all are dropped and prepared again


class PreparedChains:
    """The chains serve's resumes run, prepared once per content and project (see the module
    docstring). Called with a chain file's path, as `runtime.resume.resume_async`'s
    `prepare_chain`: the tools and registry are serve's, those its resumes are given."""

    def __init__(self, projects: "Projects", tools: Sequence[str] = (), registry: "Registry | None" = None) -> None:
        self.projects = projects
        self.tools, self.registry = list(tools), registry
        self.prepared = 0  # how many times a chain was loaded, checked and compiled
        self._project: Any = None  # the project (projects.current()) what is kept was prepared with
        self._bases: dict[str, "ProjectBase | None"] = {}  # chain directory -> its project (None: not watched)
        self._chains: dict[tuple[str, str], "Prepared"] = {}  # (path, sha256 of its bytes) -> prepared

    def __call__(self, file: str) -> "Prepared":
        from chainlang.runtime.prepare import prepare

        project = self.projects.current()  # a few microseconds, unless the project changed: then it is loaded again
        if project is not self._project:
            self._project = project
            self._bases.clear()
            self._chains.clear()
        base = self._base(str(Path(file).parent), project)  # where prepare() reads the project from
        if base is None:  # outside serve's directory: its project's changes are not watched
            self.prepared += 1
            return prepare(file, self.tools, self.registry)
        from chainlang.model.files import read_bounded

        data = read_bounded(file)
        key = (file, hashlib.sha256(data).hexdigest())
        found = self._chains.get(key)
        if found is None:
            found = self._prepare(file, data, base)
            if len(self._chains) >= _KEEP:
                self._chains.clear()
            self._chains[key] = found
        return found

    def _base(self, directory: str, project: Any) -> "ProjectBase | None":
        """The project a chain of `directory` is checked with: serve's own when the nearest
        chainlang.toml is serve's, else that directory's project, read once."""
        if directory in self._bases:
            return self._bases[directory]
        from chainlang.config.project import find_project_config
        from chainlang.pipeline import python_hook_files
        from chainlang.runtime.prepare import ProjectBase, project_base

        root = Path(project.root).resolve()
        base: ProjectBase | None = None
        if Path(directory).resolve().is_relative_to(root):
            config = find_project_config(Path(directory))
            if Path(config.root if config is not None else directory).resolve() == root:
                # what project_base(directory) would read again: serve loaded it for its events
                loader = project.loader
                base = ProjectBase(project.config, project.root, loader.registry, loader.context,
                                   python_hook_files(loader.registry))
            else:  # a nested project: its files are under serve's, so a change there reloads serve's too
                base = project_base(Path(directory), self.tools, self.registry)
        self._bases[directory] = base
        return base

    def _prepare(self, file: str, data: bytes, base: "ProjectBase") -> "Prepared":
        from chainlang.pipeline import load_file
        from chainlang.runtime.prepare import chain_file, prepare_loaded

        self.prepared += 1
        # the bytes that were digested are the ones compiled: no second read that could differ
        return prepare_loaded(base, load_file(file, data=data), chain_file(file))

