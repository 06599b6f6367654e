"""The tool activity: one attempt of one step's tool, on a worker, in the worker's copy of
the project (its tools, its `.chainlang/state`).

The tool gets the context it gets in the embedded engine: the run id, the step, the
attempt and its idempotency key (so a retried activity, e.g. after a worker died in the
middle of it, does its side effect at most once), the clock, progress and notifications.
What the tool reports comes back with its result, for the workflow to record. A tool's
failure is a result too (`error`), never an activity failure: Temporal retries an activity
only when its worker stopped answering (heartbeats), and the walker applies the step's
own `retry`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio import activity

from chainlang.engine.temporal.messages import (LimitHit, ModelUse, ProgressReport, ThreadEvent, ThreadEventAdded,
                                                ThreadReads, ToolCall, ToolOutcome, from_json, received, to_json)
from chainlang.engine.temporal.threadrefs import READS_ACTIVITY, read_on_worker

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.runtime.events import EventRuntime
    from chainlang.llm.tiers import ModelTiers
    from chainlang.runtime.decide.decision import Fallback
    from chainlang.registry.registry import Registry

__all__ = ["HEARTBEAT_EVERY", "THREAD_ACTIVITY", "TOOL_ACTIVITY", "WorkerProject", "add_thread_event", "read_threads",
           "run_tool", "use_project"]

TOOL_ACTIVITY = "chainlang.tool"
THREAD_ACTIVITY = "chainlang.thread_event"
HEARTBEAT_EVERY = 2.0  # seconds; the workflow gives the activity a heartbeat timeout a few times this


@dataclass
class WorkerProject:
    """The project a worker serves: its directory, its events and its model tiers (built
    once per process), what a decide does when no decider can decide, and its chainlang.toml
    (its declared secrets, which the tool activity keeps from models and the user)."""

    root: Path
    registry: "Registry"
    tiers: "ModelTiers | None" = None
    fallback: "Fallback" = "fail"
    config: "ProjectConfig | None" = None

    def __post_init__(self) -> None:
        if self.tiers is None:
            from chainlang.llm.tiers import ModelTiers

            self.tiers = ModelTiers({})


_PROJECT: WorkerProject | None = None


def use_project(project: WorkerProject) -> None:
    """Set the project this process's activities and workflows run in (chainlang worker)."""
    global _PROJECT
    _PROJECT = project


def current_project() -> WorkerProject:
    if _PROJECT is None:
        raise RuntimeError("this process serves no chainlang project (start it with chainlang worker)")
    return _PROJECT


class _Clock:
    """The run's clock in a tool: pinned when the run is, else the worker's; every reading
    is kept, for the workflow to record as the embedded engine does."""

    def __init__(self, pinned: str | None) -> None:
        self.pinned = datetime.fromisoformat(pinned) if pinned else None
        self.readings: list[str] = []

    def now(self) -> datetime:
        value = self.pinned or datetime.now(timezone.utc).astimezone()
        self.readings.append(value.isoformat())
        return value


@activity.defn(name=TOOL_ACTIVITY)
async def run_tool(call: ToolCall | str) -> ToolOutcome:
    """Run one attempt of a step's tool (chainlang.engine.temporal.messages)."""
    return await _attempt(received(ToolCall, call))


