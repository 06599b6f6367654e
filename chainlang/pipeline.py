"""The checking pipeline behind `chainlang check` and the Python API:
discover → load → model → project (named chains, declared events) → checks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from chainlang.diagnostics import rules
from chainlang.errors import UsageError as UsageError  # public here too: chainlang.pipeline.UsageError
from chainlang.diagnostics import Diagnostic, DiagnosticSink, has_errors, sort_diagnostics
from chainlang.load.gc_pause import gc_paused
from chainlang.load.source import SourceFile
# one file loaded and modelled: below the checks (chainlang.model.files), public here too
from chainlang.model.files import CHAIN_SUFFIXES as CHAIN_SUFFIXES
from chainlang.model.files import HOOKS_SUFFIXES as HOOKS_SUFFIXES
from chainlang.model.files import LoadedFile as LoadedFile
from chainlang.model.files import file_kind as file_kind
from chainlang.model.files import is_chain_file as is_chain_file
from chainlang.model.files import load_file as load_file

if TYPE_CHECKING:
    from chainlang.checks.base import Project
    from chainlang.model.nodes import Chain
    from chainlang.registry.objects import ToolSource
    from chainlang.registry.registry import Registry

MAX_FILES = 10_000

#: The hooks a project keeps in its store (`task.register`, LANGUAGE.md §12): given the
#: project's root, its stored hooks as hooks files. The task system provides it
#: (`chainlang.tasks.stored.stored_hook_files`); the callers that check a project as it
#: runs (`chainlang check`, run, emit, the language server) pass it, so that checking does
#: not import the task system and its store. Without it, no stored hook is in force.
StoredHooks = Callable[[Path], Sequence[LoadedFile]]


@dataclass
class CheckResult:
    """What checking files found: the diagnostics, the sources read and the files checked."""
    diagnostics: list[Diagnostic]
    sources: dict[str, SourceFile]
    files: list[str] = field(default_factory=list)
    chains: list["Chain"] = field(default_factory=list)  # the models, in the order of `files`

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def discover(paths: Iterable[str | os.PathLike[str]], nested: list[str] | None = None) -> list[str]:
    """Files to check: files as given, and every chain/hooks file below each directory (sorted).
    Given `nested`, a directory below one of `paths` that has a chainlang.toml of its own is
    another project: it is not searched, and its path is added to `nested`."""
    found: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            below: list[str] = []
            for root, dirs, files in os.walk(path):
                if nested is not None and root != os.fspath(raw) and _CONFIG_NAME in files:
                    nested.append(root)
                    dirs[:] = []
                    continue
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__"))
                # regular files only: a FIFO or device named x.chain.yaml would block or never end
                below.extend(p for f in files if is_chain_file(f) and os.path.isfile(p := os.path.join(root, f)))
            found.extend(sorted(below))
        elif path.is_file():
            found.append(str(raw))
        elif path.exists():
            raise UsageError(f"{raw}: not a regular file or directory")
        else:
            raise UsageError(f"{raw}: no such file or directory")
        if len(found) > MAX_FILES:
            raise UsageError(f"more than {MAX_FILES:,} chain files found; check fewer at a time")
    unique: dict[str, str] = {}  # real path → the first spelling given
    for item in found:
        unique.setdefault(os.path.realpath(item), _display(item))
    return list(unique.values())


_CONFIG_NAME = "chainlang.toml"


def _nothing_found(paths: Sequence[str | os.PathLike[str]]) -> str:
    shown = [os.fspath(p) for p in paths[:3]] + (["..."] if len(paths) > 3 else [])
    where = f"{', '.join(shown)}: " if shown else ""
    return (f"{where}no chain or hooks files found (looked for *.chain.yaml, *.chain.yml, *.hooks.yaml, "
            "*.hooks.yml; hidden directories are skipped)")


def _display(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


def build_project(files: Sequence[LoadedFile], registry: "Registry") -> tuple["Project", "Registry"]:
    """Named chains and declared events of all files become events; conflicts are reported."""
    from chainlang.checks.base import Project
    from chainlang.registry.spec import EventSpec

    project = Project(chains=[f.chain for f in files])
    specs: list[EventSpec] = []
    declared: dict[str, str] = {}
    sinks = {id(f.chain): f.sink for f in files}
    for loaded in files:
        chain = loaded.chain
        for name, decl in chain.events.items():
            if name in registry and registry.get(name).kind != "external":  # type: ignore[union-attr]
                loaded.sink.add(rules.DUPLICATE_ID, f"'{name}' is already an event ({_origin(registry, name)}); it cannot be declared as external",
                                decl.node.span, "rename the declared event")
                continue
            if name in declared or name in registry:
                continue  # the same external event declared in several files: the first declaration wins
            declared[name] = chain.file
            specs.append(EventSpec.external_event(name, decl.payload, description=decl.description, source=chain.file))
    for loaded in files:
        chain = loaded.chain
        if not chain.name or chain.name_node is None:
            continue
        name = chain.name
        if name in project.named:
            other = project.named[name]
            loaded.sink.add(rules.DUPLICATE_ID, f"chain name '{name}' is also used by {other.file}", chain.name_node.span,
                            "chain names are event names: each must be unique in the project")
            continue
        if name in registry or name in declared:
            loaded.sink.add(rules.DUPLICATE_ID, f"chain name '{name}' is already an event ({_origin(registry, name) if name in registry else 'declared in ' + declared[name]})",
                            chain.name_node.span, "rename the chain")
            continue
        project.named[name] = chain
        inputs = {k: v.schema for k, v in chain.inputs.items()}
        specs.append(EventSpec.chain_event(name, inputs, dict(chain.outputs), description=chain.description or "", source=chain.file))
    del sinks
    return project, registry.with_specs(specs)


def _origin(registry: "Registry", name: str) -> str:
    spec = registry.get(name)
    return f"from {spec.source}" if spec and spec.source else "registered"


def check_loaded(files: Sequence[LoadedFile], registry: "Registry", context: Sequence[LoadedFile] = ()) -> list[Diagnostic]:
    return check_project(files, registry, context)[0]


@gc_paused()  # the collector would traverse the growing model again and again (load/gc_pause.py)
def check_project(files: Sequence[LoadedFile], registry: "Registry",
                  context: Sequence[LoadedFile] = ()) -> tuple[list[Diagnostic], "Project", "Registry"]:
    """`check_loaded`, also returning the project (its named chains) and the registry with
    the project's chains and declared events: what a run needs next."""
    from chainlang.checks import all_checks
    from chainlang.checks.base import CheckContext
    from chainlang.model.nested import expand_nested_chains
    from chainlang.diagnostics.suggest import suggestion_budget

    project, project_registry = build_project(list(files) + list(context), registry)
    checks = all_checks()
    for loaded in files:
        if loaded.chain.root is None:
            continue
        ctx = CheckContext(loaded.chain, loaded.source, loaded.sink, project_registry, project)
        with suggestion_budget():
            expand_nested_chains(loaded.chain, loaded.source, loaded.sink, project_registry)
            for check in checks:
                check.check(ctx)
    out: list[Diagnostic] = []
    for loaded in files:
        out.extend(loaded.sink.items)
    return sort_diagnostics(out), project, project_registry


