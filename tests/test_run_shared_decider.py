"""What a run no longer builds per run: the decider of a project without a model, shared by the
process (runtime/modelless.py) and built at its first decision, so that a run that decides
nothing never imports jsonschema; an emit's look for a store on the project's config it holds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chainlang.errors import UsageError
from chainlang.runtime.decide import DecideRequest, decider_from_config
from chainlang.runtime.deliver import waits_store
from chainlang.runtime.modelless import ModellessDecider, modelless_fallback, shared_modelless
from chainlang.runtime.runner import made_decider
from chainlang.store import open_store
from chainlang.tasks.stored import STORE_FILE

from tests.helpers import clean_env
from tests.test_wait_delivery import row


def config(decide: dict[str, Any] | None = None, models: Any = None) -> Any:
    """A ProjectConfig's shape, as far as the decider's choice reads it."""
    table = None
    if decide is not None:
        table = SimpleNamespace(**{"base_url": None, "model": None, "api_key_env": None, "fallback": "fail", **decide})
    return SimpleNamespace(decide=table, models=models, root=Path("."))


def test_a_project_without_a_model_shares_one_decider_per_fallback() -> None:
    assert made_decider(None) is made_decider(config()) is made_decider(config({}))
    skip = made_decider(config({"fallback": "skip"}))
    assert isinstance(skip, ModellessDecider) and skip.fallback == "skip"
    assert made_decider(config({"fallback": "skip"})) is skip and skip is not made_decider(None)
    assert not hasattr(skip, "aclose")  # nothing to close: a run leaves it open for the next


def test_a_model_or_a_half_configured_decide_goes_the_usual_way() -> None:
    assert modelless_fallback(config(models=SimpleNamespace())) is None  # a [models] table
    assert modelless_fallback(config({"base_url": "http://localhost:1/v1", "model": "m"})) is None
    assert modelless_fallback(config({"api_key_env": "KEY"})) is None
    with pytest.raises(UsageError, match="api_key_env but no base_url and model"):
        made_decider(config({"api_key_env": "KEY"}))  # decider_from_config's error, as before
    assert shared_modelless(config({"model": "m"})) is None


@pytest.mark.parametrize("fallback", ["fail", "skip", "break"])
def test_the_shared_decider_decides_as_the_one_built_per_run(fallback: str) -> None:
    request = DecideRequest(event="demo.step", description="", params_schema={"type": "object",
                            "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                            params={"n": "three"}, errors=["n: 'three' is not of type 'integer'"])

    async def decision(decider: Any) -> Any:
        try:
            return await decider.decide(request)
        except Exception as exc:  # DecisionNeeded with fallback fail
            return type(exc).__name__, str(exc), getattr(exc, "reasons", None)

    shared = asyncio.run(decision(ModellessDecider(fallback)))
    built = asyncio.run(decision(decider_from_config(config({"fallback": fallback}))))
    assert shared == built


def test_a_run_that_decides_nothing_imports_no_jsonschema(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "one.chain.yaml").write_text("chainlang: 1\nchain: t.one\nsteps:\n  - tools.now: {}\n",
                                             encoding="utf-8")
    code = textwrap.dedent("""
        import sys, chainlang
        result = chainlang.run("one.chain.yaml")
        print(result.status, "jsonschema" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "False"]


def test_an_emit_given_its_config_finds_no_store_or_the_one_there(tmp_path: Path) -> None:
    assert waits_store(tmp_path, None) is None  # no chainlang.toml, no store file: nothing waits
    assert not (tmp_path / STORE_FILE).exists()
    with open_store(tmp_path) as store:
        store.open_wait(row("r1", key="d-1"))
    found = waits_store(tmp_path, None)
    assert found is not None and found is waits_store(tmp_path)
