"""A run's workflow history, recorded on Temporal (tests/fixtures/temporal/history.json, by
`python -m tests.temporal_record`), replays on the interpreter as it is now: a change to
the walker that would make a worker take a different path through a run already under way
(and so break it, on a worker upgraded in the middle of the run) fails here. No server is
needed: the SDK's Replayer runs the workflow code against the recorded events."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "temporal"
RUN_ID = "20261119T090000Z-replay0001"

temporalio = pytest.importorskip("temporalio", reason="the Temporal SDK is not installed (pip install 'chainlang[temporal]')")


def replay(project: Path) -> None:
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    from chainlang.engine.temporal.activities import WorkerProject, use_project
    from chainlang.engine.temporal.workflow import ChainWorkflow
    from chainlang.pipeline import default_registry

    use_project(WorkerProject(project, default_registry((), project)))
    history = WorkflowHistory.from_json(RUN_ID, (FIXTURE / "history.json").read_text(encoding="utf-8"))
    replayer = Replayer(workflows=[ChainWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    asyncio.run(replayer.replay_workflow(history))


def copy_fixture(tmp_path: Path) -> Path:
    project = tmp_path / "temporal"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns(".chainlang"))
    (project / "chainlang.toml").write_text(
        (FIXTURE / "chainlang.toml").read_text(encoding="utf-8").replace(
            "../../run/run_tools.py", str(FIXTURE.parent.parent / "run" / "run_tools.py")), encoding="utf-8")
    return project


def test_the_recorded_run_replays(tmp_path: Path) -> None:
    replay(copy_fixture(tmp_path))


def test_a_run_whose_chain_changed_does_not_replay(tmp_path: Path) -> None:
    from temporalio.workflow import NondeterminismError

    project = copy_fixture(tmp_path)
    chain = project / "replayed.chain.yaml"
    chain.write_text(chain.read_text(encoding="utf-8").replace("succeed_on: 2", "succeed_on: 1"), encoding="utf-8")
    with pytest.raises(NondeterminismError):
        replay(project)
