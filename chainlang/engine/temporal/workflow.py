"""The chain workflow: the embedded engine's walker, run by Temporal (workflow id = run id).

The walker is deterministic given the results of its tools, so it runs as workflow code:
parallel groups are asyncio tasks on the workflow's loop, timeouts and waits are durable
timers, and each tool attempt is an activity (`activities.run_tool`). When a worker dies,
another one replays the workflow from its history: the finished attempts' results come
from the history and their tools are not called again.

The run's records are kept in the workflow (rebuilt the same on replay) and read by the
submitter with the `progress` query, which writes the transcript the embedded engine
would have written. The chain is compiled from the worker's copy of the project; its
digest must be the one submitted, so every worker runs the same chain.
"""

from __future__ import annotations

import asyncio
import functools
import json
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.exceptions import CancelledError as TemporalCancelled

from chainlang.durations import MAX_DURATION
from chainlang.engine.temporal.activities import HEARTBEAT_EVERY, THREAD_ACTIVITY, TOOL_ACTIVITY, current_project
from chainlang.engine.temporal.messages import WaitDelivery
from chainlang.engine.temporal.waits import SIGNAL, SignalBox
from chainlang.runtime.interceptors import StepInfo
from chainlang.runtime.threads import ThreadRecorder

if TYPE_CHECKING:
    from chainlang.engine.temporal.children import Children
    from chainlang.engine.temporal.threadrefs import Snapshot
    from chainlang.runtime.calls import Watch
    from chainlang.runtime.events import EventRuntime
    from chainlang.runtime.prepare import Prepared
    from chainlang.runtime.secret_guard import Exposures
    from chainlang.runtime.walk import ChainRun

__all__ = ["CHAIN_WORKFLOW", "EMIT_WORKFLOW", "ActivityExecutor", "ChainWorkflow", "EmitWorkflow", "exposures_of"]

CHAIN_WORKFLOW = "chainlang.chain"
EMIT_WORKFLOW = "chainlang.emit"
# a worker that stops heartbeating for this long is taken for dead: the attempt goes to another
HEARTBEAT_TIMEOUT = timedelta(seconds=HEARTBEAT_EVERY * 4)
ACTIVITY_BOUND = timedelta(seconds=MAX_DURATION, days=1)
# attempts of one tool call when workers die under it (the tool's own failures are not retried here)
WORKER_LOSS_ATTEMPTS = 5

_PREPARED: dict[tuple[str, str, str], "Prepared"] = {}


class WorkflowClock:
    """The run's clock in the workflow: pinned, or Temporal's (the same on every replay)."""

    def __init__(self, pinned: datetime | None) -> None:
        self.pinned = pinned

    def now(self) -> datetime:
        return self.pinned or workflow.now().astimezone(timezone.utc)


