"""Record a workflow history that tests/test_temporal_replay.py replays: run a chain of
tests/fixtures/temporal (replayed.chain.yaml by default) on a Temporal dev server and a
worker in this process, then write its history there (history.json by default).

    python -m tests.temporal_record [CHAIN HISTORY RUN_ID]

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


async def record(chain: str, out: str, run_id: str) -> None:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from chainlang.engine.temporal.activities import WorkerProject, run_tool, use_project
    from chainlang.engine.temporal.workflow import CHAIN_WORKFLOW, ChainWorkflow
    from chainlang.pipeline import default_registry
    from chainlang.runtime.prepare import prepare

    workflows: list[type] = [ChainWorkflow]
    try:  # sub-chains as child workflows (since 2026-11-26); absent from an older checkout
        from chainlang.engine.temporal.children import SubchainWorkflow

        workflows.append(SubchainWorkflow)
    except ImportError:
        pass

    use_project(WorkerProject(FIXTURE, default_registry((), FIXTURE)))
    prepared = prepare(FIXTURE / chain)
    now = "2026-11-19T09:00:00+00:00"
    header = {"chain": prepared.graph.name if prepared.graph else None, "file": chain, "file_sha256": prepared.digest,
              "inputs": {}, "now": now, "started_at": now, "tools": [], "resumed": False}
    job = {"run_id": run_id, "path": chain, "digest": prepared.digest, "inputs": {}, "now": now,
           "header": header}
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
                                                ip="127.0.0.1")
    try:
        async with Worker(env.client, task_queue="replay", workflows=workflows, activities=[run_tool],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            handle = await env.client.start_workflow(CHAIN_WORKFLOW, json.dumps(job), id=run_id, task_queue="replay")
            result = json.loads(await handle.result())
            assert result["status"] == "ok", result
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    (FIXTURE / out).write_text(history.to_json() + "\n", encoding="utf-8")
    print(f"recorded {len(history.events)} events: {FIXTURE / out}")


if __name__ == "__main__":
    asyncio.run(record(*(sys.argv[1:4] if len(sys.argv) > 1 else ("replayed.chain.yaml", "history.json", RUN_ID))))
