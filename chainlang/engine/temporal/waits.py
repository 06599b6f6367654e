"""Waiting inside a run on Temporal (LANGUAGE.md §15): a wait is the workflow waiting for a
signal, with a timer for its deadline.

The wait is a row of the project's store, as on the embedded engine (store/waits.py), so
`chainlang emit`, serve and `chainlang waits` find it the same way: the workflow registers
it by an activity (`chainlang.wait_open`). Whoever settles the row — a delivery, a cancel —
then signals the workflow (`wait_delivered`, chainlang.engine.temporal.wake); the workflow
keeps the first signal per step and ignores repeats, so a signal sent again (the sweep of
the workers, a second serve) changes nothing. At the deadline the workflow's timer fires
and an activity (`chainlang.wait_time_out`) settles the row as timed out, or reads how it
was settled first (a delivery that won the race is the wait's result). Once
`wait_finished` is recorded, `chainlang.wait_finish` marks the row finished.

The records are the walker's (runtime/wait_step.py), the same as on the embedded engine.
A wait in a sub-chain's child workflow is signalled through its parent: every workflow
passes a signal for a step under one of its children's paths on to that child.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from chainlang.engine.temporal.activities import current_project
from chainlang.engine.temporal.messages import WaitDelivery, WaitKey, WaitOpen, WaitOpened, from_json, to_json

if TYPE_CHECKING:
    from chainlang.runtime.wait_step import Settled, WaitRequest
    from chainlang.store.waits import WaitRow

__all__ = ["SIGNAL", "WAIT_ACTIVITIES", "WAIT_FINISH", "WAIT_OPEN", "WAIT_TIME_OUT", "SignalBox", "TemporalWaiter",
           "delivery_of", "finish_wait", "open_wait", "time_out_wait"]

SIGNAL = "wait_delivered"
WAIT_OPEN = "chainlang.wait_open"
WAIT_TIME_OUT = "chainlang.wait_time_out"
WAIT_FINISH = "chainlang.wait_finish"
# a store that is busy (SQLite locked) or briefly unreachable: tried again, then the step fails
STORE_ATTEMPTS = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))
STORE_BOUND = timedelta(minutes=1)


def delivery_of(row: "WaitRow") -> WaitDelivery:
    """The signal (or the timer activity's answer) for a settled row: what the embedded
    engine's waiter reads from the same row (runtime/waiting.settled_of)."""
    from chainlang.runtime.waiting import settled_of

    settled = settled_of(row)
    return WaitDelivery(row.step, settled.status, to_json(settled.payload), settled.emit_id, settled.at)


# -- the workflow's side ----------------------------------------------------------------------


@dataclass
class SignalBox:
    """The deliveries a workflow got (the first per step) and the child workflows it started
    (step path → workflow id), which get the signals for their steps."""

    deliveries: dict[str, WaitDelivery] = field(default_factory=dict)
    children: dict[str, str] = field(default_factory=dict)

    def child_started(self, child_id: str) -> None:
        # a child's id is RUN/PATH@ATTEMPT (chainlang.engine.temporal.children); a later attempt replaces it
        path = child_id.split("/", 1)[-1].rsplit("@", 1)[0]
        self.children[path] = child_id

    def receive(self, delivery: WaitDelivery) -> None:
        """Keep the first delivery for its step; pass one for a child's step on to the child."""
        child = self._child_of(delivery.step)
        if child is not None:
            asyncio.ensure_future(_pass_on(child, delivery))
            return
        if delivery.step not in self.deliveries:  # a repeat (sent again, or by a second serve) is ignored
            self.deliveries[delivery.step] = delivery

    def _child_of(self, step: str) -> str | None:
        best = None
        for path, child in self.children.items():
            if step.startswith(path + "/") and (best is None or len(path) > len(best[0])):
                best = (path, child)
        return best[1] if best is not None else None


async def _pass_on(child: str, delivery: WaitDelivery) -> None:
    try:
        await workflow.get_external_workflow_handle(child).signal(SIGNAL, delivery)
    except Exception as exc:  # the child ended meanwhile: its wait had nothing left to take
        workflow.logger.info("the signal for step %s did not reach %s: %s", delivery.step, child, exc)


class TemporalWaiter:
    """The waiter of a run on Temporal (RunHost.waiter; the protocol of runtime/wait_step.py)."""

    def __init__(self, box: SignalBox, transcript: str) -> None:
        self.box = box
        self.transcript = transcript

    @staticmethod
    def now() -> datetime:
        return workflow.now().astimezone(timezone.utc)

    async def register(self, request: "WaitRequest") -> str | None:
        opened: WaitOpened = await workflow.execute_activity(
            WAIT_OPEN, WaitOpen(request.run_id, request.step, request.event, request.where, to_json(request.frozen),
                                request.deadline, self.transcript, request.chain, request.match_field,
                                to_json(request.match_value), to_json(request.question)),
            result_type=WaitOpened, start_to_close_timeout=STORE_BOUND, retry_policy=STORE_ATTEMPTS,
            summary=f"{request.step} waits for {request.event}")
        if opened.error is not None:
            _store_failed(request, opened.error)
        return opened.deadline

    async def settled(self, request: "WaitRequest") -> "Settled":
        """The first delivery for the step, or, once its deadline passed, how the store
        settled it (timed out, or a delivery whose signal had not come yet)."""
        from chainlang.runtime.wait_step import Settled

        step = request.step
        left = _seconds_to(request.deadline, self.now())
        if step not in self.box.deliveries and (left is None or left > 0):
            try:
                await workflow.wait_condition(lambda: step in self.box.deliveries, timeout=left)
            except asyncio.TimeoutError:
                pass
        got = self.box.deliveries.get(step)
        if got is None:  # the timer fired: settle the row as timed out, unless something settled it first
            got = await workflow.execute_activity(  # a WaitDelivery (result_type)
                WAIT_TIME_OUT, WaitKey(request.run_id, step), result_type=WaitDelivery,
                start_to_close_timeout=STORE_BOUND, retry_policy=STORE_ATTEMPTS,
                summary=f"{step}: no {request.event} before {request.deadline}")
            if got.error is not None:
                _store_failed(request, got.error)
        return Settled(got.status, from_json(got.payload_json), got.emit_id, got.at)

    async def finished(self, request: "WaitRequest") -> None:
        await workflow.execute_activity(WAIT_FINISH, WaitKey(request.run_id, request.step),
                                        start_to_close_timeout=STORE_BOUND, retry_policy=STORE_ATTEMPTS,
                                        summary=f"{request.step} finished waiting")


def _seconds_to(deadline: str | None, now: datetime) -> float | None:
    if deadline is None:
        return None
    try:
        moment = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return 0.0  # an unreadable deadline (a hand-edited store): passed, as on the embedded engine
    return (moment - now).total_seconds()


def _store_failed(request: "WaitRequest", message: str) -> None:
    from chainlang.runtime.outcomes import StepFailed, error_of
    from chainlang.status import UNAVAILABLE

    raise StepFailed(request.step, request.event, error_of(
        UNAVAILABLE, f"the wait for {request.event} could not use the project's store on the worker: {message}"))


# -- the activities (on a worker, in its copy of the project: its store) ------------------------


@activity.defn(name=WAIT_OPEN)
async def open_wait(wait: WaitOpen) -> WaitOpened:
    """Register the wait in the worker's store (once per run and step: a retried activity
    gets the row registered first, with its deadline)."""
    from chainlang.store import StoreError
    from chainlang.store.waits import WaitRow

    row = WaitRow(run_id=wait.run_id, step=wait.step, event=wait.event, where=wait.where,
                  frozen=dict(from_json(wait.frozen_json) or {}), deadline=wait.deadline, transcript=wait.transcript,
                  chain=wait.chain, engine="temporal", status="waiting", created_at="", match_field=wait.match_field,
                  match_value=from_json(wait.match_value_json), question=from_json(wait.question_json))

    def register() -> WaitOpened:
        with _store() as store:
            return WaitOpened(store.open_wait(row).deadline)

    try:
        return await asyncio.to_thread(register)
    except StoreError as exc:
        return WaitOpened(error=str(exc))


@activity.defn(name=WAIT_TIME_OUT)
async def time_out_wait(key: WaitKey) -> WaitDelivery:
    """Settle the wait as timed out; how the store settled it (first wins: a delivery or a
    cancel that came before the timer is kept)."""
    from chainlang.store import StoreError

    def settle() -> WaitDelivery:
        with _store() as store:
            row = store.settle_wait(key.run_id, key.step, "timed_out") or store.get_wait(key.run_id, key.step)
        if row is None:
            return WaitDelivery(key.step, "timed_out", error=f"the wait of run {key.run_id} at step {key.step} is "
                                                             "gone from the project's store")
        return delivery_of(row)

    try:
        return await asyncio.to_thread(settle)
    except StoreError as exc:
        return WaitDelivery(key.step, "timed_out", error=str(exc))


@activity.defn(name=WAIT_FINISH)
async def finish_wait(key: WaitKey) -> None:
    """The run recorded wait_finished: the row needs no signal or resume any more."""

    def finish() -> None:
        with _store() as store:
            store.finish_wait(key.run_id, key.step)

    await asyncio.to_thread(finish)  # a store error fails the attempt: Temporal tries again


def _store() -> Any:
    from chainlang.tasks.stored import project_store

    return project_store(current_project().root)


WAIT_ACTIVITIES = (open_wait, time_out_wait, finish_wait)
