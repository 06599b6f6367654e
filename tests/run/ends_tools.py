"""Tools that misbehave, for the tests of runs that always end (tests/test_run_ends.py).

Each writes its pid to a marker file in the run's state directory when it starts (so a
test knows the step is under way) and logs its call in calls.jsonl. When the marker is
there already (a resumed attempt), it returns at once; otherwise it misbehaves: it never
returns, in a worker thread or on the event loop, or it ignores cancellation.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from chainlang import event

FOREVER = 3600.0  # seconds: far longer than any test waits


def _log(ctx: Any, entry: dict[str, Any]) -> None:
    path = Path(ctx.state_dir) / "calls.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": ctx.step, "event": ctx.event, "attempt": ctx.attempt, **entry}) + "\n")


def _first(ctx: Any, name: str) -> bool:
    """Log the call; write the marker (whole, in one step). True the first time."""
    marker = Path(ctx.state_dir) / name
    first = not marker.exists()
    _log(ctx, {"marker": name, "first": first, "thread": threading.current_thread().name})
    marker.parent.mkdir(parents=True, exist_ok=True)
    partial = marker.with_name(name + ".partial")
    partial.write_text(str(os.getpid()), encoding="utf-8")
    os.replace(partial, marker)
    return first


@event("ends.blocking", description="A blocking=True tool that never returns", blocking=True, idempotent=True)
def blocking(name: str = "blocking.pid", ctx: Any = None) -> str:
    if _first(ctx, name):
        time.sleep(FOREVER)
    return "resumed"


@event("ends.sync", description="A plain sync tool that sleeps forever", idempotent=True)
def sync(name: str = "sync.pid", ctx: Any = None) -> str:
    if _first(ctx, name):
        time.sleep(FOREVER)
    return "resumed"


@event("ends.deaf", description="An async tool that swallows every cancellation", idempotent=True)
async def deaf(name: str = "deaf.pid", ctx: Any = None) -> str:
    if _first(ctx, name):
        while True:
            try:
                await asyncio.sleep(FOREVER)
            except asyncio.CancelledError:
                _log(ctx, {"swallowed": True})
    return "resumed"


@event("ends.slow_cleanup", description="An async tool that takes a little time to stop once cancelled",
       idempotent=True)
async def slow_cleanup(cleanup: float = 0.2, hold: bool = False, ctx: Any = None) -> str:
    try:
        await asyncio.sleep(FOREVER)
    except asyncio.CancelledError:
        if hold:  # cleaning up without an await: it holds the event loop meanwhile
            time.sleep(cleanup)
        else:
            await asyncio.sleep(cleanup)  # within the grace period: it ends by itself
        _log(ctx, {"cleaned_up": True})
        raise
    return "never"


@event("ends.late", description="A sync tool that sleeps, then reports progress and reads the clock", idempotent=True)
def late(seconds: float, ctx: Any = None) -> str:
    time.sleep(seconds)
    ctx.progress("late")
    try:
        ctx.now()
    except Exception as exc:  # CallAbandoned once its step stopped waiting
        _log(ctx, {"now": type(exc).__name__})
    else:
        _log(ctx, {"now": "ok"})
    return "late"


@event("ends.threaded", description="A sync tool that uses its ctx from its thread", idempotent=True)
def threaded(ctx: Any = None) -> dict[str, Any]:
    ctx.progress("half", 0.5)
    ctx.notify("hello from a thread")
    return {"now": ctx.now().isoformat(), "thread": threading.current_thread().name}


@event("ends.offload", description="An async tool that waits on asyncio.to_thread for a call that never returns",
       idempotent=True)
async def offload() -> str:
    await asyncio.to_thread(time.sleep, FOREVER)  # a thread of the loop's default executor, not a daemon
    return "never"


_KEPT: list[Any] = []


async def _deaf_forever() -> None:
    while True:
        try:
            await asyncio.sleep(FOREVER)
        except asyncio.CancelledError:
            pass


@event("ends.spawn", description="An async tool that leaves a task running that ignores cancellation",
       idempotent=True)
async def spawn() -> str:
    _KEPT.append(asyncio.get_running_loop().create_task(_deaf_forever()))
    return "spawned"


@event("ends.own_timeout", description="An async tool whose own asyncio.timeout fires, then goes on a while",
       idempotent=True)
async def own_timeout(then: float = 1.5) -> str:
    try:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(FOREVER)
    except TimeoutError:
        pass
    await asyncio.sleep(then)  # longer than the grace period: its own cancellation was not the step's
    return "done"


@event("ends.swallow_return", description="An async tool that swallows its cancellation and returns", idempotent=True)
async def swallow_return(ctx: Any = None) -> str:
    try:
        await asyncio.sleep(FOREVER)
    except asyncio.CancelledError:
        _log(ctx, {"swallowed": True})
    return "swallowed"


@event("ends.leak", description="A sync tool that leaves a thread behind that uses its ctx later", idempotent=True)
def leak(after: float = 0.3, ctx: Any = None) -> str:
    def later() -> None:
        time.sleep(after)
        ctx.progress("after the step")
        try:
            ctx.now()
        except Exception as exc:
            _log(ctx, {"now": type(exc).__name__})
        else:
            _log(ctx, {"now": "ok"})

    threading.Thread(target=later, daemon=True).start()
    return "left"
