"""Tools that call their ctx wrongly, or rightly with keywords, in each way a tool runs: a sync
tool in a worker thread (blocking=True keeps it there), a sync tool that may run inline, and
an async tool (tests/test_tool_context_misuse.py). CALL picks the call: the tools read it
from the step's `call` param."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chainlang import RunContext, event


def _use(ctx: RunContext, call: str) -> dict[str, Any]:
    if call == "progress-keywords":
        ctx.progress("half", fraction=0.5)
        ctx.progress(message="most", fraction=0.9)
    elif call == "progress-three":
        ctx.progress(1, 2, "x")
    elif call == "notify-level":
        ctx.notify("done", level="warning")
    elif call == "notify-none":
        ctx.notify()
    return {"call": call}


@event("misuse.threaded", blocking=True, description="Calls its ctx from a worker thread, late.")
def threaded(ctx: RunContext, call: str) -> dict[str, Any]:
    time.sleep(0.35)  # past the first 0.3 s: the loop no longer spins on this call's channel
    return _use(ctx, call)


@event("misuse.quick", description="Calls its ctx at once (inline once proven quick).")
def quick(ctx: RunContext, call: str) -> dict[str, Any]:
    return _use(ctx, call)


@event("misuse.awaited", description="Calls its ctx from a coroutine.")
async def awaited(ctx: RunContext, call: str) -> dict[str, Any]:
    await asyncio.sleep(0)
    return _use(ctx, call)