class ActivityExecutor:
    """The executor seam of the walker on Temporal: each tool attempt is an activity; named
    chains and chain.run run as child workflows where they can (`children`, see
    chainlang.engine.temporal.children), else in the workflow, as they run in the walker."""

    __slots__ = ("chain", "children", "exposures", "pinned")

    def __init__(self, chain: "ChainRun", pinned: str | None, children: "Children | None" = None) -> None:
        self.chain = chain
        self.pinned = pinned
        self.children = children
        self.exposures = exposures_of(chain)

    async def call(self, rt: "EventRuntime", params: dict[str, Any], ipath: str, attempt: int,
                   watch: "Watch") -> Any:
        from chainlang.engine.temporal.messages import ModelBudget, ToolCall, ToolOutcome, received, to_json
        from chainlang.journal.records import Clock, StepProgress, decode
        from chainlang.runtime.invoke import run_subchain
        from chainlang.runtime.outcomes import LimitExceeded, ToolFailed

        if rt.runs_chain:
            from chainlang.engine.temporal.children import as_child, run_child

            if self.children is not None and as_child(self.children, self.chain, rt):
                return await run_child(self.chain, self.children, rt, params, ipath, attempt)
            return await run_subchain(self.chain, rt, params, ipath, attempt)
        run = self.chain.run
        budget = run.models.budget if run.models is not None else None
        left = ModelBudget()
        if budget is not None:  # what the tool's own model calls may spend of the run's budget
            left = ModelBudget(None if budget.max_calls is None else budget.max_calls - budget.calls,
                               None if budget.max_tokens is None else budget.max_tokens - budget.tokens - budget.reserved)
        snapshot = _snapshot()
        call = ToolCall(run.run_id, self.chain.graph.name, ipath, rt.spec.name, attempt, to_json(params), self.pinned,
                        to_json(run.captured.get(ipath, {})), [list(group) for group in self.chain.allow], left,
                        snapshot.wanted() if snapshot is not None else None,
                        sorted(self.exposures.of(ipath)) if self.exposures is not None else [])
        try:
            out = received(ToolOutcome, await workflow.execute_activity(
                TOOL_ACTIVITY, call, result_type=ToolOutcome | str,  # type: ignore[arg-type]  # str: a run from before
                # never shorter than a step's longest timeout (a year, chainlang.durations): the heartbeat
                # notices a lost worker, the step's own timeout (a workflow timer) bounds the attempt
                start_to_close_timeout=ACTIVITY_BOUND, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=WORKER_LOSS_ATTEMPTS, initial_interval=timedelta(seconds=1)),
                summary=f"{ipath} {rt.spec.name}",
            ))
        except ActivityError as exc:
            if isinstance(exc.cause, TemporalCancelled):
                raise asyncio.CancelledError() from None  # the step's timeout, or the run stopping: as in the walker
            raise ToolFailed(f"the workers could not finish the step: {exc.cause or exc}") from None
        if snapshot is not None:
            snapshot.update(out.reads)
        for data in json.loads(out.model_calls_json):  # the model calls the tool made, recorded as the run's
            run.record(decode(data))
        if budget is not None:
            budget.calls += out.used.calls
            budget.tokens += out.used.tokens
        if out.limit is not None:
            raise LimitExceeded(out.limit.limit, out.limit.message)
        for value in out.clock:
            run.record(Clock(value, ipath))
        for report in out.progress:
            run.record(StepProgress(ipath, rt.spec.name, report.message, report.fraction))
        for note in out.notes:
            run.notify(note)
        if out.error is not None:
            raise ToolFailed(out.error, out.error_type)  # made by the activity: kept as it is
        return out.result


class ActivityThreadRecorder(ThreadRecorder):
    """The thread recorder of a run on Temporal: each step's result goes into the thread by
    the `chainlang.thread_event` activity (on a worker's store, once per run and step path)."""

    async def add(self, step: StepInfo, result: Any) -> None:
        from chainlang.engine.temporal.messages import ThreadEvent, ThreadEventAdded, received, to_json
        from chainlang.runtime.outcomes import StepFailed, error_of

        link = self.link
        snapshot = _snapshot()
        assert link.thread is not None  # after() adds only to the thread the run is attached to
        event = ThreadEvent(link.thread, step.event, to_json(result), link.run_id, step.path, link.ids.of(step),
                            link.clock.now().isoformat(), snapshot.wanted() if snapshot is not None else None)
        out = received(ThreadEventAdded, await workflow.execute_activity(
            THREAD_ACTIVITY, event, result_type=ThreadEventAdded | str,  # type: ignore[arg-type]  # str: a run from before
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=RetryPolicy(maximum_attempts=WORKER_LOSS_ATTEMPTS, initial_interval=timedelta(seconds=1)),
            summary=f"{step.path} into thread {link.thread}",
        ))
        if snapshot is not None:
            snapshot.update(out.reads)
        if out.error:
            raise StepFailed(step.path, step.event, error_of(
                "thread", f"{step.event} ended ok, but its result could not be added to the thread "
                          f"{link.thread!r}: {out.error}"))


def exposures_of(chain: "ChainRun") -> "Exposures | None":
    """What keeps each step's `expose` in the run of `chain` (installed by the run host: the
    tool activity refuses a secret that a step sends to a model or the user unexposed)."""
    from chainlang.runtime.secret_guard import Exposures

    return next((i for i in chain.interceptors if isinstance(i, Exposures)), None)


def _snapshot() -> "Snapshot | None":
    """The run's thread references read ahead, in this workflow (chainlang.engine.temporal.threadrefs)."""
    from chainlang.engine.temporal.threadrefs import Snapshot
    from chainlang.runtime.threads import CURRENT

    current = CURRENT.get()
    return current if isinstance(current, Snapshot) else None


