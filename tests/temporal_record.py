"""Record the workflow history that tests/test_temporal_replay.py replays: run
tests/fixtures/temporal/replayed.chain.yaml on a Temporal dev server and a worker in this
process, then write its history to tests/fixtures/temporal/history.json.

    python -m tests.temporal_record

Re-record after a deliberate change of what a run does (the replay test then says which
change broke the replay of runs recorded before it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "temporal"
RUN_ID = "20261119T090000Z-replay0001"


async def record() -> None:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from chainlang.engine.temporal.activities import WorkerProject, run_tool, use_project
    from chainlang.engine.temporal.workflow import CHAIN_WORKFLOW, ChainWorkflow
    from chainlang.pipeline import default_registry
    from chainlang.runtime.prepare import prepare

    use_project(WorkerProject(FIXTURE, default_registry((), FIXTURE)))
    prepared = prepare(FIXTURE / "replayed.chain.yaml")
    now = "2026-11-19T09:00:00+00:00"
    header = {"chain": "replay.sample", "file": "replayed.chain.yaml", "file_sha256": prepared.digest, "inputs": {},
              "now": now, "started_at": now, "tools": [], "resumed": False}
    job = {"run_id": RUN_ID, "path": "replayed.chain.yaml", "digest": prepared.digest, "inputs": {}, "now": now,
           "header": header}
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
                                                ip="127.0.0.1")
    try:
        async with Worker(env.client, task_queue="replay", workflows=[ChainWorkflow], activities=[run_tool],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            handle = await env.client.start_workflow(CHAIN_WORKFLOW, json.dumps(job), id=RUN_ID, task_queue="replay")
            result = json.loads(await handle.result())
            assert result["status"] == "ok", result
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    (FIXTURE / "history.json").write_text(history.to_json() + "\n", encoding="utf-8")
    print(f"recorded {len(history.events)} events: {FIXTURE / 'history.json'}")


if __name__ == "__main__":
    asyncio.run(record())
