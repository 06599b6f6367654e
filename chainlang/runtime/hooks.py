"""Hooks at run time (LANGUAGE.md §6.1): firing, actions, modes, depth, and resume.

- `HookDispatch` is the interceptor through which a chain's steps fire hooks: `before` runs
  the matching `pre:` hooks in order (condition, then `cancel`, `set`, and an action that
  runs to completion), `after` the matching `post:` hooks (their actions start at once, as
  tasks of the run's `HookActions`).
- An action is a sub-chain of its hook (depth + 1, the allow lists in force, the hook's
  file's own), with the trigger's payload and `event` in scope; its steps are recorded
  under `STEP/hook:KEY/N` (`hook:KEY/N` for an emitted event).
- Every firing is recorded before its action starts (`hook_fired`) and ends with
  `hook_finished` or `hook_dropped`. On resume a firing that finished or was dropped is
  not run again; one that fired and did not finish runs again (the steps it finished are
  taken from the transcript); the rest is decided again from recorded data.
- `fire_external` fires the `post:` hooks of an event that came from outside (`emit`).
- `error:` hooks fire through `fire_post` too, when a step ends failed (runtime/error_hooks.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import truthy
from chainlang.journal.records import HookDropped, HookFinished, HookFired
from chainlang.runtime.interceptors import PassThrough, Refused, StepInfo
from chainlang.runtime.outcomes import LimitExceeded, ResumeBlocked, error_of, ms_since, perf, short
from chainlang.runtime.scope import Binder, HookContext, Scope
from chainlang.status import FAILED, OK, HookStatus

if TYPE_CHECKING:
    from chainlang.compile.hooks import CompiledHook, HookSet
    from chainlang.runtime.state import RunState
    from chainlang.runtime.walk import ChainRun


class HookDispatch(PassThrough):
    """The hooks in force around the steps of one chain run."""

    __slots__ = ("chain", "hooks")

    def __init__(self, chain: "ChainRun") -> None:
        self.chain = chain
        assert chain.hooks is not None
        self.hooks: "HookSet" = chain.hooks

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]:
        hooks = self.hooks.matching("pre", step.event)
        if not hooks:
            return params
        return await fire_pre(self.chain, hooks, step, params)

    async def after(self, step: StepInfo, params: dict[str, Any], result: Any) -> None:
        hooks = self.hooks.matching("post", step.event)
        if hooks:
            fire_post(self.chain, hooks, step.event, step.path, params, result)


# -- firing

async def fire_pre(chain: "ChainRun", hooks: tuple["CompiledHook", ...], step: StepInfo,
                   params: dict[str, Any]) -> dict[str, Any]:
    """The `pre:` hooks of one step, in order: the params to validate, or Refused."""
    for hook in hooks:
        context = HookContext(params, {"name": step.event, "params": params, "payload": params}, hook.captured)
        scope = hook_scope(chain, hook, context)
        held = holds(chain, hook, scope, step.event, step.path, "pre")
        if held is not True:
            if held is not False and hook.on_error == "fail":
                raise Refused("failed", held)
            continue
        if not may_fire(chain, hook, step.event, step.path, "pre"):
            continue
        fired(chain.run, hook, "pre", step.event, step.path)
        if hook.cancel:
            raise Refused("cancelled", error_of("cancelled", f"cancelled by hook {hook.key} ({hook.trigger})",
                                                hook=hook.key))
        if hook.set:
            try:
                params = {**params, **{name: value.render(scope) for name, value in hook.set.items()}}
                # its action sees the params it set
                context = HookContext(params, {"name": step.event, "params": params, "payload": params},
                                      hook.captured)
            except ExprEvalError as exc:
                problem = error_of("hook", f"hook {hook.key}: set (line {hook.line}): {exc.message}", hook=hook.key)
                finished(chain.run, hook, step.path, "failed", problem, 0.0)
                if hook.on_error == "fail":
                    raise Refused("failed", problem) from None
                continue
        if hook.action is not None:
            status, error = await run_firing(chain, hook, context, step.path)
            if status == "failed" and hook.on_error == "fail":
                raise Refused("failed", error_of("hook", f"pre hook {hook.key} failed: "
                                                         f"{(error or {}).get('message', '')}", hook=hook.key))
    return params


def fire_post(chain: "ChainRun", hooks: tuple["CompiledHook", ...], event: str, path: str | None,
              params: Any, result: Any, *, payload: Any = None, external: bool = False,
              event_data: dict[str, Any] | None = None, when: str = "post") -> None:
    """The `post:` hooks of an event that ended ok: each whose condition holds starts its
    action beside the chain (as its mode allows). The `error:` hooks of a failed step fire
    the same way (`when` "error", with their own `payload` and `event_data`:
    runtime/error_hooks.py)."""
    run = chain.run
    actions = run.actions
    if actions is None:  # a run without post hooks in force: the runner made none
        raise RuntimeError(f"{when} hooks fired in a run that has no HookActions")
    if event_data is None:  # error: hooks give theirs whole
        if external:
            event_data = {"name": event, "params": payload, "result": payload, "data": payload, "payload": payload}
        else:
            payload = result
            event_data = {"name": event, "params": params, "result": result, "payload": result}
    shared = HookContext(payload, event_data)
    replay = run.replay
    for hook in hooks:
        context = HookContext(payload, event_data, hook.captured) if hook.captured else shared
        key = (path or "", hook.key)
        if replay is not None and key in replay.hooks_ended:
            continue  # it finished, or was dropped, before the interruption
        again = replay is not None and key in replay.hooks_fired
        if not again:
            scope = hook_scope(chain, hook, context)
            held = holds(chain, hook, scope, event, path, when)
            if held is not True:
                continue
            if not may_fire(chain, hook, event, path, when):
                continue
            if hook.mode == "single" and actions.busy(hook.key):
                dropped(run, hook, when, event, path, "single",
                        f"hook {hook.key} (mode single) is still running an earlier action")
                continue
            if hook.mode == "restart":
                actions.restart(hook.key)
            fired(run, hook, when, event, path)
        if hook.action is not None:
            actions.start(hook, chain, context, path, event)


def holds(chain: "ChainRun", hook: "CompiledHook", scope: Scope, event: str, path: str | None,
          when: str) -> bool | dict[str, Any]:
    """Whether the hook's condition holds: True, False, or the error of a condition that
    could not be evaluated (recorded as a failed firing)."""
    if hook.condition is None:
        return True
    try:
        return truthy(hook.condition(scope))
    except ExprEvalError as exc:
        error = error_of("hook", f"hook {hook.key}: condition `{short(hook.condition_text or '', 80)}` "
                                 f"(line {hook.line}): {exc.message}", hook=hook.key)
        fired(chain.run, hook, when, event, path)
        finished(chain.run, hook, path, "failed", error, 0.0)
        return error


def may_fire(chain: "ChainRun", hook: "CompiledHook", event: str, path: str | None, when: str) -> bool:
    """Depth (§6.1): beyond the run's max_depth, or re-entering itself more than its own
    max_depth, a hook does not fire; that is recorded, not an error."""
    if chain.depth + 1 > chain.depth_limit:
        dropped(chain.run, hook, when, event, path, "depth",
                f"its action would run at depth {chain.depth + 1}, beyond max_depth = {chain.depth_limit}")
        return False
    if hook.max_depth is not None and chain.stack.count(hook.key) >= hook.max_depth:
        dropped(chain.run, hook, when, event, path, "depth",
                f"it would re-enter itself more than its max_depth = {hook.max_depth} times")
        return False
    return True


async def run_firing(chain: "ChainRun", hook: "CompiledHook", context: HookContext,
                     path: str | None) -> tuple[HookStatus, dict[str, Any] | None]:
    """Run a hook's action to its end and record how it ended (a resume takes the end of a
    firing that finished from the transcript)."""
    run = chain.run
    ended = run.replay.hooks_finished.get((path or "", hook.key)) if run.replay is not None else None
    if ended is not None:
        return ended.status, ended.error
    start = perf()
    status, error = await run_action(chain, hook, context, path)
    finished(run, hook, path, status, error, ms_since(start))
    return status, error


async def run_action(chain: "ChainRun", hook: "CompiledHook", context: HookContext,
                     path: str | None) -> tuple[HookStatus, dict[str, Any] | None]:
    from chainlang.runtime.walk import ChainRun

    assert hook.action is not None
    prefix = f"{path}/hook:{hook.key}/" if path else f"hook:{hook.key}/"
    sub = ChainRun(chain.run, hook.action, chain.hook_inputs.get(id(hook.bindings), {}), depth=chain.depth + 1,
                   prefix=prefix, allow=chain.allow, depth_limit=chain.depth_limit, strip=hook.strip, hook=context,
                   hooks=chain.hooks, stack=chain.stack + (hook.key,), hook_inputs=chain.hook_inputs)
    status, _outputs, error = await sub.execute()
    if status == FAILED:
        return FAILED, error
    return OK, None  # ok, or a break: it ends the action cleanly


def hook_scope(chain: "ChainRun", hook: "CompiledHook", context: HookContext) -> Scope:
    """Where a hook's condition and `set` are evaluated: its payload, `event`, the inputs of
    the chain that declares it (a chain's own hooks), no steps."""
    run = chain.run
    binder = run.binders.get(id(hook.bindings))
    if binder is None:
        binder = run.binders[id(hook.bindings)] = Binder(hook.bindings)
    return Scope(binder, chain.hook_inputs.get(id(hook.bindings), {}), run.facts, hook=context)


# -- records

def fired(run: "RunState", hook: "CompiledHook", when: str, event: str, path: str | None) -> None:
    if run.replay is not None and (path or "", hook.key) in run.replay.hooks_fired:
        return
    run.record(HookFired(hook.key, when, event, path, hook.trigger))


def finished(run: "RunState", hook: "CompiledHook", path: str | None, status: HookStatus, error: dict[str, Any] | None,
             duration: float) -> None:
    run.record(HookFinished(hook.key, status, error, duration, path))


def dropped(run: "RunState", hook: "CompiledHook", when: str, event: str, path: str | None, reason: str,
            message: str) -> None:
    if run.replay is not None and (path or "", hook.key) in run.replay.hooks_ended:
        return
    run.record(HookDropped(hook.key, when, event, reason, message, path))


# -- post-hook actions beside the chain

@dataclass(eq=False)
class Firing:
    """One hook about to fire for an event at a step."""
    hook: "CompiledHook"
    path: str | None
    event: str
    task: "asyncio.Task[None] | None" = None
    restarted: bool = False  # mode restart cancelled it (recorded dropped once it has ended)


@dataclass
class HookActions:
    """The post-hook actions of one run: started at once, gated by their hook's mode, and
    waited for before the run ends. An action that fails with `on_error: fail`, or that
    hits a limit of the run, stops the chain (`stop` says why)."""

    run: "RunState"
    firings: set[Firing] = field(default_factory=set)
    gates: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    main: "asyncio.Task[Any] | None" = None  # the chain's task, cancelled when an action must stop it
    stop: BaseException | dict[str, Any] | None = None

    def busy(self, key: str) -> bool:
        return any(f.hook.key == key and not f.restarted for f in self.firings)

    def restart(self, key: str) -> None:
        """Mode restart: the running actions of the hook are cancelled and recorded dropped."""
        for firing in list(self.firings):
            if firing.hook.key == key and not firing.restarted and firing.task is not None:
                firing.restarted = True
                firing.task.cancel()

    def start(self, hook: "CompiledHook", chain: "ChainRun", context: HookContext, path: str | None,
              event: str) -> None:
        firing = Firing(hook, path, event)
        self.firings.add(firing)
        firing.task = asyncio.get_running_loop().create_task(self._run(firing, chain, context))
        # also when the task is cancelled before it ever ran (mode restart): it leaves the set
        firing.task.add_done_callback(lambda _task: self._ended(firing))

    def _ended(self, firing: Firing) -> None:
        if firing in self.firings:
            self.firings.discard(firing)
            if firing.restarted:
                hook = firing.hook
                dropped(self.run, hook, hook.phase, firing.event, firing.path, "restart",
                        f"hook {hook.key} (mode restart) fired again: this action was cancelled")

    def _gate(self, hook: "CompiledHook") -> asyncio.Semaphore | None:
        if hook.mode == "queued" or (hook.mode == "parallel" and hook.max is not None):
            gate = self.gates.get(hook.key)
            if gate is None:
                gate = self.gates[hook.key] = asyncio.Semaphore(1 if hook.mode == "queued" else hook.max or 1)
            return gate
        return None

    async def _run(self, firing: Firing, chain: "ChainRun", context: HookContext) -> None:
        hook = firing.hook
        try:
            gate = self._gate(hook)
            if gate is not None:
                async with gate:
                    status, error = await run_firing(chain, hook, context, firing.path)
            else:
                status, error = await run_firing(chain, hook, context, firing.path)
            if status == "failed" and hook.on_error == "fail":
                self.halt(error_of("hook", f"{hook.phase} hook {hook.key} (after step {firing.path or firing.event}) "
                                           f"failed: {(error or {}).get('message', '')}", hook=hook.key,
                                   **({"step": firing.path} if firing.path else {})))
        except asyncio.CancelledError:
            if firing.restarted:
                return  # recorded dropped when the task has ended (_ended)
            raise  # the run is being interrupted: no end is recorded, so a resume runs it again
        except (LimitExceeded, ResumeBlocked) as exc:
            self.halt(exc)
        except Exception as exc:  # a bug in the engine: the firing fails, visibly, and the run with it
            error = error_of("internal", f"hook {hook.key}: {type(exc).__name__}: {exc}", hook=hook.key)
            finished(self.run, hook, firing.path, "failed", error, 0.0)
            self.halt(error)

    def halt(self, why: BaseException | dict[str, Any]) -> None:
        if self.stop is None:
            self.stop = why
        if self.main is not None and not self.main.done():
            self.main.cancel()

    async def drain(self) -> None:
        """Wait until every action started (also by other actions) has ended."""
        while self.firings:
            pending = [f.task for f in self.firings if f.task is not None and not f.task.done()]
            if pending:
                await asyncio.wait(pending)
            else:
                await asyncio.sleep(0)  # the ended tasks' callbacks take them out of the set

    async def cancel_all(self) -> None:
        tasks = [f.task for f in self.firings if f.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["HookActions", "HookDispatch", "fire_post", "fire_pre"]
