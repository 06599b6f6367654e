"""Errors and outcomes as types (issue 22, item 3): the leaf modules `chainlang.errors` and
`chainlang.status`, the one rule of what `retry` tries again, and that every error type
chainlang writes is a declared one."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, get_args

import pytest

import chainlang
from chainlang import errors, status
from chainlang.errors import ConfigError, RegistryError, RunInUse, UsageError
from chainlang.journal.lock import RunLock
from chainlang.runtime.outcomes import error_of
from chainlang.runtime.step import StepPipeline

from tests.journal_util import cut_after, read_records
from tests.test_run import NOW, TOOLS

PACKAGE = Path(chainlang.__file__).parent


def _chainlang_imports(module: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "chainlang":
            found.append(node.module or "")
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "chainlang"]
    return found


@pytest.mark.parametrize("leaf", ["errors.py", "status.py"])
def test_the_leaf_modules_import_nothing_from_chainlang(leaf: str) -> None:
    """Every layer imports them downward: they must not import any layer back."""
    assert _chainlang_imports(PACKAGE / leaf) == []


def test_the_cross_layer_errors_are_the_leaf_s_wherever_they_are_imported_from() -> None:
    from chainlang import pipeline
    from chainlang.journal import lock
    from chainlang.registry import errors as registry_errors

    assert pipeline.UsageError is UsageError  # public API: chainlang.pipeline.UsageError
    assert lock.RunInUse is RunInUse
    assert registry_errors.ConfigError is ConfigError and registry_errors.RegistryError is RegistryError
    assert issubclass(registry_errors.ToolLoadError, RegistryError)
    assert issubclass(registry_errors.ImplementationError, RegistryError)


def test_a_transcript_in_use_is_a_usage_error_with_its_holder(tmp_path: Path) -> None:
    """The lock's own error is caught by name (`except RunInUse`, or as any UsageError: exit
    2), so nobody needs to re-wrap it or test the wording of its message."""
    path = tmp_path / "run.jsonl"
    with RunLock.acquire(path):
        with pytest.raises(UsageError) as info:
            RunLock.acquire(path)
    assert isinstance(info.value, RunInUse)
    assert info.value.pid is not None and info.value.transcript == str(path)
    assert str(info.value).startswith(f"{path}: the run is in use by process {info.value.pid} ")


# -- one rule of what is retried


CHAIN = """
steps:
  - test.echo: {value: 7}
    retry: {attempts: 2}
outputs: {value: "{test.echo.result}"}
"""


def _attempts(records: list[dict[str, Any]]) -> list[int]:
    return [r["attempt"] for r in records if r["type"] == "step_started"]


@pytest.mark.parametrize("kind", sorted(status.ERROR_TYPES))
def test_a_resumed_run_retries_exactly_what_a_live_run_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               kind: str) -> None:
    """Live: the first attempt of a step with `retry` fails with an error of type `kind`
    (injected at the pipeline's execute stage, the seam every engine's steps go through).
    Resumed: the same run cut right after that failed attempt, as a Ctrl-C in the wait
    before the next attempt leaves it. Both go on to attempt 2, or neither does."""
    chain = tmp_path / "t.chain.yaml"
    chain.write_text(CHAIN, encoding="utf-8")
    transcript = tmp_path / "run.jsonl"
    execute = StepPipeline.execute

    async def first_attempt_fails(self: StepPipeline, node: Any, rt: Any, scope: Any, ipath: str,
                                  params: dict[str, Any], attempt: int, start: float) -> Any:
        if attempt == 1:
            return None, error_of(kind, f"attempt 1 failed with {kind}")  # type: ignore[arg-type]
        return await execute(self, node, rt, scope, ipath, params, attempt, start)

    with monkeypatch.context() as patch:
        patch.setattr(StepPipeline, "execute", first_attempt_fails)
        live = chainlang.run(chain, tools=[TOOLS], now=NOW, transcript=transcript)
    live_retried = _attempts(read_records(transcript)) == [1, 2]

    cut_after(transcript, lambda r: r["type"] == "step_finished")
    before = len(read_records(transcript))
    resumed = chainlang.resume(transcript, tools=[TOOLS])
    resumed_retried = _attempts(read_records(transcript)[before:]) == [2]

    assert live_retried == resumed_retried == status.retryable({"type": kind}), (live_retried, resumed_retried)
    assert live.status == resumed.status == ("ok" if live_retried else "failed")
    if not live_retried:
        assert live.error is not None and live.error["type"] == kind
        assert resumed.error is not None and resumed.error["type"] == kind


def test_what_is_retried_is_what_the_reference_says() -> None:
    """docs/reference/execution.md, Retry: a tool's exception, a timeout, a result that is
    not JSON or not of its schema; nothing else."""
    assert status.RETRIED == {"tool_error", "timeout", "result"}
    assert not status.retryable(None) and not status.retryable({"message": "no type"})
    assert all(status.retryable({"type": kind}) == (kind in status.RETRIED) for kind in status.ERROR_TYPES)


# -- every status and error type written is declared


def test_the_constants_and_the_literal_types_agree() -> None:
    statuses = set(get_args(status.Outcome)) | status.STEP_STATUSES | status.HOOK_STATUSES
    assert status.RUN_STATUSES < set(get_args(status.Outcome))
    constants = {name: value for name, value in vars(status).items() if name.isupper() and isinstance(value, str)}
    for name, value in constants.items():
        assert value in statuses | status.ERROR_TYPES, name
        assert name == value.upper(), name  # OK == "ok", TOOL_ERROR == "tool_error": one spelling
    assert set(constants.values()) == statuses | status.ERROR_TYPES  # a constant for each
    assert set(status.EXIT_CODES) == set(get_args(status.Outcome))


def _written_error_types() -> dict[str, list[str]]:
    """Each error `type` chainlang's source writes, with where: the first argument of
    `error_of(...)`, and the `type` of a dict literal that has a `message` (an error object);
    a name stands for the constant of chainlang.status it names."""
    found: dict[str, list[str]] = {}

    def value(node: ast.expr, where: str) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if not isinstance(getattr(status, name, None), str):
                return  # a variable (a kind passed on): its values are written elsewhere
            text = getattr(status, name)
        else:
            return
        found.setdefault(text, []).append(where)

    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == "error_of":
                    value(node.args[0], where)
            elif isinstance(node, ast.Dict):
                keys = {k.value: v for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if "type" in keys and "message" in keys:
                    value(keys["type"], where)
    return found


def test_every_error_type_the_source_writes_is_declared_and_every_declared_one_is_written() -> None:
    written = _written_error_types()
    undeclared = {kind: places for kind, places in written.items() if kind not in status.ERROR_TYPES}
    assert not undeclared, f"add these to chainlang.status.ErrorType (and the docs): {undeclared}"
    assert set(written) == status.ERROR_TYPES, f"declared, never written: {status.ERROR_TYPES - set(written)}"

