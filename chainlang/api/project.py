"""A project opened once for many runs: `await chainlang.open_project(...)`.

Opening reads everything a run needs that does not change from run to run — the
configuration, the registry with the caller's tools, the hooks in force, the project's
transcript key, the engine — in a worker thread, so the caller's event loop never waits
on a file or the store. Its chains are then checked and compiled once each
(`project.chain(...)`), and each `chain.run(...)` does only the run's own work. (As
LangGraph's compiled graph and Temporal's client are held by an application, not made
again per call.)

A project sees its files and stored hooks as they were when it was opened:
`project.reload()` reads them again.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence, Union

from chainlang.api.chain import Chain
from chainlang.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from chainlang.api.oneshot import Tools
    from chainlang.config.project import ProjectConfig
    from chainlang.registry.objects import ToolSource
    from chainlang.registry.registry import Registry
    from chainlang.runtime.emit import EmitResult, Project as HooksInForce
    from chainlang.journal.retention import GcReport
    from chainlang.runtime.engine import Engine
    from chainlang.runtime.prepare import ProjectBase
    from chainlang.runtime.runner import RunResult

__all__ = ["Project", "open_project", "open_project_sync"]

ORIGIN = "given with tools="  # how the caller's tools are named in error messages
MEMORY = "memory"  # transcripts="memory": runs keep their records in memory, no file

#: `transcripts=`: a directory, or "memory"
Transcripts = Union[str, "os.PathLike[str]", None]
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


async def open_project(path: str | os.PathLike[str] | None = None, *, tools: "Tools" = (),
                       models: Mapping[str, Any] | None = None, transcripts: "Transcripts" = None,
                       keep: int | str | None = None, notify: Callable[[str], None] | None = None) -> "Project":
    """Open the project at `path` (a directory; None: the working directory), reading its
    `chainlang.toml` (searched upwards, as the CLI does), its tools and the caller's
    `tools` (functions, bound methods, modules, module names, `.py` paths: see
    [Tools as objects](../guides/python.md#tools-as-objects)), its hooks and its key, in a
    worker thread. `models` replaces the `[models]` table of chainlang.toml (the same keys,
    as a dict); `transcripts` is the directory runs write their transcripts to (default:
    `[runs] dir`, else the project's `.chainlang/runs`), or `"memory"`: no file at all,
    each result's `records` holds its transcript (for tests and ephemeral runs; such a run
    cannot be resumed, nor detached at a wait); `keep` is how many ended runs' transcripts
    stay (a count, or an age such as `"30d"`; default `[runs] keep`, else all), applied
    when the project opens and closes and by `project.collect()`; `notify` receives the
    runs' notifications (default: the `chainlang.run` logger). Use it as
    `async with await open_project(...) as project:`.

    Raises ConfigError for a chainlang.toml or `models` that does not follow its schema,
    and UsageError (ToolLoadError's message) for tools that cannot be used."""
    _tools_list(tools)
    _models_table(models)
    return await asyncio.to_thread(_open, path, tools, models, transcripts, keep, notify)


def open_project_sync(path: str | os.PathLike[str] | None = None, *, tools: "Tools" = (),
                      models: Mapping[str, Any] | None = None, transcripts: "Transcripts" = None,
                      keep: int | str | None = None, notify: Callable[[str], None] | None = None) -> "Project":
    """`open_project` for code without an event loop (a script, a sync test): the same
    project, with `with open_project_sync(...) as project:`, `chain.run_sync(...)` and
    `project.emit_sync(...)`."""
    _tools_list(tools)
    _models_table(models)
    return _open(path, tools, models, transcripts, keep, notify)


def _tools_list(tools: object) -> None:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise UsageError(f"tools= takes a list (e.g. tools=[greet, 'mypkg.tools']), not {type(tools).__name__} "
                         f"{tools!r}" if isinstance(tools, str) else
                         f"tools= takes a list (e.g. tools=[greet, 'mypkg.tools']), not {type(tools).__name__}")


def _models_table(models: object) -> None:
    if models is not None and not isinstance(models, Mapping):
        from chainlang.errors import ConfigError

        raise ConfigError(f"models= takes a dict like chainlang.toml's [models] table (e.g. models={{'heavy': "
                          f"{{'provider': 'openai', 'base_url': ..., 'model': ...}}}}), not {type(models).__name__}")


def _open(path: str | os.PathLike[str] | None, tools: Sequence["ToolSource"], models: Mapping[str, Any] | None,
          transcripts: "Transcripts", keep: int | str | None, notify: Callable[[str], None] | None) -> "Project":
    start = Path(path) if path is not None else Path.cwd()
    if not start.is_dir():
        what = "is a file" if start.exists() else "does not exist"
        raise UsageError(f"open_project({os.fspath(start)!r}): {what}; give the project's directory (where its "
                         "chainlang.toml is), or None for the working directory")
    from chainlang.journal.retention import parse_keep

    project = Project(start.resolve(), list(tools), models, transcripts, notify)
    project._keep = parse_keep(keep)
    project.reload()
    project.collect()
    return project


def _with_models(config: "ProjectConfig | None", root: Path, models: Mapping[str, Any]) -> "ProjectConfig":
    """The project's configuration with its `[models]` table replaced by `models`."""
    import dataclasses

    from chainlang.config.model import ModelsConfig
    from chainlang.config.project import ProjectConfig
    from chainlang.errors import ConfigError

    from chainlang.config.fields import build

    problems: list[dict[str, Any]] = []
    table = build(ModelsConfig, dict(models), (), problems)
    if table is None:
        first = problems[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise ConfigError(f"models={{...}}: {where + ': ' if where else ''}{first.get('msg', 'invalid')} (the keys of "
                          "chainlang.toml's [models] table: heavy, fast, light, memory)") from None
    base = config if config is not None else ProjectConfig(path=root / "chainlang.toml")
    return dataclasses.replace(base, models=table)


def refuse_other_kind(transcript: Path, expect: Literal["run", "emit"], prefix: str = "") -> None:
    """UsageError, before anything is resumed, when `transcript` records an emit and a run
    was expected (`expect` "run") or the other way round. (Its first record only says
    which; the resume verifies the transcript.)"""
    from chainlang.runtime.resume import recorded_start

    if not transcript.is_file():
        return  # the resume says what is wrong with it
    _, emitted = recorded_start(transcript)
    if expect == "run" and emitted:
        raise UsageError(f"{transcript} is the transcript of an emit: continue it with {prefix}resume_emit()")
    if expect == "emit" and not emitted:
        raise UsageError(f"{transcript} is the transcript of a run: continue it with {prefix}resume_run()")


class Project:
    """An open project: its configuration, registry, hooks in force, key and engine, read
    once. Get its chains with `chain(...)` / `chain_from_text(...)`; fire its external
    events with `emit(...)`; continue an interrupted run with `resume_run(...)`."""

    def __init__(self, start: Path, tools: list["ToolSource"], models: Mapping[str, Any] | None,
                 transcripts: "Transcripts", notify: Callable[[str], None] | None) -> None:
        self._start = start
        self._tools = tools
        self._models = dict(models) if models is not None else None
        self._transcripts = transcripts
        self.notify = notify
        self._chains: dict[str, Chain] = {}
        self._hooks: "HooksInForce | None" = None
        self._closed = False
        self.base: "ProjectBase"
        self.engine: "Engine"
        self.key: bytes
        self.runs_dir: Path
        self.in_memory = transcripts == MEMORY  # no transcript files: results carry their records
        self._keep: int | float | None = None  # open_project(keep=...), parsed

    # -- what it holds

    @property
    def root(self) -> Path:
        """The project's directory (chainlang.toml's; without one, the directory opened)."""
        return self.base.root

    @property
    def config(self) -> "ProjectConfig | None":
        """Its chainlang.toml, read (None without one)."""
        return self.base.config

    @property
    def registry(self) -> "Registry":
        """Every event its chains may use: the standard ones, its tools and the caller's."""
        return self.base.registry

    @property
    def tool_refs(self) -> list[str]:
        """The tools given by name (what a transcript records for a resume from the CLI)."""
        return [t for t in self._tools if isinstance(t, str)]

    def reload(self) -> None:
        """Read the project again (configuration, tools, hooks files, stored hooks); the
        chains got before keep what they were compiled with."""
        from chainlang.engine import engine_for
        from chainlang.errors import RegistryError
        from chainlang.pipeline import python_hook_files
        from chainlang.journal.retention import runs_dir
        from chainlang.runtime.admission import project_key
        from chainlang.runtime.prepare import ProjectBase, project_base

        self._check_open()
        try:
            base = project_base(self._start, self._tools, origin=ORIGIN)
        except RegistryError as exc:
            raise UsageError(str(exc)) from None
        if self._models is not None:
            config = _with_models(base.config, base.root, self._models)
            base = ProjectBase(config, base.root, base.registry, base.context, python_hook_files(base.registry))
        self.base = base
        self.engine = engine_for(base.config)
        self.key = project_key(base.root, create=True)
        if self._transcripts is None or self.in_memory:
            self.runs_dir = runs_dir(base.config, base.root)
        else:
            self.runs_dir = Path(self._transcripts)
            if not self.runs_dir.is_absolute():
                self.runs_dir = base.root / self.runs_dir
        if not self.in_memory:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._chains.clear()
        self._hooks = None

    # -- chains

    def chain(self, name: str | os.PathLike[str]) -> Chain:
        """The chain named `name` (`chain:` of a file in one of the project's `chains`
        directories) or the chain file at path `name` (relative to the project), checked
        and compiled once: later calls for the same file (by its name or its path) return the
        same Chain. Raises ChainInvalid (with its `.diagnostics`) for a chain with errors,
        UsageError for one that is not there."""
        self._check_open()
        key = os.fspath(name)
        found = self._chains.get(key)
        if found is not None:
            return found
        from chainlang.pipeline import is_chain_file, load_file
        from chainlang.runtime.prepare import chain_file, prepare_loaded

        loaded = next((f for f in self.base.context if f.chain.kind == "chain" and f.chain.name == key), None)
        if loaded is not None:
            path = Path(loaded.path)
        elif is_chain_file(key) or os.sep in key or "/" in key:
            path = chain_file(self.root / key if not Path(key).is_absolute() else Path(key))
            loaded = load_file(str(path))
        else:
            names = sorted(f.chain.name for f in self.base.context if f.chain.kind == "chain" and f.chain.name)
            known = f"its named chains: {', '.join(names)}" if names else (
                "it has no named chains (list their directories in chainlang.toml's `chains`)")
            raise UsageError(f"project.chain({key!r}): no chain of that name in {self.root} ({known}); "
                             "or give the path of a chain file (name.chain.yaml)")
        same_file = self._chains.get(str(path.resolve()))  # asked for before by its other name or path
        made = same_file if same_file is not None else Chain(self, prepare_loaded(self.base, loaded, path))
        self._chains[key] = self._chains[str(path.resolve())] = made
        return made

    def chain_from_text(self, text: str, *, name: str = "text") -> Chain:
        """A chain given as YAML text (one a model just wrote, say), checked and compiled as a
        file of the project named `name`. Raises ChainInvalid (`.diagnostics`, positions in
        the text) when it has errors. Its runs' transcripts record the text's digest, not a
        file: they can be read, but not resumed."""
        self._check_open()
        from chainlang.pipeline import load_file
        from chainlang.runtime.prepare import prepare_loaded

        if not isinstance(text, str):
            raise UsageError(f"chain_from_text(): the text must be a str, not {type(text).__name__}")
        slug = _SLUG.sub("-", name).strip("-.") or "text"
        path = self.root / f"<{slug}>.chain.yaml"  # no such file: a resume says so
        loaded = load_file(str(path), text=text, kind="chain")
        return Chain(self, prepare_loaded(self.base, loaded, path))

    # -- events and resumes

    async def emit(self, event: str, data: Any = None, *, id: str | None = None, now: "datetime | str | None" = None,
                   transcript: str | os.PathLike[str] | None = None, notify: Callable[[str], None] | None = None,
                   raise_on_failure: bool = False) -> "EmitResult":
        """Fire external event `event` with `data` (its payload; None is `{}`): the project's
        `post:` hooks on it run, and the runs waiting for it get it. `id` makes it idempotent
        (an id seen before is a `duplicate`). Returns how its hooks' actions ended."""
        self._check_open()
        from chainlang.runtime.emit import emit_async

        hooks = await self._hooks_in_force()
        result = await emit_async(event, {} if data is None else data, id=id, project=self.root,
                                  registry=self.registry, now=now, transcript=transcript, notify=notify or self.notify,
                                  engine_for=lambda config: self.engine, loaded=hooks, key=self.key)
        if raise_on_failure:
            result.raise_for_status()
        return result

    async def resume_run(self, transcript: str | os.PathLike[str], *, rerun: Sequence[str] = (),
                         skip: Sequence[str] = (), notify: Callable[[str], None] | None = None,
                         answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
        """Continue the interrupted run recorded in `transcript` (steps that finished are not
        run again; `rerun`/`skip` decide about a step whose effect is unknown)."""
        from chainlang.runtime.runner import RunResult

        result = await self._resume(transcript, rerun, skip, notify, answers, expect="run")
        if not isinstance(result, RunResult):
            raise UsageError(f"{os.fspath(transcript)} is the transcript of an emit: continue it with "
                             "project.resume_emit()")
        if raise_on_failure:
            result.raise_for_status()
        return result

    async def resume_emit(self, transcript: str | os.PathLike[str], *, notify: Callable[[str], None] | None = None,
                          raise_on_failure: bool = False) -> "EmitResult":
        """Continue the interrupted emit recorded in `transcript` (its hooks' actions that
        finished are not run again)."""
        from chainlang.runtime.emit import EmitResult

        result = await self._resume(transcript, (), (), notify, None, expect="emit")
        if not isinstance(result, EmitResult):
            raise UsageError(f"{os.fspath(transcript)} is the transcript of a run: continue it with "
                             "project.resume_run()")
        if raise_on_failure:
            result.raise_for_status()
        return result

    async def _resume(self, transcript: str | os.PathLike[str], rerun: Sequence[str], skip: Sequence[str],
                      notify: Callable[[str], None] | None, answers: Mapping[str, Any] | None, *,
                      expect: Literal["run", "emit"]) -> Any:
        self._check_open()
        if isinstance(rerun, str) or isinstance(skip, str):
            raise UsageError("rerun= and skip= take lists of step ids or paths, e.g. rerun=['send']")
        where = Path(transcript)
        if not where.is_absolute() and not where.exists():
            where = self.root / where
        await asyncio.to_thread(refuse_other_kind, where, expect, "project.")
        return await self.engine.resume(where, registry=self.registry, rerun=list(rerun), skip=list(skip),
                                        notify=notify or self.notify, answers=dict(answers) if answers else None)

    async def _hooks_in_force(self) -> "HooksInForce":
        if self._hooks is None:
            from chainlang.runtime.emit import load_project

            self._hooks = await asyncio.to_thread(load_project, self.root, (), self.registry)
        return self._hooks

    # -- sync forms and closing

    def emit_sync(self, event: str, data: Any = None, *, id: str | None = None, now: "datetime | str | None" = None,
                  transcript: str | os.PathLike[str] | None = None, notify: Callable[[str], None] | None = None,
                  raise_on_failure: bool = False) -> "EmitResult":
        """`emit` for code without an event loop."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.emit(event, data, id=id, now=now, transcript=transcript, notify=notify,
                                  raise_on_failure=raise_on_failure))

    def resume_run_sync(self, transcript: str | os.PathLike[str], *, rerun: Sequence[str] = (),
                        skip: Sequence[str] = (), notify: Callable[[str], None] | None = None,
                        answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
        """`resume_run` for code without an event loop."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.resume_run(transcript, rerun=rerun, skip=skip, notify=notify, answers=answers,
                                        raise_on_failure=raise_on_failure))

    def collect(self) -> "GcReport | None":
        """Remove the transcripts of ended runs beyond the retention (`keep=`, else
        `[runs] keep`; None when neither is set): never a run that waits, was interrupted
        or is still going (chainlang.journal.retention)."""
        from chainlang.journal.retention import collect, parse_keep

        keep = self._keep
        if keep is None and self.config is not None and self.config.runs is not None:
            keep = parse_keep(self.config.runs.keep)
        if keep is None or self.in_memory:
            return None
        return collect(self.runs_dir, keep)

    def close(self) -> None:
        """Let go of the project (its chains can no longer run), applying the retention."""
        if not self._closed:
            self.collect()
        self._shut()

    async def aclose(self) -> None:
        if not self._closed:
            await asyncio.to_thread(self.collect)  # files removed off the caller's loop
        self._shut()

    def _shut(self) -> None:
        self._closed = True
        self._chains.clear()
        self._hooks = None

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the project is closed (its `async with` block ended): open it again")

    async def __aenter__(self) -> "Project":
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __enter__(self) -> "Project":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<chainlang.Project {self._start}>"
