"""Running one test of a chaintest file: a fresh copy of the project, its steps in order
(each checked against its `expect` before the next runs), the names of earlier steps
resolved in later ones: "{NAME.outputs.KEY}", "{NAME.thread}", "{NAME.run_id}"."""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from chainlang.testing.expect import check_expectations
from chainlang.testing.project import ChainProject, StepResult
from chainlang.testing.spec import Step, TestCase, TestFile

__all__ = ["CaseFailed", "run_case"]

_REFERENCE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\.(outputs\.[A-Za-z_][A-Za-z0-9_]*|thread|run_id|output)\}")


@dataclass
class CaseFailed(Exception):
    """A step did not do what the test expects (or could not be done)."""

    step: Step
    problems: list[str]
    kept: Path | None = None  # the project's copy, kept for a look

    def __str__(self) -> str:
        lines = [f"step {self.step.shown}:"] + ["  " + p.replace("\n", "\n  ") for p in self.problems]
        if self.kept is not None:
            lines.append(f"(the project's copy is kept in {self.kept})")
        return "\n".join(lines)


def run_case(test_file: TestFile, case: TestCase, update: bool = False, *, workdir: Path | None = None,
             on_step: Callable[[int], None] | None = None) -> list[StepResult]:
    """Run the test's steps; raises CaseFailed at the first step that is not as expected.
    `workdir`: where the project is copied (default: a new temporary directory); `on_step`
    is told the index of each step as it begins."""
    workdir = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="chaintest-"))
    models = case.models
    if isinstance(models, str):
        models = test_file.path.parent / models
        if not models.is_file():
            raise CaseFailed(case.steps[0], [f"models: {case.models}: no such rules file (next to {test_file.path.name})"])
    try:
        project = ChainProject(test_file.project, workdir, tools=case.tools, models=models, now=case.now)
    except Exception as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise CaseFailed(case.steps[0], [f"cannot set the project up: {exc}"]) from None
    done: dict[str, StepResult] = {}
    results: list[StepResult] = []
    try:
        for index, step in enumerate(case.steps):
            if on_step is not None:
                on_step(index)
            try:
                result = _do(project, step, done)
            except (ValueError, LookupError) as exc:
                raise CaseFailed(step, [str(exc)]) from None
            except Exception as exc:  # a UsageError of the run (bad inputs, an unknown thread...)
                raise CaseFailed(step, [f"{type(exc).__name__}: {exc}" if type(exc).__name__ != "UsageError"
                                        else str(exc)]) from None
            expected = dataclasses.replace(step, expect=_resolve(step.expect, done))
            problems = check_expectations(expected, result, project, test_file.path, update)
            if problems:
                raise CaseFailed(step, problems, workdir)
            results.append(result)
            if step.name:
                done[step.name] = result
    except CaseFailed as failed:
        if failed.kept is None:
            failed.kept = workdir
        project.close()
        raise
    project.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return results


def _do(project: ChainProject, step: Step, done: dict[str, StepResult]) -> StepResult:
    if step.kind == "run":
        thread = _resolve(step.thread, done) if step.thread is not None else None
        return project.run(step.target, _resolve(step.inputs, done), thread=thread, now=step.now)
    if step.kind == "emit":
        return project.emit(step.target, _resolve(step.data, done), id=step.id, now=step.now)
    if step.kind == "resume":  # §15: a run that ended waiting goes on after its event (or its deadline)
        earlier = done.get(step.target)
        if earlier is None or earlier.kind != "run" or earlier.transcript is None:
            known = ", ".join(name for name, result in done.items() if result.kind == "run") or "none yet"
            raise LookupError(f"resume: {step.target}: not an earlier chain: or resume: step of this test "
                              f"(named runs so far: {known})")
        return project.resume(earlier.transcript)
    return project.command(str(_resolve(step.target, done, embedded=True)))


def _resolve(value: Any, done: dict[str, StepResult], embedded: bool = False) -> Any:
    """`value` with the references to earlier steps replaced: a string that is one
    reference becomes the value (any JSON); one inside a longer string, its text."""
    if isinstance(value, dict):
        return {k: _resolve(v, done) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, done) for v in value]
    if not isinstance(value, str) or "{" not in value:
        return value
    whole = _REFERENCE.fullmatch(value)
    if whole is not None and not embedded:
        return _lookup(whole.group(1), whole.group(2), done)
    return _REFERENCE.sub(lambda m: _text(_lookup(m.group(1), m.group(2), done)), value)


def _lookup(name: str, path: str, done: dict[str, StepResult]) -> Any:
    if name not in done:
        known = ", ".join(done) or "none yet"
        raise LookupError(f"{{{name}.{path}}}: no earlier step is named {name} (named so far: {known})")
    result = done[name]
    if path.startswith("outputs."):
        key = path.removeprefix("outputs.")
        if key not in result.outputs:
            raise LookupError(f"{{{name}.{path}}}: step {name} has no output {key} "
                              f"(it has {', '.join(result.outputs) or 'none'})")
        return result.outputs[key]
    if path == "thread":
        started = next((r for r in result.records if r.get("type") == "run_started"), {})
        if not started.get("thread"):
            raise LookupError(f"{{{name}.thread}}: step {name}'s run was not attached to a thread")
        return started["thread"]
    if path == "output":
        return result.output
    return result.run_id


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
