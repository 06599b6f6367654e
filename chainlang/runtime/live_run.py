"""The run as it stands, for the references that read it when they are evaluated:
`{run.status}`, `{run.duration_ms}`, `{run.failures}` (LANGUAGE.md §2), and what a
`finally` needs to know about how its block is ending (runtime/flow.py).

- `run.status`: `ok` while nothing is going wrong; inside a `catch`, `failed`; inside a
  `finally`, how its block ended: `ok`, `failed`, `broken` (on_error: break), or `limit`
  (limits.timeout or max_steps stopped the run). A ContextVar, so parallel branches and
  hook actions see the value of the point that started them.
- `run.duration_ms`: the run's duration so far, as `run_finished` counts it (since the run,
  or this resume of it, opened; in workflow time on Temporal).
- `run.failures`: each step whose last attempt failed so far, in the order they failed:
  `{path, event, error}` (the instance path, `3.try.2`, `4/1`, `2[0]`); a step retried into
  success is not one; a `fail` step is one (its event is null). Read from the records the
  run writes (and, on resume, from those the transcript had), so both engines agree.

`drive` (runtime/host.py) opens one `LiveRun` per run; outside a run (a unit test of the
evaluator) the references read `ok`, 0 and [].
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable

from chainlang.expr.values import walk_path
from chainlang.journal.records import StepFinished

if TYPE_CHECKING:
    from chainlang.runtime.host import OpenRun
    from chainlang.runtime.scope import Scope

#: what a `finally` that runs after a limit gets, shared by every finally that limit unwinds:
#: so a finally cannot hang a run that is over its limits (past it, it is cancelled and the run
#: ends with the limit)
FINALLY_GRACE_SECONDS = 30.0
FINALLY_GRACE_STEPS = 100


class LiveRun:
    """One run's live facts (see the module docstring)."""

    def __init__(self, run: "OpenRun") -> None:
        self.run = run
        self.host_task = asyncio.current_task()  # the task an interruption cancels (the CLI's, the workflow's)
        self.failures: dict[str, dict[str, Any]] = {}
        self.grace_until: float | None = None  # loop time: the end of the finally grace after a limit
        replay = run.state.replay
        if replay is not None:  # what failed before the interruption
            for path, done in replay.finished.items():
                if done.status == "failed":
                    self.failures[path] = {"path": path, "event": done.event or None, "error": done.error}

    def observing(self, record: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`record`, noting each step that ends failed (and forgetting one retried into success)."""
        failures = self.failures

        def observe(rec: Any) -> Any:
            if type(rec) is StepFinished:
                if rec.status == "failed":
                    failures.pop(rec.step, None)  # its latest failure last
                    failures[rec.step] = {"path": rec.step, "event": rec.event or None, "error": rec.error}
                elif rec.status == "ok" and rec.step in failures:
                    del failures[rec.step]
            return record(rec)

        return observe

    def failed(self, path: str, event: str | None, error: dict[str, Any]) -> None:
        """A failure no step record tells (a `fail` step)."""
        self.failures.pop(path, None)
        self.failures[path] = {"path": path, "event": event, "error": error}

    def interrupted(self) -> bool:
        """Whether the run itself is being stopped from outside (a signal, a cancelled
        workflow): then a finally waits for the resume, instead of running now."""
        task = self.host_task
        return task is not None and task.cancelling() > 0

    def start_grace(self) -> float:
        """The finally grace after a limit (started by the first finally that needs it):
        its deadline in loop time; the run may execute FINALLY_GRACE_STEPS more steps."""
        if self.grace_until is None:
            self.grace_until = asyncio.get_running_loop().time() + FINALLY_GRACE_SECONDS
            state = self.run.state
            state.max_steps = max(state.max_steps, state.steps_run) + FINALLY_GRACE_STEPS
        return self.grace_until


LIVE: ContextVar[LiveRun | None] = ContextVar("chainlang_live_run", default=None)
#: how the run stands where this is read (see the module docstring)
STANDING: ContextVar[str] = ContextVar("chainlang_run_standing", default="ok")
#: the deadlines of limits.timeout of the chains being run here (the run's, a sub-chain's)
LIMIT_DEADLINES: ContextVar[tuple[asyncio.Timeout, ...]] = ContextVar("chainlang_limit_deadlines", default=())


def enter(run: "OpenRun") -> Any:
    """Open the live facts of `run` (in `drive`, before its body starts): returns the token
    that `leave` takes."""
    live = LiveRun(run)
    run.state.record = live.observing(run.state.record)
    return LIVE.set(live)


def leave(token: Any) -> None:
    LIVE.reset(token)


def current() -> LiveRun | None:
    return LIVE.get()


def limit_expired() -> bool:
    """Whether a limits.timeout of a chain being run here has fired."""
    return any(deadline.expired() for deadline in LIMIT_DEADLINES.get())


def status() -> str:
    return STANDING.get()


def duration_ms() -> float:
    live = LIVE.get()
    return live.run.elapsed() if live is not None else 0.0


def failures() -> list[dict[str, Any]]:
    live = LIVE.get()
    return [dict(f) for f in live.failures.values()] if live is not None else []


_READERS: dict[str, Callable[[], Any]] = {"status": status, "duration_ms": duration_ms, "failures": failures}


def live_accessor(name: str, rest: tuple[Any, ...]) -> Callable[["Scope"], Any]:
    """How a `{run.NAME...}` reference of a live fact is read (runtime/scope.py)."""
    read = _READERS[name]
    if not rest:
        return lambda scope: read()
    return lambda scope: walk_path(read(), rest)


__all__ = ["FINALLY_GRACE_SECONDS", "FINALLY_GRACE_STEPS", "LIMIT_DEADLINES", "LIVE", "STANDING", "LiveRun",
           "current", "enter", "leave", "limit_expired", "live_accessor"]
