"""The run host and the engine seam (chainlang.runtime.host, chainlang.runtime.engine):
every way a run, an emit or a firing ends is recorded the same way, by one host; the
engine of a project is chosen in one place, from its configuration."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from pathlib import Path

import pytest

import chainlang
from chainlang.errors import UsageError
from chainlang.runtime.emit import EmitResult
from chainlang.runtime.host import EXIT_CODES, limits_graph
from chainlang.runtime.runner import RunResult
from tests.hooks_util import write_tools

ROOT = Path(__file__).resolve().parent.parent
CHAINLANG = ROOT / "chainlang"

HOOKS = textwrap.dedent("""\
    events:
      mail.in:
        description: A message arrived.
        payload:
          type: object
          properties:
            sender: {type: string}
          required: [sender]
    hooks:
      - id: log-it
        trigger: post:mail.in
        action:
          - t.log: {label: "from {sender}"}
    """)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _project(tmp_path: Path) -> Path:
    write_tools(tmp_path)
    (tmp_path / "chainlang.toml").write_text('tools = ["hk_tools.py"]\n', encoding="utf-8")
    (tmp_path / "mail.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    (tmp_path / "hello.chain.yaml").write_text("steps:\n  - t.log: {label: hello}\n", encoding="utf-8")
    return tmp_path


def _bug(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug of the engine")


def test_an_emit_that_hits_a_bug_still_ends_its_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the run host, an emit that hit a bug of ours left a transcript without its
    run_finished (the embedded runner recorded one; the emit's firing had no such handler)."""
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.setattr("chainlang.runtime.hooks.fire_post", _bug)
    where = project / "emit.jsonl"
    with pytest.raises(RuntimeError, match="a bug of the engine"):
        chainlang.emit("mail.in", {"sender": "Ann"}, project=str(project), transcript=str(where))
    recs = _records(where)
    assert [r["type"] for r in recs] == ["run_started", "run_finished"]
    assert recs[-1]["status"] == "failed"
    assert recs[-1]["error"] == {"type": "internal", "message": "RuntimeError: a bug of the engine"}


def test_a_run_that_hits_a_bug_ends_its_transcript_the_same_way(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.setattr("chainlang.runtime.walk.ChainRun.execute", _bug)
    where = project / "run.jsonl"
    with pytest.raises(RuntimeError, match="a bug of the engine"):
        chainlang.run(str(project / "hello.chain.yaml"), transcript=str(where))
    recs = _records(where)
    assert [r["type"] for r in recs] == ["run_started", "run_finished"]
    assert recs[-1]["error"] == {"type": "internal", "message": "RuntimeError: a bug of the engine"}


def test_an_emit_ends_ok_through_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    result = chainlang.emit("mail.in", {"sender": "Ann"}, project=str(project))
    assert result.status == "ok" and result.exit_code == 0
    assert [f["hook"] for f in result.fired] == ["log-it"]
    finished = _records(result.transcript)[-1]
    assert finished["type"] == "run_finished" and finished["outputs"]["fired"][0]["status"] == "ok"


@pytest.mark.parametrize("status", sorted(EXIT_CODES) + ["unheard-of"])
def test_runs_and_emits_share_one_table_of_exit_codes(status: str) -> None:
    run = RunResult(None, status)
    emitted = EmitResult(None, "e", status)
    assert run.exit_code == emitted.exit_code == EXIT_CODES.get(status, 1)


def test_an_emit_s_hook_actions_run_under_the_default_limits() -> None:
    from chainlang.model.nodes import Limits

    graph = limits_graph(Path("/project"))
    defaults = Limits()
    assert (graph.max_steps, graph.max_depth, graph.max_parallel, graph.timeout) == \
        (defaults.max_steps, defaults.max_depth, defaults.max_parallel, defaults.timeout)


def test_the_engine_is_chosen_from_the_configuration(tmp_path: Path) -> None:
    from chainlang.config.project import find_project_config
    from chainlang.engine import engine_for
    from chainlang.runtime.embedded import EMBEDDED

    assert engine_for(None) is EMBEDDED
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    assert engine_for(find_project_config(tmp_path)) is EMBEDDED
    (tmp_path / "chainlang.toml").write_text('[engine]\nkind = "temporal"\naddress = "127.0.0.1:7999"\n',
                                             encoding="utf-8")
    temporal = engine_for(find_project_config(tmp_path))
    assert temporal.kind == "temporal" and temporal.decider(None) is None  # the workers decide


def test_the_runtime_alone_refuses_a_project_configured_for_temporal(tmp_path: Path) -> None:
    """Code that calls the runtime directly (not chainlang.run) must not run a Temporal
    project's chain here by mistake."""
    from chainlang.runtime.runner import run_async

    (tmp_path / "chainlang.toml").write_text('[engine]\nkind = "temporal"\n', encoding="utf-8")
    (tmp_path / "hello.chain.yaml").write_text("steps:\n  - user.notify: {message: hi}\n", encoding="utf-8")
    with pytest.raises(UsageError, match="temporal engine"):
        asyncio.run(run_async(tmp_path / "hello.chain.yaml"))
    assert not (tmp_path / ".chainlang" / "runs").exists() or not list((tmp_path / ".chainlang" / "runs").iterdir())


# -- the house: one place builds a run, one place reads [engine] kind --------------------------


def _sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in CHAINLANG.rglob("*.py")}


@pytest.mark.parametrize("construct", ["RunState(", "HookActions(", "ThreadLink("])
def test_a_run_s_state_is_built_in_one_place(construct: str) -> None:
    places = sorted(name for name, text in _sources().items()
                    if re.search(r"(?<![\w.])" + re.escape(construct), text) and not name.endswith(
                        ("runtime/state.py", "runtime/hooks.py", "runtime/threads.py")))
    allowed = {"chainlang/runtime/host.py"}
    if construct == "ThreadLink(":  # the worker's link to its store, to read thread values for a workflow
        allowed.add("chainlang/engine/temporal/threadrefs.py")
    assert set(places) <= allowed, places


def test_the_engine_kind_is_read_in_one_place() -> None:
    readers = sorted(name for name, text in _sources().items()
                     if re.search(r"engine\.kind\b|\.kind\s*[!=]=\s*\"temporal\"", text))
    assert readers == ["chainlang/config/engine_kind.py"], readers


def test_an_unreachable_temporal_is_told_apart_from_a_refusal(tmp_path: Path) -> None:
    """serve leaves an emit claimed (for its next recover) when Temporal cannot be reached,
    but marks it failed when the engine refuses it: the two must be told apart by type."""
    pytest.importorskip("temporalio")
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = textwrap.dedent(f"""\
        import asyncio, os
        from pathlib import Path
        from chainlang.config.engine import EngineConfig
        from chainlang.engine.temporal.engine import TemporalEngine
        from chainlang.runtime.engine import EngineUnavailable

        class Project:  # what TemporalEngine.ended reads of a loaded project
            config = type("Config", (), {{"engine": EngineConfig(kind="temporal", address="127.0.0.1:{port}")}})()
            root = Path(".")

        try:
            asyncio.run(TemporalEngine(Project.config.engine).ended(Project(), "run-1", "e", Path("t.jsonl")))
            print("no error")
        except EngineUnavailable as exc:
            print("unavailable:", str(exc)[:60])
        os._exit(0)  # the SDK's threads (temporalio/sdk-python#300)
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.startswith(f"unavailable: cannot reach Temporal at 127.0.0.1:{port}"), proc.stdout + proc.stderr
