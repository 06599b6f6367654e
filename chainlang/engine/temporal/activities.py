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
import json
import functools
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio import activity

from chainlang.engine.temporal.threadrefs import READS_ACTIVITY, read_on_worker

if TYPE_CHECKING:
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
    once per process), and what a decide does when no decider can decide."""

    root: Path
    registry: "Registry"
    tiers: "ModelTiers | None" = None
    fallback: "Fallback" = "fail"

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
async def run_tool(text: str) -> str:
    """Run one attempt (the call as JSON text); returns {result, error, notes, progress, clock}
    as JSON text."""
    return json.dumps(await _attempt(json.loads(text)), ensure_ascii=False)


async def _attempt(call: dict[str, Any]) -> dict[str, Any]:
    from chainlang.journal.values import idempotency_key
    from chainlang.runtime.context import RunContext
    from chainlang.runtime.events import prepare_event
    from chainlang.runtime.outcomes import EventUnavailable, LimitExceeded
    from chainlang.runtime.invoke import tool_message
    from chainlang.runtime.runner import STATE_DIR

    project = current_project()
    notes: list[str] = []
    progress: list[list[Any]] = []
    clock = _Clock(call.get("now"))
    out: dict[str, Any] = {"result": None, "error": None, "notes": notes, "progress": progress,
                           "clock": clock.readings, "models": [], "used": [0, 0]}
    try:
        rt = prepare_event(project.registry, call["event"])
    except EventUnavailable as exc:
        out["error"] = f"{exc} (on this worker: is its copy of the project the same?)"
        return out
    params = dict(call["params"])
    service, recorder = None, None
    if rt.accepts_ctx:
        from chainlang.engine.temporal.models import ActivityRun
        from chainlang.runtime.decide.chained import ChainedDecider
        from chainlang.runtime.decide.embedded import EmbeddedDecider
        from chainlang.runtime.decide.model_decider import TierDecider
        from chainlang.runtime.models import Budget, ModelService

        assert project.tiers is not None
        left = call.get("budget") or [None, None]
        recorder = ActivityRun()
        # the service asks only .record and .replay of its run
        service = ModelService(recorder, project.tiers, Budget(left[0], left[1]))  # type: ignore[arg-type]
        light = TierDecider(project.tiers, project.root) if project.tiers.configured else None
        params["ctx"] = RunContext(
            run_id=call["run_id"], chain=call.get("chain"), step=call["step"], event=call["event"],
            attempt=call["attempt"], idempotency_key=idempotency_key(call["run_id"], call["step"], call["attempt"]),
            clock=clock, state_dir=project.root / STATE_DIR,
            progress=functools.partial(_report, progress),
            notify=lambda text: notes.append(str(text)), project=project.root, registry=project.registry,
            captured=dict(call.get("captured") or {}),
            models=service.for_step(call["step"], call["event"]) if project.tiers.configured else None,
            decider=ChainedDecider(EmbeddedDecider(), light, project.fallback),
            allow=tuple(tuple(group) for group in call.get("allow") or ()),
        )
    beat = asyncio.ensure_future(_heartbeat())
    try:
        assert rt.func is not None
        if rt.is_async:
            out["result"] = await rt.func(**params)
        else:
            out["result"] = await asyncio.to_thread(rt.func, **params)
    except asyncio.CancelledError:
        raise  # the step's timeout, or the run stopped: Temporal records the cancellation
    except LimitExceeded as exc:  # the run's model budget: the workflow stops the run
        out["limit"] = [exc.limit, exc.message]
    except Exception as exc:
        out["error"] = tool_message(exc)
    finally:
        beat.cancel()
    if service is not None and recorder is not None:
        out["models"] = recorder.records
        out["used"] = [service.budget.calls, service.budget.tokens]
    if call.get("reads"):  # the run's thread references, as they are now the tool has run
        out["reads"] = await asyncio.to_thread(read_on_worker, project.root, call["reads"])
    return out


@activity.defn(name=THREAD_ACTIVITY)
async def add_thread_event(text: str) -> str:
    """One step's result into a thread of the worker's store (Store.add_event: once per run
    and step path, so a retried activity adds nothing twice); {} or {error}."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    event = json.loads(text)
    root = current_project().root
    try:
        with project_store(root) as store:
            store.add_event(event["thread"], event["event"], event["result"], event["run_id"], event["path"],
                            key=event["key"], at=datetime.fromisoformat(event["at"]))
    except StoreError as exc:
        return json.dumps({"error": str(exc)})
    if event.get("reads"):  # the run's thread references, with this event in the thread
        return json.dumps({"reads": await asyncio.to_thread(read_on_worker, root, event["reads"])}, ensure_ascii=False)
    return "{}"


@activity.defn(name=READS_ACTIVITY)
async def read_threads(text: str) -> str:
    """The values of thread references (chainlang.engine.temporal.threadrefs), read from the
    worker's store: {key: {value} or {error}} as JSON text."""
    return json.dumps(await asyncio.to_thread(read_on_worker, current_project().root, json.loads(text)),
                      ensure_ascii=False)


def _report(progress: list[list[Any]], message: str, fraction: float | None = None) -> None:
    progress.append([str(message)[:1000], fraction])


async def _heartbeat() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_EVERY)