def default_registry(tools: Sequence["ToolSource"] = (), start_dir: Path | None = None, *,
                     origin: str = "given with --tools") -> "Registry":
    from chainlang.registry.build import build_registry
    from chainlang.errors import RegistryError

    try:
        return build_registry(tools, start_dir, origin=origin)
    except RegistryError as exc:
        if isinstance(exc, UsageError):  # a ConfigError: the caller may catch it by its class
            raise
        raise UsageError(str(exc)) from None


def project_registry(tools: Sequence[str] = (), start_dir: Path | None = None,
                     stored_hooks: StoredHooks | None = None) -> "Registry":
    """The registry plus the named chains and declared events of the chainlang.toml `chains` dirs:
    what `events` and `describe` list, the same events `check` resolves."""
    registry = default_registry(tools, start_dir)
    context = context_files(start_dir, set(), stored_hooks)
    if not context:
        return registry
    _, with_project = build_project(context, registry)
    return with_project


def context_files(start_dir: Path | None, exclude: set[str],
                  stored_hooks: StoredHooks | None = None) -> list[LoadedFile]:
    """What every file of the project sees besides itself (LANGUAGE.md §6.1, §7): the
    chain files of the directories listed in chainlang.toml's `chains` (their names
    resolve), every hooks file of the project and, given `stored_hooks`, the hooks stored
    by `task.register` (their hooks are in force, their events declared). Their problems
    are not reported here: checking them does that."""
    from chainlang.config.project import find_project_config

    config = find_project_config(start_dir)  # a ConfigError (a UsageError) for a chainlang.toml it cannot use
    root = Path(config.root) if config is not None else (start_dir or Path.cwd())
    dirs = [str(Path(config.root) / d) for d in (getattr(config, "chains", None) or [])] if config is not None else []
    paths = discover((d for d in dirs if Path(d).is_dir()), nested=[])  # a nested project's chains are its own
    seen = {os.path.realpath(p) for p in paths} | exclude
    paths.extend(p for p in project_hook_paths(root, recursive=config is not None) if os.path.realpath(p) not in seen)
    stored = list(stored_hooks(root)) if stored_hooks is not None else []
    return [load_file(path) for path in paths if os.path.realpath(path) not in exclude] + stored