async def _attempt(call: ToolCall) -> ToolOutcome:
    from chainlang.runtime.events import prepare_event
    from chainlang.runtime.invoke import stops_the_process, tool_message
    from chainlang.runtime.outcomes import EventUnavailable, LimitExceeded
    from chainlang.runtime.host import STATE_DIR
    from chainlang.runtime.tool_context import build_tool_context
    from chainlang.status import RESULT
    from chainlang.runtime.step_error import StepError, error_of_step_error

    project = current_project()
    clock = _Clock(call.now)
    out = ToolOutcome(clock=clock.readings)
    try:
        rt = prepare_event(project.registry, call.event)
    except EventUnavailable as exc:
        out.error = f"{exc} (on this worker: is its copy of the project the same?)"
        return out
    params = call.params
    refused = _secret_refusal(project, call, rt, params)
    if refused is not None:  # a secret on its way to a model or the user: the tool is not called
        out.error, out.error_type = refused["message"], refused["type"]
        return out
    service, recorder = None, None
    if rt.accepts_ctx:
        from chainlang.engine.temporal.models import ActivityRun
        from chainlang.runtime.decide.chained import ChainedDecider
        from chainlang.runtime.decide.embedded import EmbeddedDecider
        from chainlang.runtime.decide.model_decider import TierDecider
        from chainlang.runtime.models import Budget, ModelService

        assert project.tiers is not None
        recorder = ActivityRun()
        # the service asks only .record and .replay of its run
        service = ModelService(recorder, project.tiers, Budget(call.budget.calls, call.budget.tokens))  # type: ignore[arg-type]
        light = TierDecider(project.tiers, project.root) if project.tiers.configured else None
        params["ctx"] = build_tool_context(
            run_id=call.run_id, chain=call.chain, event=call.event, step=call.step, attempt=call.attempt,
            clock=clock, state_dir=project.root / STATE_DIR,
            report=lambda message, fraction: out.progress.append(ProgressReport(message, fraction)),
            notify=lambda text: out.notes.append(str(text)), project=project.root, registry=project.registry,
            captured=dict(from_json(call.captured_json) or {}),
            models=service.for_step(call.step, call.event) if project.tiers.configured else None,
            decider=ChainedDecider(EmbeddedDecider(), light, project.fallback),
            allow=tuple(tuple(group) for group in call.allow),
        )
    beat = asyncio.ensure_future(_heartbeat())
    try:
        assert rt.func is not None
        if rt.is_async:
            result = await rt.func(**params)
        else:
            result = await asyncio.to_thread(rt.func, **params)
        out.result_json, problem = _result_json(rt, result)
        if problem is not None:
            out.error, out.error_type = problem, RESULT
    except asyncio.CancelledError:
        raise  # the step's timeout, or the run stopped: Temporal records the cancellation
    except LimitExceeded as exc:  # the run's model budget: the workflow stops the run
        out.limit = LimitHit(exc.limit, exc.message)
    except (KeyboardInterrupt, SystemExit) as exc:
        if stops_the_process(exc):  # the worker is being stopped (a signal), not the tool's doing
            raise
        out.error = tool_message(exc)  # the tool's own (sys.exit in a tool): its failure, as on the embedded engine
    except StepError as exc:  # the tool's own error type: checked here, as on the embedded engine
        error = error_of_step_error(exc)
        out.error, out.error_type = error["message"], error["type"]
    except Exception as exc:
        out.error = tool_message(exc)
    finally:
        beat.cancel()
    if service is not None and recorder is not None:
        out.model_calls_json = to_json(recorder.records)
        out.used = ModelUse(service.budget.calls, service.budget.tokens)
    if call.reads:  # the run's thread references, as they are now the tool has run
        out.reads = await asyncio.to_thread(read_on_worker, project.root, call.reads)
    return out


def _secret_refusal(project: WorkerProject, call: ToolCall, rt: "EventRuntime",
                    params: dict[str, Any]) -> dict[str, Any] | None:
    """The secret error of a call that would send a declared secret's value to a model or the
    user without the step's `expose` (LANGUAGE.md §16; chainlang.runtime.secret_guard). The
    values are the worker's own: its tools read them from its environment, so a result can
    carry one that no chain file shows."""
    from chainlang.registry.sinks import sink_of
    from chainlang.runtime.secret_guard import readable_secrets, sink_refusal

    config = project.config
    if config is None or not config.secrets:
        return None
    sink = sink_of(call.event, rt.spec)
    if sink is None:
        return None
    return sink_refusal(call.step, call.event, sink, params, readable_secrets(config), frozenset(call.expose))


def _result_json(rt: "EventRuntime", result: Any) -> tuple[str, str | None]:
    """The tool's result as JSON text, or what is wrong with it: a result that is not JSON
    fails the attempt here, with the error the step gives it on the embedded engine."""
    from chainlang.journal.values import is_plain_json
    from chainlang.runtime.step import StepPipeline

    if not is_plain_json(result, tuples=False):
        result, problem = StepPipeline.check_result(rt, result)
        if problem is not None:
            return "null", problem
    return to_json(result), None


@activity.defn(name=THREAD_ACTIVITY)
async def add_thread_event(event: ThreadEvent | str) -> ThreadEventAdded:
    """One step's result into a thread of the worker's store (Store.add_event: once per run
    and step path, so a retried activity adds nothing twice)."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    event = received(ThreadEvent, event)
    root = current_project().root
    try:
        with project_store(root) as store:
            store.add_event(event.thread, event.event, from_json(event.result_json), event.run_id, event.path,
                            key=event.key, at=datetime.fromisoformat(event.at))
    except StoreError as exc:
        return ThreadEventAdded(error=str(exc))
    if event.reads:  # the run's thread references, with this event in the thread
        return ThreadEventAdded(reads=await asyncio.to_thread(read_on_worker, root, event.reads))
    return ThreadEventAdded()


@activity.defn(name=READS_ACTIVITY)
async def read_threads(asked: ThreadReads | str) -> ThreadReads:
    """The values of thread references (chainlang.engine.temporal.threadrefs), read from the
    worker's store."""
    refs = received(ThreadReads, asked).refs
    return ThreadReads(values=await asyncio.to_thread(read_on_worker, current_project().root, refs))


async def _heartbeat() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_EVERY)