class Recording:
    """What every workflow keeps: the run's records, and its notifications ({"note": text}) in
    their order among them, read by the submitter with the `progress` query; and the
    deliveries to its waits (`wait_delivered`, chainlang.engine.temporal.waits)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.signals = SignalBox()

    @workflow.signal(name=SIGNAL)
    def wait_delivered(self, delivery: WaitDelivery) -> None:
        """A wait of this run was settled in the store (an event, a cancel): the first per step counts."""
        self.signals.receive(delivery)

    @workflow.query(name="progress")
    def progress(self, since: int) -> str:
        """The records and notifications from index `since` on, as JSON text."""
        return json.dumps(self.records[since:], ensure_ascii=False)

    def waiter(self, job: dict[str, Any]) -> Any:
        """How this workflow's waits wait: for a signal, with a timer (the row names the
        transcript the submitter writes, given in the job)."""
        from chainlang.engine.temporal.waits import TemporalWaiter

        return TemporalWaiter(self.signals, str(job.get("transcript") or f"(Temporal workflow {job['run_id']})"))

    def record(self, rec: Any) -> None:
        from chainlang.journal.records import fields

        self.records.append({"type": rec.TYPE, **fields(rec)})

    def note(self, text: str) -> None:
        self.records.append({"note": text})

    def mark(self, child: str) -> None:
        """Where the records of the child workflow `child` (a sub-chain) belong."""
        self.records.append({"child": child})
        self.signals.child_started(child)


def worker_decider() -> Any:
    """The run's decider, over the worker's tiers as the workflow asks them (activities)."""
    from chainlang.engine.temporal.models import activity_tiers
    from chainlang.runtime.decide.chained import ChainedDecider
    from chainlang.runtime.decide.embedded import EmbeddedDecider
    from chainlang.runtime.decide.model_decider import TierDecider

    project = current_project()
    assert project.tiers is not None
    tiers = activity_tiers(project.tiers)  # each question a `chainlang.model` activity
    light = TierDecider(tiers, project.root) if tiers.configured else None
    decider = ChainedDecider(EmbeddedDecider(), light, project.fallback)
    decider.tiers = tiers
    return decider


@workflow.defn(name=CHAIN_WORKFLOW, sandboxed=False)
class ChainWorkflow(Recording):
    """One run of a chain. Input: the job `submit.make_job` makes."""

    @workflow.run
    async def run(self, text: str) -> str:
        """Run the job (JSON text); returns how the run ended, as JSON text (the key order of
        outputs kept, which Temporal's own converter would sort)."""
        return json.dumps(await self._run(json.loads(text)), ensure_ascii=False)

    async def _run(self, job: dict[str, Any]) -> dict[str, Any]:
        from chainlang.engine.temporal.children import Children, run_written
        from chainlang.engine.temporal.threadrefs import Snapshot
        from chainlang.runtime.host import RunHost, RunSpec, begin, drive, open_run
        from chainlang.runtime.outcomes import TIMER
        from chainlang.runtime.walk import ChainRun

        prepared = worker_chain(job["path"], job["digest"])
        if isinstance(prepared, str):
            return {"status": "invalid", "outputs": {}, "error": {"type": "worker", "message": prepared}}
        graph = prepared.graph
        assert graph is not None
        pinned = datetime.fromisoformat(job["now"]) if job.get("now") else None
        TIMER.set(workflow.time)  # durations in workflow time: the same when the run is replayed
        snapshot = Snapshot()  # {thread.ID.KEY}: read by activities, before the steps and after each

        def elapsed() -> float:  # the run's duration in workflow time: the same when a worker replays the run
            return round((workflow.now() - workflow.info().start_time).total_seconds() * 1000, 3)

        spec = RunSpec(job["run_id"], graph, job["inputs"], job["header"], prepared.root, prepared.registry,
                       prepared.loader)
        host = RunHost(record=self.record, clock=WorkflowClock(pinned), decider=worker_decider(), notify=self.note,
                       recorder=ActivityThreadRecorder, references=snapshot, elapsed=elapsed,
                       interrupted="the workflow was cancelled", waiter=self.waiter(job),
                       # called once the run is open (`children` needs its thread link)
                       executor=lambda chain: ActivityExecutor(chain, job.get("now"), children))
        run = begin(open_run(spec, host))
        children = Children(job["path"], job["digest"], job["inputs"], [], job.get("now"), self.mark, run.link,
                            transcript=job.get("transcript"))
        run.state.run_written = functools.partial(run_written, children)
        top = children.root = ChainRun(run.state, graph, job["inputs"])

        async def body() -> tuple[str, dict[str, Any], dict[str, Any] | None]:
            await snapshot.ahead(list(spec.graphs()))
            return await top.execute()

        end = await drive(run, body)
        return {"status": end.status, "outputs": end.outputs, "error": end.error, "records": len(self.records)}


@workflow.defn(name=EMIT_WORKFLOW, sandboxed=False)
class EmitWorkflow(Recording):
    """One emit: the project's hooks on the emitted event fire, their actions run as the
    chains' steps do (chainlang.runtime.emit.fire_hooks, with activities for the tools).
    Input: the job `submit.follow_emit` makes."""

    @workflow.run
    async def run(self, text: str) -> str:
        from chainlang.engine.temporal.threadrefs import Snapshot
        from chainlang.runtime.emit import fire_hooks
        from chainlang.runtime.outcomes import TIMER

        job = json.loads(text)
        project = _hooks_project(job["digest"])
        top = None
        if not isinstance(project, str) and job.get("task"):  # a scheduled task's firing: its own action
            top = _task_hooks(project, job["task"], job.get("task_digest"))
        if isinstance(project, str) or isinstance(top, str):
            message = project if isinstance(project, str) else top
            return json.dumps({"status": "invalid", "fired": [], "error": {"type": "worker", "message": message}})
        pinned = datetime.fromisoformat(job["now"]) if job.get("now") else None
        TIMER.set(workflow.time)
        snapshot = Snapshot()  # {thread.ID.KEY} in the hooks: read by activities
        await snapshot.ahead([*(project.hooks.hooks if project.hooks is not None else ()), *(top or ())])
        end = await fire_hooks(
            project, job["run_id"], job["header"], self.record, WorkflowClock(pinned), worker_decider(), self.note,
            top=top, executor=lambda chain: ActivityExecutor(chain, job.get("now")), recorder=ActivityThreadRecorder,
            interrupted="the workflow was cancelled", references=snapshot)
        return json.dumps({"status": end.status, "fired": end.outputs["fired"], "error": end.error,
                           "records": len(self.records)}, ensure_ascii=False)


_PROJECTS: dict[tuple[str, str], Any] = {}
_TASKS: dict[tuple[str, str, str], Any] = {}


def _task_hooks(project: Any, task_id: str, digest: str | None) -> Any:
    """The hooks a firing of the stored task `task_id` fires (its action, checked and compiled
    from the worker's store once per process); a message when the task is not there or its
    action differs from the one serve planned (by the plan's digest)."""
    from chainlang.store import StoreError
    from chainlang.tasks.firing import task_firing
    from chainlang.tasks.stored import project_store

    key = (str(project.root), task_id, digest or "")
    cached = _TASKS.get(key)
    if cached is not None:
        return cached
    try:
        with project_store(project.root) as store:
            task = store.get_task(task_id)
    except StoreError as exc:
        return f"the worker cannot read the task {task_id!r}: {exc}"
    if task is None:
        return f"the task {task_id!r} is not in the worker's store: give the workers the store serve uses"
    plan = task_firing(project, task)
    if digest is not None and plan.digest != digest:
        return f"the worker's task {task_id!r} is not the one serve planned: give the workers the store serve uses"
    if not plan.ok:
        return f"the action of the task {task_id!r} has check errors on the worker"
    _TASKS[key] = plan.top
    return plan.top


def _hooks_project(digest: str) -> Any:
    """The worker's hooks in force, checked and compiled once per worker process; a message
    when they differ from the submitter's (by their digest) or have errors."""
    from chainlang.errors import UsageError
    from chainlang.runtime.emit import load_project

    worker = current_project()
    key = (str(worker.root), digest)
    cached = _PROJECTS.get(key)
    if cached is not None:
        return cached
    try:
        project = load_project(worker.root, registry=worker.registry)
    except UsageError as exc:
        return f"the worker cannot load the project's hooks: {exc}"
    if project.digest != digest:
        return ("the worker's hooks in force are not the submitter's (their sha256 differ): deploy the same "
                "project to every worker, with the same store")
    if project.hooks is None:
        return "the project's hooks have errors on the worker: run chainlang check there"
    _PROJECTS[key] = project
    return project


def worker_chain(path: str, digest: str) -> "Prepared | str":
    """The chain at `path` (relative to the worker's project), checked and compiled once per
    worker process; a message when it differs from the submitted one or has errors."""
    from chainlang.errors import UsageError
    from chainlang.runtime.prepare import prepare

    project = current_project()
    key = (str(project.root), path, digest)
    cached = _PREPARED.get(key)
    if cached is not None:
        return cached
    try:
        prepared = prepare(project.root / path, registry=project.registry)
    except UsageError as exc:
        return f"the worker cannot load {path}: {exc}"
    if prepared.digest != digest:
        return (f"the worker's copy of {path} is not the chain that was submitted (sha256 {prepared.digest[:12]}… "
                f"instead of {digest[:12]}…): deploy the same project to every worker")
    if prepared.graph is None:
        return f"{path} has check errors on the worker: run chainlang check there"
    _PREPARED[key] = prepared
    return prepared
