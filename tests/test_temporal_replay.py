"""Runs' workflow histories, recorded on Temporal (tests/fixtures/temporal/*history.json, by
`python -m tests.temporal_record`), replay on the interpreter as it is now: a change to
the walker that would make a worker take a different path through a run already under way
(and so break it, on a worker upgraded in the middle of the run) fails here. No server is
needed: the SDK's Replayer runs the workflow code against the recorded events.

subchain-inline.history.json was recorded before sub-chains became child workflows: a run
under way then still replays (Temporal's patch marker, chainlang.engine.temporal.children)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "temporal"
# history file → the run id it was recorded with
HISTORIES = {
    "history.json": "20261119T090000Z-replay0001",
    "subchain-inline.history.json": "20261126T090000Z-replay0002",
    "subchain-child.history.json": "20261126T090000Z-replay0003",
}

temporalio = pytest.importorskip("temporalio", reason="the Temporal SDK is not installed (pip install 'chainlang[temporal]')")


def replay(project: Path, name: str = "history.json") -> None:
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    from chainlang.engine.temporal.activities import WorkerProject, use_project
    from chainlang.engine.temporal.children import SubchainWorkflow
    from chainlang.engine.temporal.workflow import ChainWorkflow
    from chainlang.pipeline import default_registry

    use_project(WorkerProject(project, default_registry((), project)))
    history = WorkflowHistory.from_json(HISTORIES[name], (FIXTURE / name).read_text(encoding="utf-8"))
    replayer = Replayer(workflows=[ChainWorkflow, SubchainWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    asyncio.run(replayer.replay_workflow(history))


def copy_fixture(tmp_path: Path) -> Path:
    project = tmp_path / "temporal"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns(".chainlang"))
    (project / "chainlang.toml").write_text(
        (FIXTURE / "chainlang.toml").read_text(encoding="utf-8").replace(
            "../../run/run_tools.py", str(FIXTURE.parent.parent / "run" / "run_tools.py")), encoding="utf-8")
    return project


@pytest.mark.parametrize("name", list(HISTORIES))
def test_the_recorded_run_replays(tmp_path: Path, name: str) -> None:
    replay(copy_fixture(tmp_path), name)


def test_without_the_patch_a_run_from_before_child_workflows_would_not_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The patch marker is what keeps the inline history replaying: a worker that made its
    sub-chains children without asking would break the runs under way at its upgrade."""
    from temporalio import workflow
    from temporalio.workflow import NondeterminismError

    monkeypatch.setattr(workflow, "patched", lambda patch_id: True)
    with pytest.raises(NondeterminismError):
        replay(copy_fixture(tmp_path), "subchain-inline.history.json")


def test_a_run_whose_chain_changed_does_not_replay(tmp_path: Path) -> None:
    from temporalio.workflow import NondeterminismError

    project = copy_fixture(tmp_path)
    chain = project / "replayed.chain.yaml"
    chain.write_text(chain.read_text(encoding="utf-8").replace("succeed_on: 2", "succeed_on: 1"), encoding="utf-8")
    with pytest.raises(NondeterminismError):
        replay(project)
