"""One event step, as an explicit pipeline of small stages:

    replay? → resolve → admit (interceptors) → render params → before (interceptors)
      → validate / decide → attempts: execute (executor seam) → check result → record
      → after (interceptors)

Each stage is a method below; `run` is the pipeline. Every attempt writes `step_started`
before its event is called and `step_finished` when it ends (§9); a step that ends before
its call (not allowed, invalid params, skipped by decide, cancelled by an interceptor) is
recorded as one attempt. Whether to retry and how long to wait: runtime/retry_policy.py;
a resumed run waits only what is left of the wait it stopped in: runtime/durable_wait.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from chainlang.compile import copy_json
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import truthy
from chainlang.journal.records import Decide, StepFinished, StepStarted
from chainlang.runtime.events import EventRuntime, prepare_event
from chainlang.runtime.interceptors import Refused, StepInfo
from chainlang.runtime.calls import Watch, guarded
from chainlang.runtime.inline import LoopTimeout
from chainlang.runtime.live_run import LIMIT_DEADLINES
from chainlang.runtime.invoke import abandoned_text, stops_the_process, tool_failure
from chainlang.runtime.outcomes import (
    ChainBroken,
    ChainFailed,
    EventUnavailable,
    LimitExceeded,
    ResumeBlocked,
    RunWaiting,
    StepFailed,
    ToolFailed,
    error_of,
    ms_since,
    perf,
    seconds,
    short,
)
from chainlang.runtime.scope import Rec, Scope, accessor
from chainlang.runtime.threads import reading, reads_ahead  # thread[EXPR] on Temporal: fetched, then evaluated
from chainlang.status import (CANCELLED, DECIDE, EXPRESSION, FAILED, LIMIT, OK, PARAMS, RESULT, TIMEOUT, UNAVAILABLE,
                              StepStatus)
from chainlang.runtime.step_error import StepError, error_of_step_error
from chainlang.runtime.retry_policy import MAX_RETRY_DELAY, retry_delay, tries_again
from chainlang.runtime.durable_wait import wait_left
from chainlang.journal.values import find_non_json, is_plain_json

if TYPE_CHECKING:
    from chainlang.compile import GraphNode
    from chainlang.runtime.decide import Decision
    from chainlang.runtime.walk import ChainRun


class StepPipeline:
    """Runs the event steps of one chain run (see the module docstring)."""

    __slots__ = ("chain", "run", "executor", "interceptors", "local")

    def __init__(self, chain: "ChainRun") -> None:
        from chainlang.runtime.invoke import LocalExecutor

        self.chain = chain
        self.run = chain.run
        make = chain.run.executor
        self.local = make is None  # tools run in this process: an async tool may be awaited directly
        self.executor = LocalExecutor(chain) if make is None else make(chain)
        self.interceptors = chain.interceptors

    async def __call__(self, node: "GraphNode", scope: Scope, ipath: str) -> None:
        """Run one event step (or one item of a foreach: `scope` then holds the loop variable),
        kept in `run.in_flight` while it runs: a detached wait ends the run only once no other
        branch is in the middle of a step (runtime/waiting.py). (One coroutine, not two: this
        is the path of every step.)"""
        flights = self.run.in_flight
        flights[ipath] = flights.get(ipath, 0) + 1
        try:
            run = self.run
            name = node.event or ""
            replay = run.replay
            if replay is not None:
                done = replay.finished.get(ipath)
                if done is not None and not replay.retries_left(ipath, done, node.retry):
                    self.replayed(node, scope, ipath, done)
                    if done.status == "ok" and self.interceptors:  # post hooks decide again from what was recorded
                        again = StepInfo(ipath, name, self.chain.graph.name, self.chain.graph.file, node.id, node.expose,
                                node.decide is not None and node.decide_expr is None)
                        started = replay.started.get(ipath)
                        for interceptor in self.interceptors:
                            await interceptor.after(again, started.params if started else {}, done.result)
                    return
                if ipath in replay.skip and ipath in replay.started:
                    self.finish_unstarted(node, scope, ipath, replay.started[ipath].params, "skipped",
                                          "skipped on resume (--skip)")
                    return
            rt = self.resolve(node, scope, ipath, name)
            info = StepInfo(ipath, name, self.chain.graph.name, self.chain.graph.file, node.id, node.expose,
                                node.decide is not None and node.decide_expr is None) if self.interceptors else None
            if info is not None:
                for interceptor in self.interceptors:
                    refused = interceptor.admit(info)
                    if refused is not None:
                        self.fail_early(node, scope, ipath, refused)
            try:
                if reads_ahead():
                    params = await reading(lambda: {key: value.render(scope) for key, value in node.params.items()})
                else:
                    params = {key: value.render(scope) for key, value in node.params.items()}
                if node.captures:  # what a registered or scheduled action reads of this chain, as it is now
                    run.captured[ipath] = {key: accessor(replace(binding, captured=False), ref)(scope)
                                           for key, binding, ref in node.captures}
            except ExprEvalError as exc:
                self.fail_early(node, scope, ipath, error_of(EXPRESSION, f"params (line {node.line}): {exc.message}"))
            if info is not None:
                try:
                    for interceptor in self.interceptors:
                        params = await interceptor.before(info, params)
                except Refused as refused:
                    if refused.status == "failed":
                        tries = (node.retry.attempts if node.retry is not None else 1) if refused.as_attempt else None
                        self.fail_early(node, scope, ipath, refused.error, params, tries)
                    self.finish_unstarted(node, scope, ipath, params, "cancelled", refused.error["message"],
                                          error=refused.error)
                    return
            if node.decide is None and not rt.check_params(params):  # valid as they are: no trip through validate
                valid = params
            else:
                checked = await self.validate(node, rt, scope, ipath, params)
                if checked is None:
                    return
                valid = checked
            result = await self.attempts(node, rt, scope, ipath, valid)
            if info is not None:
                for interceptor in self.interceptors:
                    await interceptor.after(info, valid, result)
        finally:
            left = flights[ipath] - 1
            if left:
                flights[ipath] = left
            else:
                del flights[ipath]

    # -- stages

    def resolve(self, node: "GraphNode", scope: Scope, ipath: str, name: str) -> EventRuntime:
        """The event's runtime, prepared once per run."""
        run = self.run
        rt = run.events.get(name)
        if rt is None:
            try:
                rt = prepare_event(run.registry, name)
            except EventUnavailable as exc:
                self.fail_early(node, scope, ipath, error_of(UNAVAILABLE, str(exc)))
            run.events[name] = rt
        return rt

    async def validate(self, node: "GraphNode", rt: EventRuntime, scope: Scope, ipath: str,
                       params: dict[str, Any]) -> dict[str, Any] | None:
        """The params to call with: valid as they are, or as the decide model left them;
        None when the decision was to skip the step."""
        problems = rt.check_params(params)
        if not problems and node.decide is None:
            return params
        name = rt.spec.name
        decision = await self.decide(node, rt, ipath, params, problems, scope)
        if decision.action == "skip":
            self.finish_unstarted(node, scope, ipath, params, "skipped", decision.reason)
            return None
        if decision.action == "break":
            self.finish_unstarted(node, scope, ipath, params, "skipped", decision.reason, broke=True)
            raise ChainBroken(ipath, f"the decide model answered break at step {ipath} ({name}): {decision.reason}")
        params = decision.params or {}
        problems = rt.check_params(params)
        if problems:
            self.fail_early(node, scope, ipath, error_of(
                PARAMS, f"{name}: the params are invalid after the decision: " + "; ".join(problems[:3])), params)
        return params

    async def attempts(self, node: "GraphNode", rt: EventRuntime, scope: Scope, ipath: str,
                       params: dict[str, Any]) -> Any:
        """Call the event (through the executor), retrying as `retry` says; record each
        attempt. Returns the result; raises StepFailed when the last attempt failed."""
        run = self.run
        name = rt.spec.name
        retry = node.retry
        tries = retry.attempts if retry is not None else 1
        first = 1 if run.replay is None else run.replay.first_attempt(rt, ipath)
        run.steps_run += 1  # an executed step: its event is called (once, however many attempts)
        if run.steps_run > run.max_steps:
            raise LimitExceeded("max_steps", f"the run executed more than max_steps = {run.max_steps} steps "
                                             f"(at step {ipath}, {name})")
        if first > 1 and retry is not None and run.replay is not None:
            began = run.replay.retry_wait_began(ipath)
            if began is not None:  # resumed in the wait after a failed attempt: only what is left of it
                await wait_left(retry_delay(retry, first - 1, run.run_id, ipath), began)
        record = run.record
        once = not (rt.spec.idempotent or rt.runs_chain)  # its start must be sealed before it acts
        defer = run.defer
        for attempt in range(first, tries + 1):
            if once:
                record(StepStarted(ipath, name, attempt, params, tries))
                run.commit()
            else:  # lost in a crash, it only makes the step run again: it may share a later write
                defer()
                record(StepStarted(ipath, name, attempt, params, tries))
            start = perf()
            result, error = await self.execute(node, rt, scope, ipath, params, attempt, start)
            if error is None:
                duration = round((perf() - start) * 1000, 3)
                try:
                    if not once:
                        defer()
                    record(StepFinished(ipath, name, "ok", result, None, duration, attempt))
                except TypeError as exc:  # a value the encoder refuses: the result is at fault, not the run
                    error = error_of(RESULT, f"{name} returned a result that cannot be written as JSON: {exc}")
                else:
                    scope.record(node.path, name, node.id, Rec("ok", result, None, params, duration))
                    return result
            self.finish(node, scope, ipath, params, start, attempt, error)
            if tries_again(retry, attempt, error):  # resume asks the same (replay.py)
                await asyncio.sleep(retry_delay(retry, attempt, run.run_id, ipath))
                continue
            raise StepFailed(ipath, name, error)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def execute(self, node: "GraphNode", rt: EventRuntime, scope: Scope, ipath: str, params: dict[str, Any],
                      attempt: int, start: float) -> tuple[Any, dict[str, Any] | None]:
        """One attempt through the executor: (result, None), or (None, the error)."""
        name = rt.spec.name
        deadline = None
        watch = Watch()  # its deadlines for the loop watchdog; whether the call had to be abandoned
        limits = LIMIT_DEADLINES.get()
        try:
            # the tool gets its own copy: what it does to its params changes no recorded value
            if node.timeout is not None:
                deadline = asyncio.timeout(node.timeout)
                async with deadline:
                    watch.until(deadline.when(), limits)
                    result = await self.executor.call(rt, copy_json(params), ipath, attempt, watch)
            else:
                if limits:
                    watch.until(None, limits)
                if rt.direct and self.local:  # the common case, without the detour through the executor
                    result = await guarded(rt.func(**copy_json(params)), watch)  # type: ignore[misc]
                else:
                    result = await self.executor.call(rt, copy_json(params), ipath, attempt, watch)
            if rt.check_result is None and is_plain_json(result, tuples=False):
                return result, None
            result, problem = self.check_result(rt, result)
            return result, None if problem is None else error_of(RESULT, problem)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling() == 0:  # the tool raised it: not a cancellation
                return None, tool_failure(self.run, ipath, exc)
            self.run.record(StepFinished(ipath, name, CANCELLED, None, error_of(
                CANCELLED, "cancelled: another branch failed or the run stopped" + abandoned_text(name, watch),
                **_abandoned(watch)), ms_since(start), attempt))
            scope.record(node.path, name, node.id, Rec("cancelled", None, None, params, ms_since(start)))
            raise
        except TimeoutError as exc:
            if isinstance(exc, LoopTimeout) and node.timeout is not None:
                return None, error_of(TIMEOUT, f"{name} took longer than its timeout ({seconds(node.timeout)}); "
                                      "it kept the event loop busy and was interrupted")
            if deadline is not None and deadline.expired():
                return None, error_of(TIMEOUT, f"{name} took longer than its timeout ({seconds(node.timeout or 0)})"
                                      + abandoned_text(name, watch), **_abandoned(watch))
            return None, tool_failure(self.run, ipath, exc)  # raised by the tool itself (a socket timeout...)
        except LimitExceeded as exc:
            self.finish(node, scope, ipath, params, start, attempt, error_of(LIMIT, exc.message))
            raise
        except (ResumeBlocked, RunWaiting):
            raise  # the step stays open: a resume (--rerun/--skip; its wait settled) re-enters it
        except ChainFailed as exc:  # a sub-chain failed: not retried (its own steps retry)
            self.finish(node, scope, ipath, params, start, attempt, exc.error)
            raise StepFailed(ipath, name, exc.error) from None
        except (KeyboardInterrupt, SystemExit) as exc:
            if stops_the_process(exc):  # Ctrl-C, or a signal handler of the process: not the tool's doing
                raise
            return None, tool_failure(self.run, ipath, exc)  # the tool's own: its failure, like any other
        except ToolFailed as exc:  # failed on a Temporal worker, which made the error: kept as it is
            return None, error_of(exc.kind, exc.message)
        except StepError as exc:  # the tool's own error type (chainlang.StepError)
            return None, error_of_step_error(exc)
        except BaseException as exc:  # any other exception of a tool is its failure, not the run's end
            return None, tool_failure(self.run, ipath, exc)

    @staticmethod
    def check_result(rt: EventRuntime, result: Any) -> tuple[Any, str | None]:
        """The result as recorded (tuples become lists, as in the transcript), and what is
        wrong with it, if anything."""
        if not is_plain_json(result, tuples=False):
            found = find_non_json(result, [])
            if found is not None:
                where, why = found
                at = "".join(f"[{p!r}]" for p in where)
                return None, f"{rt.spec.name} returned a value that is not JSON: result{at} {why}"
            result = copy_json(result)  # JSON with tuples in it
        if rt.check_result is not None:
            problems = rt.check_result(result)
            if problems:
                return None, (f"{rt.spec.name} returned a result that does not match its result schema: "
                              + "; ".join(problems[:3]))
        return result, None

    # -- recording the ways a step ends

    def finish(self, node: "GraphNode", scope: Scope, ipath: str, params: Any, start: float, attempt: int,
               error: dict[str, Any] | None) -> None:
        """A failed attempt (an `ok` one is recorded inline, on the hot path)."""
        duration = ms_since(start)
        status: StepStatus = OK if error is None else FAILED
        self.run.record(StepFinished(ipath, node.event or "", status, None, error, duration, attempt))
        scope.record(node.path, node.event, node.id, Rec(status, None, error, params, duration))

    def replayed(self, node: "GraphNode", scope: Scope, ipath: str, done: StepFinished) -> None:
        """On resume: a step that finished before; its recorded outcome is used."""
        replay = self.run.replay
        started = replay.started.get(ipath) if replay else None
        params = started.params if started else None
        rec = Rec(done.status, done.result, done.error, params, done.duration_ms)
        if started is not None and started.max_attempts is not None:  # it reached its tool: an executed step
            self.run.steps_run += 1
        scope.record(node.path, node.event, node.id, rec)
        if done.broke:
            raise ChainBroken(ipath, f"the decide model answered break at step {ipath} ({node.event}): "
                                     f"{done.reason or ''}")
        if rec.status == "failed":
            raise StepFailed(ipath, node.event, rec.error or error_of(FAILED, "failed"))

    def fail_early(self, node: "GraphNode", scope: Scope, ipath: str, error: dict[str, Any],
                   params: Any = None, max_attempts: int | None = None) -> NoReturn:
        """A failure before the event was called (not allowed, params, decide): recorded
        as one attempt (`max_attempts`: of the call, for a refusal an engine may make in it)."""
        event = node.event or ""
        self.run.record(StepStarted(ipath, event, 1, params, max_attempts))
        self.run.record(StepFinished(ipath, event, "failed", None, error, 0, 1))
        scope.record(node.path, node.event, node.id, Rec("failed", None, error, params))
        raise StepFailed(ipath, node.event, error)

    def finish_unstarted(self, node: "GraphNode", scope: Scope, ipath: str, params: Any, status: StepStatus, why: str,
                         broke: bool = False, error: dict[str, Any] | None = None) -> None:
        event = node.event or ""
        self.run.record(StepStarted(ipath, event, 1, params))
        self.run.record(StepFinished(ipath, event, status, None, error, 0, 1, why, True if broke else None))
        scope.record(node.path, node.event, node.id, Rec(status, None, error, params))

    # -- the decide model (§5)

    async def decide(self, node: "GraphNode", rt: EventRuntime, ipath: str, params: dict[str, Any],
                     problems: list[str], scope: Scope) -> "Decision":
        from chainlang.runtime.decide import DecideError, DecideRequest, Decision, DecisionNeeded
        from chainlang.runtime.decide.keep import applied

        run = self.run
        name = rt.spec.name
        recorded = run.replay.decisions.get(ipath) if run.replay else None
        if recorded:
            rec = recorded.pop(0)
            if rec.action == "fail":  # nothing could decide: the step failed, and fails again
                self.fail_early(node, scope, ipath, error_of(DECIDE, rec.reason), params)
            try:
                return Decision.from_record(rec.answer())
            except ValueError as exc:
                self.fail_early(node, scope, ipath, error_of(DECIDE, f"the recorded decision cannot be used: {exc}"),
                                params)
        condition = node.decide
        decision: Decision | None = None
        asked: dict[str, Any] = {"condition": condition, "errors": problems, "params": params}
        if condition is not None and node.decide_expr is not None:
            try:
                holds = truthy(node.decide_expr(scope))
            except ExprEvalError as exc:
                self.fail_early(node, scope, ipath, error_of(
                    EXPRESSION, f"decide `{short(condition, 80)}` (line {node.line}): {exc.message}"), params)
            if not holds:
                decision = Decision("skip", None, f"condition `{short(condition, 80)}` is false", "embedded")
            elif not problems:
                decision = Decision("continue", params, f"condition `{short(condition, 80)}` is true", "embedded")
            condition = None  # judged here; what is left is repairing the params
        if decision is None:
            request = DecideRequest(
                event=name, description=rt.spec.description, params_schema=rt.spec.params_schema,
                params=params, errors=problems, condition=condition,
                context={"inputs": scope.inputs, "run": run.facts, **scope.visible()} if condition else {},
                # its own key: the step's event may ask a model too (agent.chain), and a resume
                # replays the decision from its decide record, not from this call
                models=run.models.for_step(ipath + "#decide", name) if run.models is not None else None,
            )
            try:
                # a model's continue keeps valid params: a condition changes none, a repair only those in error
                decision = applied(request, await run.decider.decide(request))
            except DecisionNeeded as exc:
                run.record(Decide(ipath, name, asked, "fail", str(exc), "fallback"))
                self.fail_early(node, scope, ipath, error_of(DECIDE, str(exc)), params)
            except DecideError as exc:  # e.g. the model's API key variable is not set
                self.fail_early(node, scope, ipath, error_of(DECIDE, f"{name}: the decide model cannot be "
                                                                       f"used: {exc}"), params)
        answer = decision.to_record()
        run.record(Decide(ipath, name, asked, str(answer["action"]), str(answer.get("reason", "")),
                          str(answer.get("source", "")), answer.get("params")))
        return decision


def _abandoned(watch: Watch) -> dict[str, Any]:
    return {"abandoned": True} if watch.abandoned else {}


__all__ = ["MAX_RETRY_DELAY", "StepPipeline", "retry_delay"]
