"""Tools for tests/test_loop_watchdog.py: code that holds the event loop.

`wd.sleepy` and `wd.spin` are async tools that never await (one sleeps in a system call,
one computes in Python); `wd.mostly` is a sync tool that is quick, except when asked to
hang; `wd.mostly_blocking` is the same, declared `blocking=True`. Each sync tool records
which thread ran it, so a test can tell an inline call (the main thread) from a worker's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from chainlang import event

FOREVER = 3600.0  # seconds: far longer than any test waits


@event("wd.sleepy", description="An async tool that blocks the loop in time.sleep", idempotent=True)
async def sleepy(seconds: float = FOREVER) -> str:
    time.sleep(seconds)
    return "woke"


@event("wd.spin", description="An async tool that computes without ever awaiting", idempotent=True)
async def spin(seconds: float = FOREVER) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


@event("wd.mostly", description="A sync tool that is quick unless asked to hang", idempotent=True)
def mostly(n: int, hang: int = 0, ctx: Any = None) -> dict[str, Any]:
    if n == hang:
        time.sleep(FOREVER)
    ctx.progress(f"item {n}", 0.5)
    return {"n": n, "thread": threading.current_thread().name}


@event("wd.mostly_blocking", description="wd.mostly, declared blocking=True", idempotent=True, blocking=True)
def mostly_blocking(n: int, hang: int = 0) -> dict[str, Any]:
    if n == hang:
        time.sleep(FOREVER)
    return {"n": n, "thread": threading.current_thread().name}


@event("wd.own_loop", description="A sync tool that runs an event loop of its own", idempotent=True)
def own_loop(n: int) -> dict[str, Any]:
    async def twice() -> int:
        await asyncio.sleep(0)
        return n * 2

    return {"n": asyncio.run(twice()), "thread": threading.current_thread().name}
