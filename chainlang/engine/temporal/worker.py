"""`chainlang worker`: a process that runs the project's chains for Temporal. Start as many
as you like, on any hosts that have the same copy of the project: each polls the task
queue of `[engine]` and runs workflows (the walker) and activities (the tools).

SIGTERM or Ctrl-C stops polling and lets the attempts under way finish (for up to
`DRAIN` seconds; those that do not are given to another worker by Temporal).

Each worker also sends again the `wait_delivered` signals that were lost (a wait settled in
the store whose run has not taken it: chainlang.engine.temporal.wake).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any, Callable

from chainlang.errors import UsageError

__all__ = ["DRAIN", "run_worker"]

DRAIN = 10.0


async def run_worker(root: Path, *, concurrency: int = 8, tools: tuple[str, ...] = (),
                     ready: Callable[[str], None] | None = None) -> None:
    """Serve the project at `root` until SIGTERM or SIGINT. `ready` is told when polling starts."""
    from datetime import timedelta

    from chainlang.config.engine_kind import engine_kind
    from chainlang.config.project import find_project_config
    from chainlang.engine.temporal.submit import connect
    from chainlang.pipeline import default_registry
    from chainlang.errors import RegistryError

    try:
        config = find_project_config(root)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    if config is None or config.engine is None or engine_kind(config) != "temporal":
        raise UsageError(f"{root}: no chainlang.toml with [engine] kind = \"temporal\" here or above; "
                         "a worker serves a project that runs on Temporal")
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from chainlang.engine.temporal.activities import WorkerProject, add_thread_event, read_threads, run_tool, use_project
    from chainlang.engine.temporal.models import ask_model
    from chainlang.engine.temporal.children import SubchainWorkflow
    from chainlang.engine.temporal.waits import WAIT_ACTIVITIES
    from chainlang.engine.temporal.wake import resend_settled
    from chainlang.engine.temporal.workflow import ChainWorkflow, EmitWorkflow

    from chainlang.llm.tiers import ModelTiers

    # what a workflow's first activation would import, imported now: an import of the store's
    # SQL library inside a workflow task can outlast Temporal's 2 s deadlock detector on a loaded
    # machine, which leaves the import half done and the worker unable to run any workflow
    import chainlang.runtime.host  # noqa: F401
    import chainlang.runtime.prepare  # noqa: F401
    import chainlang.runtime.walk  # noqa: F401
    import chainlang.store.store  # noqa: F401

    registry = default_registry(tools, config.root)
    try:
        tiers = ModelTiers.from_config(config)
    except RegistryError as exc:  # a ConfigError: a light tier named twice, unreadable scripted rules
        raise UsageError(str(exc)) from None
    fallback = config.decide.fallback if config.decide is not None else "fail"
    use_project(WorkerProject(config.root, registry, tiers, fallback, config))
    client = await connect(config.engine)
    worker = Worker(
        client, task_queue=config.engine.task_queue, workflows=[ChainWorkflow, EmitWorkflow, SubchainWorkflow],
        activities=[run_tool, ask_model, add_thread_event, read_threads, *WAIT_ACTIVITIES],
        # the walker is the workflow code: it runs on Temporal's deterministic loop, outside the
        # sandbox, which would re-import chainlang (and the project's tools) for every run
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=concurrency, graceful_shutdown_timeout=timedelta(seconds=DRAIN),
    )
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    running = asyncio.ensure_future(worker.run())
    # waits settled in the store whose signal was lost (the sender died after writing it): sent again
    sweep = asyncio.ensure_future(resend_settled(config.root, client))
    if ready is not None:
        ready(f"worker on {config.engine.address}, namespace {config.engine.namespace}, task queue "
              f"{config.engine.task_queue}, project {config.root}")
    stop = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({running, stop}, return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        await worker.shutdown()
    stop.cancel()
    sweep.cancel()
    await tiers.aclose()
    failed: Any = running.exception() if running.done() and not running.cancelled() else None
    if failed is not None:
        raise UsageError(f"the worker stopped: {failed}")
