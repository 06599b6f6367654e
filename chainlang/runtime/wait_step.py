"""Running a `wait` step, and `user.ask` (LANGUAGE.md §15), on either engine.

    freeze the run's values the where reads → register the wait (the engine's waiter:
    a store row) → record `wait_started` → wait until it is settled (an event delivered,
    the deadline, a cancel) → record `wait_finished` → mark the wait finished → the result

The register comes before `wait_started`, so an event that arrives after the transcript
says the run waits always finds it; registering again on resume returns the first row
(its deadline). How the run waits is the engine's (`RunState.waiter`): the embedded engine
watches the store (runtime/waiting.py), Temporal waits for a signal with a timer. Waiting
spends no step of `max_steps`, and the time waited does not count against
`limits.timeout` (its deadlines are pushed back by the wait).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from chainlang.expr.errors import ExprEvalError
from chainlang.journal.records import WaitFinished, WaitStarted
from chainlang.runtime import live_run
from chainlang.runtime.live_run import LIMIT_DEADLINES
from chainlang.runtime.outcomes import ChainBroken, StepFailed, error_of, ms_since, perf, seconds
from chainlang.runtime.scope import Rec, Scope
from chainlang.status import CANCELLED, EXPRESSION, PARAMS, TIMEOUT

if TYPE_CHECKING:
    from chainlang.compile import GraphNode
    from chainlang.compile.wait_graph import WaitPlan
    from chainlang.runtime.walk import ChainRun

__all__ = ["Settled", "WaitRequest", "question_id", "run_wait"]


@dataclass
class WaitRequest:
    """One wait, as the engine's waiter registers it (store/waits.py's row, less its status)."""

    run_id: str
    step: str
    event: str
    where: str | None
    frozen: dict[str, Any]
    deadline: str | None
    question: dict[str, Any] | None
    match_field: str | None
    match_value: Any
    chain: str | None
    timeout: float | None  # seconds, for an engine that keeps its own timer
    step_id: str | None = None  # the step's `id` (what `--answer ID=VALUE` names)
    # whether another branch of the run is in the middle of a step: a detached run ends at its
    # wait only once the others are done or waiting too (None: nothing else runs)
    others_busy: Any = None


@dataclass
class Settled:
    """How a wait ended: `ok` (payload, emit_id), `timed_out` or `cancelled`; `at` when."""

    status: str
    payload: Any = None
    emit_id: str | None = None
    at: str | None = None


def question_id(run_id: str, path: str) -> str:
    """The stable id of the question a user.ask step asks (what `user.answered` names)."""
    return "q-" + hashlib.sha256(f"{run_id}/{path}".encode("utf-8")).hexdigest()[:16]


async def run_wait(chain: "ChainRun", node: "GraphNode", scope: Scope, ipath: str) -> None:
    """Run a wait node (its `if` was handled by the walker): record its result, or raise how
    it failed (StepFailed), broke (ChainBroken) or stopped the run (RunWaiting)."""
    run = chain.run
    plan: WaitPlan = node.wait
    start = perf()
    replay = run.replay
    done = replay.waits_finished.get(ipath) if replay is not None else None
    if done is None:
        began = replay.waits_started.get(ipath) if replay is not None else None
        request = _request(chain, node, plan, scope, ipath, began)
        waiter = run.waiter
        if waiter is None:  # an emit's hook actions (CL068 says so before they run): nothing may wait there
            raise StepFailed(ipath, node.event, error_of(
                "usage", f"step {ipath} waits for {plan.event}, but a hook's action cannot wait (it runs for an "
                         "event, not in a run that can be resumed): start a chain that waits instead"))
        registered = await waiter.register(request)
        if registered is not None:  # the row registered first (a resume): its deadline stands
            request.deadline = registered
        if began is None:
            run.record(WaitStarted(ipath, request.event, request.where, request.frozen, request.deadline,
                                   request.question))
            run.commit()
        elif not _detached(run, waiter):
            # resumed at a wait in the foreground: its wait_started was shown by the process that began it
            from chainlang.output.progress.format import waiting_note

            run.notify(waiting_note(began))
        with _limits_paused():
            settled = await waiter.settled(request)
        done = WaitFinished(ipath, settled.status, settled.payload, settled.emit_id, settled.at)
        run.record(done)
        run.commit()
        if not _detached(run, waiter):  # a detached run's keeper (serve) marks it once the run went on
            await waiter.finished(request)
    elif run.waiter is not None and replay is not None and ipath in replay.waits_started and \
            not _detached(run, run.waiter):
        # recorded before the process died, maybe before it told the store: tell it again (idempotent),
        # or the settled row stays listed as a run to resume
        await run.waiter.finished(_request(chain, node, plan, scope, ipath, replay.waits_started[ipath]))
    _outcome(chain, node, plan, scope, ipath, done, start)


def _others_busy(in_flight: dict[str, int], ipath: str) -> bool:
    """Whether a step other than those the wait is inside (the step that called its chain:
    `4` for `4/2`) is running now."""
    return any(not ipath.startswith(path + "/") for path in in_flight)


def _detached(run: Any, waiter: Any) -> bool:
    """Whether the run goes on in the background (`--detach`, a serve resuming it): then the
    wait is marked finished in the store by whoever resumed it, once the run went on to its
    end or its next wait, so a process killed in between leaves the wait listed as one whose
    run must be resumed (serve/waits.py)."""
    return bool(run.detach or getattr(waiter, "detach", False))


def _request(chain: "ChainRun", node: "GraphNode", plan: "WaitPlan", scope: Scope, ipath: str,
             began: WaitStarted | None) -> WaitRequest:
    run = chain.run
    if began is not None:  # resumed: what the wait froze when it began
        frozen, question, deadline = dict(began.values), began.question, began.deadline
        timeout = plan.timeout
    else:
        frozen, question, timeout = {}, None, plan.timeout
        for text, ref in plan.frozen:
            try:
                frozen[text] = scope(ref)
            except ExprEvalError as exc:
                raise StepFailed(ipath, node.event, error_of(
                    EXPRESSION, f"where `{plan.where}` (line {node.line}): {exc.message}")) from None
        if plan.ask is not None:
            question, timeout = _question(node, plan, scope, ipath, run.run_id)
        deadline = None
        if timeout is not None:
            deadline = utc_stamp(run.waiter.now() + timedelta(seconds=timeout))
    match_field, match_value = None, None
    if plan.match is not None:
        match_field = plan.match[0]
        if plan.ask is not None:
            match_value = question["id"] if question else None
        elif plan.match[1] is not None:
            match_value = frozen.get(plan.match[1])
        else:
            match_value = plan.match[2]
    where = plan.where
    if plan.ask is not None and question is not None:
        where = f"question_id == '{question['id']}'"
    return WaitRequest(run.run_id, ipath, plan.event, where, frozen, deadline, question, match_field, match_value,
                       chain.graph.name or chain.graph.file, timeout, node.id,
                       lambda: _others_busy(run.in_flight, ipath))


def _question(node: "GraphNode", plan: "WaitPlan", scope: Scope, ipath: str,
              run_id: str) -> tuple[dict[str, Any], float | None]:
    """A user.ask's question, rendered and checked, and its timeout in seconds."""
    from chainlang.durations import parse_duration

    assert plan.ask is not None
    try:
        params = {key: value.render(scope) for key, value in plan.ask.items()}
    except ExprEvalError as exc:
        raise StepFailed(ipath, node.event, error_of(EXPRESSION, f"params (line {node.line}): {exc.message}")) from None
    text = params.get("question")
    if not isinstance(text, str) or not text.strip():
        raise StepFailed(ipath, node.event, error_of(PARAMS, "user.ask: question must be a non-empty text"))
    question: dict[str, Any] = {"id": question_id(run_id, ipath), "question": text}
    choices = params.get("choices")
    if choices is not None:
        if not isinstance(choices, list) or not choices or any(isinstance(c, (dict, list)) or c is None
                                                                 for c in choices):
            raise StepFailed(ipath, node.event, error_of(PARAMS, "user.ask: choices must be a non-empty list of "
                                                                 "texts, numbers or booleans"))
        question["choices"] = choices
    schema = params.get("schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise StepFailed(ipath, node.event, error_of(PARAMS, "user.ask: schema must be a JSON Schema object"))
        question["schema"] = schema
    timeout = None
    raw = params.get("timeout")
    if raw is not None:
        timeout = parse_duration(raw) if isinstance(raw, str) else None
        if timeout is None or timeout <= 0:
            raise StepFailed(ipath, node.event, error_of(PARAMS, f"user.ask: timeout {raw!r} is not a duration "
                                                                 "such as 30m, 1d or 2w"))
    return question, timeout


def _outcome(chain: "ChainRun", node: "GraphNode", plan: "WaitPlan", scope: Scope, ipath: str, done: WaitFinished,
             start: float) -> None:
    status = done.status
    if status == "ok":
        result = done.payload
        if plan.ask is not None:  # {answer, by, at}
            payload = done.payload if isinstance(done.payload, dict) else {}
            result = {"answer": payload.get("answer"), "by": payload.get("by"), "at": done.at}
        scope.record(node.path, node.event, node.id, Rec("ok", result, None, None, ms_since(start)))
        return
    if status == "timed_out":
        waited = seconds(plan.timeout) if plan.timeout is not None else "its timeout"
        if plan.on_timeout == "continue":
            scope.record(node.path, node.event, node.id, Rec("ok", None, None, None, ms_since(start)))
            return
        if plan.on_timeout == "break":
            scope.record(node.path, node.event, node.id, Rec("skipped", None, None, None, ms_since(start)))
            raise ChainBroken(ipath, f"the wait at step {ipath} for {plan.event} timed out ({waited}) and its "
                                     "on_timeout is break")
        error = error_of(TIMEOUT, f"no {plan.event} came within {waited} (the wait at step {ipath})")
    else:
        error = error_of(CANCELLED, f"the wait at step {ipath} for {plan.event} was cancelled")
    scope.record(node.path, node.event, node.id, Rec("failed", None, error, None, ms_since(start)))
    live = live_run.current()
    if live is not None:
        live.failed(ipath, node.event, error)
    raise StepFailed(ipath, node.event, error)


class _limits_paused:
    """Push the deadlines of `limits.timeout` in force back by the time waited."""

    def __enter__(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - always inside the run's loop
            self.left: list[tuple[Any, float]] = []
            return
        self.loop = loop
        self.left = []
        for deadline in LIMIT_DEADLINES.get():
            when = deadline.when()
            if when is not None and not deadline.expired():
                self.left.append((deadline, when - loop.time()))
                deadline.reschedule(None)

    def __exit__(self, *exc: Any) -> None:
        for deadline, left in self.left:
            if not deadline.expired():
                deadline.reschedule(self.loop.time() + max(0.0, left))


def utc_stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stamp_now() -> str:
    return utc_stamp(datetime.now(timezone.utc))
