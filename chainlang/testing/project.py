"""A project under test: a fresh copy of a chainlang project where chains run, events are
emitted and commands are given, in this process, with the test's tool fakes and scripted
model answers. What each of them did comes back as a `StepResult`.

The copy leaves out the project's state (`.chainlang/`: its store, transcripts and key),
so every test starts from nothing and leaves the project as it was.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
import shutil
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.testing.fakes import ToolFakes

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry

__all__ = ["ChainProject", "StepResult"]

# not copied: the project's own state, and what no chain reads
_LEAVE_OUT = shutil.ignore_patterns(".chainlang", "__pycache__", ".git", ".venv", ".pytest_cache", "node_modules")
_ANSWERS = ".chainlang/chaintest/answers.yaml"  # inline model answers, written into the copy


@dataclass
class StepResult:
    """What a run, an emit or a command did. `status` is the run's or the emit's (ok,
    failed...), or for a command ok/failed by its exit code; `records` are the transcript's
    records (dicts, as written); `notes` the notifications the run gave (user.notify...)."""

    kind: str
    status: str
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = 0
    output: str = ""
    notes: list[str] = field(default_factory=list)
    transcript: Path | None = None
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "broken", "duplicate")


class ChainProject:
    """A copy of the project at `source` in `workdir`, with `tools` faked (event name → a
    fake's answers, as in a test file) and every model tier answered by `models` (a rules
    file, or `{"rules": [...]}`; None: the project's own configuration)."""

    def __init__(self, source: str | os.PathLike[str], workdir: str | os.PathLike[str],
                 tools: dict[str, Any] | None = None, models: Any = None, now: str | None = None) -> None:
        source_dir = Path(source).resolve()
        if not source_dir.is_dir():
            raise ValueError(f"{source}: not a directory (the project to test)")
        self.source = source_dir
        self.root = Path(workdir) / source_dir.name
        shutil.copytree(source_dir, self.root, ignore=_leave_out(self.root), symlinks=True)
        self.now = now
        self.fakes = ToolFakes(tools or {})
        self._registry: Registry | None = None
        self._decider: Any = None
        self._models = models
        if models is not None:
            self._decider = self._scripted_decider(models)

    def home(self, path: str) -> str:
        """A path in the copy as the user's file it was copied from (relative to the working
        directory when under it): what a failure should point at. Others are left as they are."""
        try:
            inside = Path(path).resolve().relative_to(self.root.resolve())
        except (ValueError, OSError):
            return path
        user = self.source / inside
        try:
            return str(user.relative_to(Path.cwd()))
        except ValueError:
            return str(user)

    def problems(self, diagnostics: Any) -> str:
        """The errors of a chain that did not check, each at the user's file, with its hint."""
        return "; ".join(f"{self.home(d.file)}:{d.line}:{d.column}: {d.rule} {d.message}"
                         + (f" ({d.hint})" if d.hint else "") for d in diagnostics if d.severity == "error")

    # -- what a test does --------------------------------------------------------------

    def run(self, chain: str, inputs: dict[str, Any] | None = None, *, thread: str | None = None,
            now: str | None = None) -> StepResult:
        """Run the chain file `chain` (relative to the project) to its end, or to its first wait
        (§15: a test never waits; the run ends as `waiting`, and a later `resume:` step goes on).
        In an async test, `await project.run_async(...)` instead."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.run_async(chain, inputs, thread=thread, now=now), name="ChainProject.run")

    async def run_async(self, chain: str, inputs: dict[str, Any] | None = None, *, thread: str | None = None,
                        now: str | None = None) -> StepResult:
        """`run`, on the test's own event loop (an async test: `await project.run_async(...)`)."""
        from chainlang.engine.entry import run_async

        path = self._inside(chain)
        notes: list[str] = []
        result = await run_async(path, inputs or {}, now=now or self.now, registry=self.registry,
                                 decider=self._decider, notify=notes.append, thread=thread, detach=True)
        return self._ended(result, notes)

    def resume(self, transcript: str | os.PathLike[str]) -> StepResult:
        """Continue a run that ended waiting (or was interrupted), again to its end or next wait."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.resume_async(transcript), name="ChainProject.resume")

    async def resume_async(self, transcript: str | os.PathLike[str]) -> StepResult:
        """`resume`, on the test's own event loop."""
        from chainlang.engine.entry import resume_async

        notes: list[str] = []
        result = await resume_async(transcript, registry=self.registry, decider=self._decider,
                                    notify=notes.append, detach=True)
        return self._ended(result, notes)

    def _ended(self, result: Any, notes: list[str]) -> StepResult:
        error = result.error.get("message") if isinstance(result.error, dict) else None
        if result.status == "invalid":
            error = self.problems(result.diagnostics)
        return StepResult("run", result.status, dict(result.outputs), error, _records(result.transcript),
                          notes=notes, transcript=result.transcript, run_id=result.run_id)

    def emit(self, event: str, data: Any = None, *, id: str | None = None, now: str | None = None) -> StepResult:
        """Fire the external event `event` with `data`: the project's hooks run."""
        from chainlang.runtime.calls import run_loop

        return run_loop(self.emit_async(event, data, id=id, now=now), name="ChainProject.emit")

    async def emit_async(self, event: str, data: Any = None, *, id: str | None = None,
                         now: str | None = None) -> StepResult:
        """`emit`, on the test's own event loop."""
        from chainlang.engine.entry import emit_async

        notes: list[str] = []
        result = await emit_async(event, {} if data is None else data, id=id, project=self.root,
                                  registry=self.registry, now=now or self.now, decider=self._decider,
                                  notify=notes.append)
        error = None
        if result.errors:
            error = "; ".join(result.errors)
        elif result.diagnostics:
            error = self.problems(result.diagnostics)
        elif isinstance(result.error, dict):
            hooks = [f"{f.get('hook')}: {f['error'].get('message')}" for f in result.fired
                     if isinstance(f.get("error"), dict)]
            error = "; ".join([str(result.error.get("message"))] + hooks)
        return StepResult("emit", result.status, error=error, records=_records(result.transcript),
                          fired=list(result.fired), notes=notes, transcript=result.transcript, run_id=result.run_id)

    def command(self, line: str) -> StepResult:
        """Give a chainlang command (`threads list`, `tasks list --json`...) in the project;
        its output is stdout and stderr together."""
        from click.testing import CliRunner

        from chainlang.cli.main import main

        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise ValueError(f"command: {line!r}: {exc}") from None
        if argv[:1] == ["chainlang"]:
            argv = argv[1:]
        if not argv:
            raise ValueError("command: empty; write a chainlang command such as `threads list`")
        from chainlang.testing.spec import _check_command

        _check_command(line, ValueError)
        for arg in argv[1:]:
            self._confined(arg)
        from chainlang.cli import run as cli_run

        here, stay = os.getcwd(), cli_run.IN_PROCESS
        os.chdir(self.root)
        cli_run.IN_PROCESS = True  # the command runs inside the test: it must not exit the test's process
        try:
            outcome = CliRunner().invoke(main, argv, catch_exceptions=True)
        finally:
            cli_run.IN_PROCESS = stay
            os.chdir(here)
        if outcome.exception is not None and not isinstance(outcome.exception, SystemExit):
            raise outcome.exception
        status = "ok" if outcome.exit_code == 0 else "failed"
        return StepResult("command", status, exit_code=outcome.exit_code, output=outcome.output)

    def calls(self, event: str) -> list[dict[str, Any]]:
        """The params of each call the fake of `event` got, in order."""
        return self.fakes.calls(event)

    def path(self, relative: str) -> Path:
        """A file of the copy (for reading what the tools wrote)."""
        return self._inside(relative)

    def close(self) -> None:
        """Close the scripted models (nothing else is held between steps). The fixture does it
        at the test's end; an async test that wants it sooner awaits `aclose()`."""
        if self._decider is not None:
            from chainlang.runtime.calls import run_loop

            run_loop(self.aclose(), name="ChainProject.close", awaited="ChainProject.aclose")

    async def aclose(self) -> None:
        """`close`, on the test's own event loop."""
        decider, self._decider = self._decider, None
        if decider is not None:
            from chainlang.runtime.decide import close_decider

            await close_decider(decider)

    # -- the parts ------------------------------------------------------------------------

    @property
    def registry(self) -> "Registry":
        """The project's events (built once), with the fakes in place of their tools."""
        if self._registry is None:
            from chainlang.pipeline import default_registry

            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                registry = default_registry((), self.root)
            self._registry = self.fakes.install(registry)
        return self._registry

    def _confined(self, arg: str) -> None:
        """A command's argument that names a path (or an option's `--name=PATH`) stays in the
        copy: not absolute, not leading out with `..`, not through a link that points out."""
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if value.startswith("-") or not value:
            return
        if value.startswith(("/", "~")):
            raise ValueError(f"command: {arg}: an absolute path; a test's command names files of the project, "
                             "relative to it")
        candidate = self.root / value
        if ".." in Path(value).parts or os.path.lexists(candidate):
            try:
                self._inside(value)
            except ValueError:
                raise ValueError(f"command: {arg}: outside the project (with .., or through a link that points "
                                 "out); a test's command names files of the project") from None
            except OSError:
                return  # not a path the file system takes: the command says what it is

    def _inside(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"{relative}: outside the project ({self.source}); name a file of the project")
        return path

    def _scripted_decider(self, models: Any) -> Any:
        """The decider (and model tiers) of the project with every tier answered by `models`."""
        from chainlang.config.model import DecideConfig, ModelsConfig, ModelTierConfig
        from chainlang.config.project import ProjectConfig, find_project_config
        from chainlang.runtime.decide import decider_from_config

        answers = self.root / _ANSWERS
        answers.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(models, (str, os.PathLike)):
            shutil.copyfile(models, answers)
        else:
            answers.write_text(json.dumps({"rules": models["rules"]}, ensure_ascii=False), encoding="utf-8")
        config = find_project_config(self.root)
        if config is None or config.root.resolve() != self.root.resolve():
            config = ProjectConfig(path=self.root / "chainlang.toml")
        tier = ModelTierConfig(provider="scripted", rules=_ANSWERS)
        memory = config.models.memory if config.models is not None else "embedded"
        fallback = config.decide.fallback if config.decide is not None else "fail"
        scripted = dataclasses.replace(config, models=ModelsConfig(heavy=tier, fast=tier, light=tier, memory=memory),
                                       decide=DecideConfig(fallback=fallback))
        return decider_from_config(scripted)


def _leave_out(target: Path) -> Any:
    """The ignore function of the copy: the project's state, and the copy itself when it is
    made inside the project (a temporary directory under it would be copied into itself)."""
    inside = target.resolve()

    def ignore(directory: str, names: list[str]) -> set[str]:
        left = set(_LEAVE_OUT(directory, names))
        here = Path(directory).resolve()
        if inside.is_relative_to(here) and inside != here:
            left.add(inside.relative_to(here).parts[0])
        return left

    return ignore


def _records(transcript: Path | None) -> list[dict[str, Any]]:
    if transcript is None or not transcript.is_file():
        return []
    records = []
    for line in transcript.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line: the run was interrupted
        if isinstance(record, dict):
            records.append(record)
    return records