MAX_PROJECT_DIRS = 2_000  # directories searched for hooks files before the project is judged too wide


def project_hook_paths(root: Path, *, recursive: bool = True) -> list[str]:
    """Every `*.hooks.yaml` / `*.hooks.yml` of the project, sorted: below the directory of
    chainlang.toml (hidden directories, node_modules and __pycache__ left out), or, for a
    project that no chainlang.toml marks, in the chain's own directory only. A tree too
    large to be a project is a UsageError rather than a slow walk."""
    found: list[str] = []
    seen_dirs = 0
    for where, dirs, files in os.walk(root):
        if not recursive:
            dirs[:] = []
        elif where != os.fspath(root) and _CONFIG_NAME in files:  # a nested project: its hooks are its own
            dirs[:] = []
            continue
        seen_dirs += 1
        if seen_dirs > MAX_PROJECT_DIRS:
            raise UsageError(f"{root}: more than {MAX_PROJECT_DIRS:,} directories to search for *.hooks.yaml files; "
                             "put a chainlang.toml in the project's directory (or move the chain into one)")
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__"))
        found.extend(p for f in files if f.endswith(HOOKS_SUFFIXES) and os.path.isfile(p := os.path.join(where, f)))
    return sorted(_display(p) for p in found)


def python_hook_files(registry: "Registry") -> list[LoadedFile]:
    """The hooks registered in Python, one hooks file (JSON text) per source module."""
    from chainlang.registry.hooks import hooks_file_text

    by_source: dict[str, list] = {}  # type: ignore[type-arg]
    for hook in registry.hooks():
        by_source.setdefault(hook.source or "registered in Python", []).append(hook)
    return [load_file(f"{source}#hooks", text=hooks_file_text(hooks), kind="hooks")
            for source, hooks in by_source.items()]


@gc_paused()
def check_files(
    paths: Sequence[str | os.PathLike[str]],
    tools: Sequence[str] = (),
    registry: "Registry | None" = None,
    start_dir: Path | None = None,
    stored_hooks: StoredHooks | None = None,
) -> CheckResult:
    """Check chain and hooks files (directories are searched). Raises UsageError for bad paths or tools,
    and when the paths hold no chain or hooks file at all (a mistyped path must not pass).

    chainlang.toml is looked for from the first path upwards, so checking one file of a
    project sees the project's tools and named chains. The hooks the project keeps in its
    store are in force too when `stored_hooks` reads them, as `chainlang check` does:
    `check_files(paths, stored_hooks=chainlang.tasks.stored.stored_hook_files)`."""
    nested: list[str] = []
    names = discover(paths, nested)
    if not names and not nested:
        raise UsageError(_nothing_found(paths))
    # a directory below with a chainlang.toml of its own is another project: checked with its own
    # tools, named chains and hooks, and reported with the rest
    results = [check_files([root], tools, start_dir=Path(root), stored_hooks=stored_hooks) for root in nested]
    if not names:
        return _merged(results)
    if start_dir is None and paths:
        first = Path(paths[0])
        start_dir = first if first.is_dir() else first.parent
    registry = registry if registry is not None else default_registry(tools, start_dir)
    files = [load_file(name) for name in names]
    context = context_files(start_dir, {os.path.realpath(f) for f in names}, stored_hooks)
    files.extend(python_hook_files(registry))  # checked, and reported, with the files given
    diagnostics = check_loaded(files, registry, context)
    own = CheckResult(diagnostics, {f.path: f.source for f in files}, [f.path for f in files], [f.chain for f in files])
    return _merged([own, *results]) if results else own


def _merged(results: list[CheckResult]) -> CheckResult:
    out = CheckResult([], {}, [], [])
    for result in results:
        out.diagnostics.extend(result.diagnostics)
        out.sources.update(result.sources)
        out.files.extend(result.files)
        out.chains.extend(result.chains)
    return out


def check_text(text: str, path: str = "<text>.chain.yaml", registry: "Registry | None" = None,
               tools: Sequence[str] = ()) -> list[Diagnostic]:
    """Check one chain given as text (e.g. a chain an LLM just wrote)."""
    registry = registry if registry is not None else default_registry(tools)
    return check_loaded([load_file(path, text=text)], registry)
