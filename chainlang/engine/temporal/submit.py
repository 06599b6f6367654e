"""`chainlang run` on the Temporal engine: submit the run as a workflow (id = run id) and
follow it, writing its records to the transcript on this machine and showing them as the
embedded engine does, until it ends.

The chain was checked here first (an invalid chain is never submitted); the workers
compile their own copy of it and refuse one whose digest differs.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any, Callable

from chainlang.errors import UsageError
from chainlang.status import Outcome, is_outcome

if TYPE_CHECKING:
    from chainlang.config.engine import EngineConfig
    from chainlang.runtime.emit import EmitResult
    from chainlang.runtime.prepare import Prepared

__all__ = ["connect", "emit_ended", "follow", "follow_emit", "follow_run", "make_job", "outcome_of"]

POLL = 0.1  # seconds between two looks at a running workflow's new records
QUERY_WAIT = 1.0  # seconds a look at the run's records may take
WAIT_HINT = 5.0  # seconds without a record before saying that no worker seems to run the work
CONNECTED = False  # this process has a Temporal client: the CLI ends it with os._exit (see cli.main)


async def connect(engine: "EngineConfig") -> Any:
    """A client of the Temporal frontend of `engine`; UsageError when it cannot be reached."""
    from chainlang.runtime.engine import EngineUnavailable

    try:
        from temporalio.client import Client
    except ImportError:
        raise UsageError("[engine] kind = \"temporal\" needs the Temporal SDK: pip install 'chainlang[temporal]'") from None
    global CONNECTED
    CONNECTED = True  # from the first try: a failed connection has started the SDK's threads too
    try:
        return await Client.connect(engine.address, namespace=engine.namespace)
    except Exception as exc:  # the SDK raises RuntimeError with the transport's message
        raise EngineUnavailable(f"cannot reach Temporal at {engine.address} (namespace {engine.namespace}): "
                         f"{' '.join(str(exc).split())[:300]}; start it (temporal server start-dev) or fix "
                         "[engine] address in chainlang.toml") from None


def make_job(prepared: "Prepared", run_id: str, header: dict[str, Any], inputs: dict[str, Any],
             pinned: str | None, transcript: str | None = None) -> dict[str, Any]:
    """What the workflow is given: the chain (its path in the project and its digest, which the
    worker checks against its own copy), the inputs, the pinned clock, the transcript's header,
    and where this machine writes the transcript (the rows of the run's waits name it)."""
    try:
        path = prepared.path.resolve().relative_to(prepared.root.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{prepared.path}: outside the project ({prepared.root}); a chain the workers run "
                         "must be a file of the project") from None
    return {"run_id": run_id, "path": path, "digest": prepared.digest, "inputs": inputs, "now": pinned,
            "header": header, "transcript": transcript}


async def follow_run(prepared: "Prepared", run_id: str, header: dict[str, Any], inputs: dict[str, Any],
                     pinned: str | None, record: Callable[[Any], None], tell: Callable[[str], None],
                     transcript: str | None = None, detach: bool = False) -> tuple[dict[str, Any], float]:
    """Submit the run and follow it to its end: what the workflow returned, and how long it
    took (ms). Every record goes to `record` (the session's), every notification to `tell`.
    `detach` (run --detach): stop following at the run's first wait, whose record is then
    the last one here; the outcome is `waiting` (the workflow waits on Temporal)."""
    from chainlang.engine.temporal.workflow import CHAIN_WORKFLOW

    assert prepared.config is not None and prepared.config.engine is not None
    job = make_job(prepared, run_id, header, inputs, pinned, transcript)
    return await follow(prepared.config.engine, CHAIN_WORKFLOW, job, record, tell, detach=detach)


async def follow_emit(project: Any, run_id: str, header: dict[str, Any], pinned: str | None,
                      record: Callable[[Any], None], tell: Callable[[str], None],
                      task: tuple[str, str] | None = None, transcript: str | None = None) -> tuple[dict[str, Any], float]:
    """An emit on Temporal: the hooks fire in a workflow (id = the emit's run id) on the
    workers; its records go to `record` as it goes. What it returned, and its duration (ms).
    `task`: (task id, plan digest) of a scheduled task's firing (serve), whose action the
    workers fire."""
    from chainlang.engine.temporal.workflow import EMIT_WORKFLOW

    assert project.config is not None and project.config.engine is not None
    job = {"run_id": run_id, "digest": project.digest, "now": pinned, "header": header, "transcript": transcript}
    if task is not None:
        job["task"], job["task_digest"] = task
    return await follow(project.config.engine, EMIT_WORKFLOW, job, record, tell)


async def emit_ended(project: Any, run_id: str, event: str, where: Any) -> "EmitResult":
    """How the emit (or task firing) `run_id` ended on the workers, waiting for its end: for a
    process taking up one whose process died after it was handed over (running it again
    would run its steps twice). Its transcript keeps what was written before the stop."""
    from chainlang.runtime.admission import run_secrets
    from chainlang.runtime.emit import EmitResult

    assert project.config is not None and project.config.engine is not None
    outcome = await outcome_of(project.config.engine, run_id) or {
        "status": "failed", "error": {"type": "temporal", "message": f"no workflow {run_id} on Temporal"}}
    redactor = run_secrets(project.config)
    said, error = outcome.get("status"), outcome.get("error")
    status: "Outcome" = said if is_outcome(said) else "failed"
    if status != said:  # not from this version's workflow: kept in the error, not lost
        error = error or {"type": "temporal", "message": f"the workflow ended {said!r}"}
    return EmitResult(run_id, event, status, redactor.redact(list(outcome.get("fired") or [])), redactor.redact(error),
                      where)


async def outcome_of(engine: "EngineConfig", run_id: str) -> dict[str, Any] | None:
    """How the workflow of `run_id` ended, waiting for it (a serve taking up the emit or task
    firing of a process that died: the run went on on the workers); None when there is no
    such workflow (the process died before it started it)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError

    client = await connect(engine)
    handle = client.get_workflow_handle(run_id)
    try:
        await handle.describe()
    except RPCError:
        return None
    try:
        return dict(json.loads(await handle.result()))
    except WorkflowFailureError as exc:
        return {"status": "failed", "error": {"type": "temporal", "message": str(exc.cause or exc)}}


async def follow(engine: "EngineConfig", workflow_name: str, job: dict[str, Any], record: Callable[[Any], None],
                 tell: Callable[[str], None], detach: bool = False) -> tuple[dict[str, Any], float]:
    """Start the workflow (id = the job's run id) and follow it to its end: what it returned,
    and how long it took (ms). Its records go to `record`, notes to `tell`. `detach`: stop at
    its first `wait_started` (the outcome is `waiting`, its error what the run waits for)."""
    from temporalio.client import WorkflowFailureError

    from chainlang.journal.records import decode

    client = await connect(engine)
    start = time.perf_counter()
    handle = await _start_once(client, engine, workflow_name, job)

    def put(data: dict[str, Any]) -> None:
        record(decode(data))

    def waiting() -> None:  # nothing has run it yet: most likely no worker polls its queue
        tell(f"waiting for a worker on the task queue {engine.task_queue!r} of {engine.address} "
             "(start one in the project with: chainlang worker)")

    reader = _Reader(client, put, tell, stop_at_wait=detach)
    try:
        outcome = await reader.follow(handle, waiting, top=True)
    except _Detached as stopped:
        outcome = {"status": "waiting", "outputs": {}, "error": waiting_error(stopped.wait), "detached": True}
    except WorkflowFailureError as exc:
        raise UsageError(f"the run {job['run_id']} failed on Temporal: {exc.cause or exc}") from None
    return outcome, (time.perf_counter() - start) * 1000


class _Detached(Exception):
    """The run recorded a wait and the submitter (run --detach) stops following it."""

    def __init__(self, wait: dict[str, Any]) -> None:
        super().__init__(wait.get("step"))
        self.wait = wait


def waiting_error(wait: dict[str, Any]) -> dict[str, Any]:
    """The error of a run on Temporal that `run --detach` left at its wait (`wait` the
    wait_started record): as the embedded engine's (runtime/host.drive), saying where the run
    goes on."""
    error = {"type": "waiting",
             "message": f"the run waits at step {wait.get('step')} for {wait.get('event')}; its workflow goes on on "
                        "the workers when the event comes or its deadline passes (workflow id = run id)",
             "step": wait.get("step"), "event": wait.get("event"), "deadline": wait.get("deadline")}
    if wait.get("question") is not None:
        error["question"] = wait["question"]
    return error


async def _start_once(client: Any, engine: "EngineConfig", workflow_name: str, job: dict[str, Any]) -> Any:
    """Start the job's workflow, once per id ever: when it was started already (a serve that
    died after starting an emit or a task's firing, before any of its records reached the
    transcript, and the next serve firing it again), the handle of that one, running or
    ended, whose records are then read from the first: its steps never run twice."""
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    try:
        return await client.start_workflow(
            workflow_name, json.dumps(job, ensure_ascii=False), id=job["run_id"], task_queue=engine.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    except WorkflowAlreadyStartedError:  # it ended already
        return client.get_workflow_handle(job["run_id"])


class _Reader:
    """Reads a workflow's records as it goes, with its progress query, and those of the child
    workflows of its sub-chains where the parent marked them ({"child": ID})."""

    def __init__(self, client: Any, put: Callable[[dict[str, Any]], None], tell: Callable[[str], None],
                 stop_at_wait: bool = False) -> None:
        self.client = client
        self.put = put
        self.tell = tell
        self.stop_at_wait = stop_at_wait

    async def follow(self, handle: Any, waiting: Callable[[], None] | None = None, top: bool = False) -> dict[str, Any]:
        """Follow `handle` to its end and return what it returned. A child that failed (it was
        cancelled: its step's timeout) ends with what it recorded; the run's failure raises."""
        from temporalio.client import WorkflowFailureError
        from temporalio.service import RPCError

        start = time.perf_counter()
        done = asyncio.ensure_future(handle.result())
        seen = 0

        async def take() -> None:
            nonlocal seen
            try:  # bounded: a query waits for a worker, and there may be none yet
                new = json.loads(await asyncio.wait_for(handle.query("progress", seen), timeout=QUERY_WAIT))
            except Exception:
                return  # no worker has picked the run up yet: look again
            for data in new:
                seen += 1
                if "note" in data:
                    self.tell(data["note"])
                elif "child" in data:  # a sub-chain's records, in their place
                    await self.follow(self.client.get_workflow_handle(data["child"]))
                else:
                    self.put(data)
                    if self.stop_at_wait and data.get("type") == "wait_started":
                        raise _Detached(data)

        try:
            while not done.done():
                await asyncio.wait({done}, timeout=POLL)
                await take()
                if not seen and waiting is not None and time.perf_counter() - start > WAIT_HINT:
                    waiting()
                    waiting = None
            try:
                outcome: dict[str, Any] = json.loads(done.result())
            except (WorkflowFailureError, RPCError):
                if top:
                    raise
                outcome = {}  # a child cancelled with its step: what it recorded is all there is
            for _ in range(50):  # the records written after the last look
                before = seen
                await take()
                if seen == before and seen >= outcome.get("records", 0):
                    break
                await asyncio.sleep(POLL)
            if seen < outcome.get("records", 0):  # said, not hidden: the transcript here lacks the end
                self.tell(f"only {seen} of the {outcome['records']} records of workflow {handle.id} reached "
                          f"this transcript (no worker answered for the rest); the whole run is in Temporal's "
                          f"history of that workflow")
        finally:
            if not done.done():
                done.cancel()
        return outcome
