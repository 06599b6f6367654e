"""Before a run: the chain file loaded, checked and compiled, with its project (config,
registry, the named chains and `chain.run` files it may call, checked once each)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.pipeline import LoadedFile
    from chainlang.compile import ExecutionGraph
    from chainlang.diagnostics import Diagnostic
    from chainlang.config.project import ProjectConfig
    from chainlang.registry.objects import ToolSource
    from chainlang.registry.registry import Registry


@dataclass
class Prepared:
    """A checked, compiled chain and what running it needs."""

    path: Path
    graph: "ExecutionGraph | None"  # None when the chain has check errors: it must not run
    registry: "Registry"
    config: "ProjectConfig | None"
    root: Path  # the project directory: chainlang.toml's, else the chain file's
    diagnostics: list["Diagnostic"]
    loader: "SubChains"
    sources: dict[str, Any]
    hooks: int  # hooks in force (the chain's own, the project's hooks files, Python's)
    digest: str  # sha256 of the chain file: a resume refuses a file that changed
    chain: Any = None  # the chain's model (chainlang.model.nodes.Chain): what its secrets are read from
    secret_names: frozenset[str] | None = None  # the secrets it and its hooks reference (found once: secrets_of)
    resolved: str = ""  # the chain file's absolute path, as its transcripts record it (resolved once)


@dataclass
class ProjectBase:
    """What every chain of a project is checked and run with, read once: its configuration,
    the registry (stdlib, its tools, MCP servers' and the caller's), and the files every
    chain sees besides itself (hooks files, named chains, stored hooks)."""

    config: "ProjectConfig | None"
    root: Path
    registry: "Registry"
    context: list["LoadedFile"]
    python_hooks: list["LoadedFile"]


def project_base(start_dir: Path, tools: Sequence["ToolSource"] = (), registry: "Registry | None" = None, *,
                 origin: str = "given with --tools") -> ProjectBase:
    """Read the project that `start_dir` belongs to (UsageError when it cannot be used)."""
    from chainlang.pipeline import context_files, default_registry, python_hook_files
    from chainlang.tasks.stored import stored_hook_files
    from chainlang.config.project import find_project_config

    config = find_project_config(start_dir)  # a ConfigError (a UsageError) for a chainlang.toml it cannot use
    registry = registry if registry is not None else default_registry(tools, start_dir, origin=origin)
    context = context_files(start_dir, set(), stored_hook_files)
    root = config.root if config is not None else start_dir
    return ProjectBase(config, root, registry, context, python_hook_files(registry))


def prepare(path: str | os.PathLike[str], tools: Sequence["ToolSource"] = (), registry: "Registry | None" = None) -> Prepared:
    """Load, check and compile the chain at `path`. Raises UsageError for a path or tools
    that cannot be used; check errors are in `diagnostics` (and `graph` is None)."""
    from chainlang.pipeline import load_file

    chain_path = chain_file(path)
    base = project_base(chain_path.parent, tools, registry)
    return prepare_loaded(base, load_file(str(path)), chain_path)


def chain_file(path: str | os.PathLike[str]) -> Path:
    """`path` as the chain file to run; UsageError when it is not one."""
    from chainlang.pipeline import file_kind

    chain_path = Path(path)
    if chain_path.is_dir():
        raise UsageError(_not_a_chain_file(os.fspath(path)))
    if not chain_path.is_file():
        raise UsageError(f"{path}: not a regular file" if chain_path.exists() else f"{path}: no such chain file")
    if file_kind(str(path)) == "hooks":
        raise UsageError(f"{path} is a hooks file: it has no steps to run (hooks fire around the steps of a chain)")
    return chain_path


def prepare_loaded(base: ProjectBase, main: "LoadedFile", chain_path: Path) -> Prepared:
    """Check and compile the loaded chain `main` in the project `base` (the chain itself
    left out of the context it is checked with)."""
    own = os.path.realpath(main.path)
    context = [f for f in base.context if os.path.realpath(f.path) != own]
    # the hooks in force are checked with the chain: a hooks file with errors stops the run
    hook_files = [f for f in context if f.chain.kind == "hooks"] + base.python_hooks
    others = [f for f in context if f.chain.kind != "hooks"]
    diagnostics, project_registry, named = _check([main] + hook_files, base.registry, others)
    loader = SubChains(base.registry, project_registry, named, context, base.root)
    from chainlang.compile import compile_chain
    from chainlang.compile.hooks import compile_hooks

    failed = any(d.severity == "error" for d in diagnostics)
    graph = None
    hooks = [(h, main.chain) for h in main.chain.hooks] + [(h, f.chain) for f in hook_files for h in f.chain.hooks]
    if not failed:
        graph = dataclasses.replace(compile_chain(main.chain), hook_set=compile_hooks(hooks))
    data = main.source.text.encode("utf-8", "surrogatepass")
    sources = {main.path: main.source, **{f.path: f.source for f in hook_files}}
    return Prepared(chain_path, graph, project_registry, base.config, base.root, diagnostics, loader, sources,
                    len(hooks), hashlib.sha256(data).hexdigest(), main.chain, resolved=str(chain_path.resolve()))


def _not_a_chain_file(directory: str) -> str:
    """The message for `chainlang run DIR`, naming a chain file in it when there is one."""
    from chainlang.pipeline import file_kind, is_chain_file

    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in islice(entries, 10_000):
                if is_chain_file(entry.name) and file_kind(entry.name) == "chain" and entry.is_file():
                    names.append(entry.name)
    except OSError:
        pass
    shown = directory.rstrip("/" + os.sep) or directory
    if names:
        names.sort()
        more = f" ({len(names)} chain files there)" if len(names) > 1 else ""
        hint = f", e.g. {names[0] if shown == '.' else os.path.join(shown, names[0])}{more}"
    else:
        hint = " (*.chain.yaml or *.chain.yml); there is none directly in it"
    return f"{directory}: is a directory, not a chain file; give the path of one chain file{hint}"


def _check(files: list["LoadedFile"], registry: "Registry", context: list["LoadedFile"]) -> tuple[list["Diagnostic"], "Registry", dict[str, "LoadedFile"]]:
    from chainlang.pipeline import check_project

    diagnostics, project, project_registry = check_project(files, registry, context)
    by_chain = {id(f.chain): f for f in files + context}
    named = {name: by_chain[id(chain)] for name, chain in project.named.items() if id(chain) in by_chain}
    return diagnostics, project_registry, named


def _model_hint(diagnostic: "Diagnostic") -> str | None:
    """The hint a model gets with a diagnostic of its chain: the checker's, except where it
    says to widen the allow list, which the model cannot write (chainlang writes it)."""
    if diagnostic.slug == "not-allowed":
        return "use only the events you were given"
    return diagnostic.hint


def secrets_of(prepared: Prepared, redactor: Any) -> Any:
    """The run's secrets (chainlang.runtime.secret_refs), with every one that its chain, the
    hooks in force and the named chains they call reference read now; raises UsageError
    naming those that cannot be read (and where they are read from)."""
    from chainlang.runtime.secret_refs import RunSecrets, needed_by

    secrets = RunSecrets(prepared.config, redactor)
    if prepared.secret_names is None:  # the chain and its hooks do not change: a loaded chain's many runs find them once
        hooks = [f.chain for f in prepared.loader.context if f.chain.kind == "hooks"]
        prepared.secret_names = frozenset(needed_by([prepared.chain, *hooks] if prepared.chain is not None else hooks,
                                                    prepared.loader.named))
    secrets.read_ahead(set(prepared.secret_names))
    return secrets


class SubChains:
    """Finds, checks (once) and compiles the chains a run calls: named chains of the
    project, and `chain.run` paths (relative to the calling chain, inside the project)."""

    def __init__(self, registry: "Registry", project_registry: "Registry", named: dict[str, "LoadedFile"],
                 context: list["LoadedFile"], root: Path) -> None:
        self.registry = registry
        self.project_registry = project_registry
        self.named = named
        self.context = context
        self.root = root.resolve()
        self.graphs: dict[str, "ExecutionGraph"] = {}
        self._hook_secrets: set[str] | None = None

    def hook_secrets(self) -> set[str]:
        """The secrets that the project's hooks files (and the named chains they call)
        reference: what an emit reads before its hooks fire (found once: serve emits often)."""
        if self._hook_secrets is None:
            from chainlang.runtime.secret_refs import needed_by

            self._hook_secrets = needed_by([f.chain for f in self.context if f.chain.kind == "hooks"], self.named)
        return self._hook_secrets

    def __call__(self, target: str, caller: str) -> "ExecutionGraph":
        from chainlang.pipeline import is_chain_file, load_file
        from chainlang.runtime.outcomes import ChainLoadError

        if target in self.named:
            loaded = self.named[target]
            key = os.path.realpath(loaded.path)
        else:
            if not target:
                raise ChainLoadError("chain.run needs a path")
            candidate = (Path(caller).parent / target).resolve()
            if not is_chain_file(candidate.name):
                raise ChainLoadError(f"{target}: chain.run runs chain files (*.chain.yaml or *.chain.yml)")
            if not candidate.is_relative_to(self.root):
                raise ChainLoadError(f"{target}: outside the project ({self.root}); chain.run only runs the project's chains")
            if not candidate.is_file():
                raise ChainLoadError(f"{target}: no such chain file")
            key = str(candidate)
            if key in self.graphs:
                return self.graphs[key]
            try:
                loaded = load_file(key)
            except UsageError as exc:
                raise ChainLoadError(str(exc)) from None
        if key in self.graphs:
            return self.graphs[key]
        return self._compiled(loaded, key)

    def from_text(self, name: str, text: str) -> tuple["ExecutionGraph | None", list[str]]:
        """A chain that exists only as text (written by a model: agent.chain), loaded and checked
        like a file of the project named `name`: (its graph, []) or (None, its errors, one
        line each: where, what, how to fix it)."""
        from chainlang.pipeline import load_file

        try:
            loaded = load_file(name, text=text, kind="chain")
        except UsageError as exc:
            return None, [str(exc)]
        diagnostics, _, _ = _check([loaded], self.registry, list(self.context))
        errors = [f"line {d.line}, column {d.column}: {d.message} ({_model_hint(d)})" if _model_hint(d) else
                  f"line {d.line}, column {d.column}: {d.message}" for d in diagnostics if d.severity == "error"]
        from chainlang.runtime.secret_refs import needed_by

        # a model must not route the project's secrets, whatever its prompt made it write (the named
        # chains it calls are the project's own: they may use theirs)
        used = needed_by([loaded.chain], {})
        if used:
            errors.append(f"the chain uses the project's secrets ({', '.join(f'secrets.{n}' for n in sorted(used))}): "
                          "a chain written by a model cannot (write the steps without them)")
        if errors:
            return None, errors
        from chainlang.compile import compile_chain

        return compile_chain(loaded.chain), []

    def _compiled(self, loaded: "LoadedFile", key: str) -> "ExecutionGraph":
        from chainlang.runtime.outcomes import ChainLoadError

        others = [f for f in self.context if os.path.realpath(f.path) != key]
        diagnostics, registry, _ = _check([loaded], self.registry, others)
        errors = [d for d in diagnostics if d.severity == "error"]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more; run chainlang check {loaded.path})" if len(errors) > 1 else ""
            raise ChainLoadError(f"{loaded.path}:{first.line}:{first.column}: {first.message}{more}")
        from chainlang.compile import compile_chain
        from chainlang.compile.hooks import compile_hooks

        own = compile_hooks((h, loaded.chain) for h in loaded.chain.hooks)  # in force while it runs
        graph = dataclasses.replace(compile_chain(loaded.chain), hook_set=own if own else None)
        self.graphs[key] = graph
        return graph


__all__ = ["Prepared", "ProjectBase", "SubChains", "chain_file", "prepare", "prepare_loaded", "project_base", "secrets_of"]
