"""Quick sync tools, called on the loop thread instead of a worker thread.

Handing a call to a worker thread and back costs a few tens of microseconds (two thread
switches), far more than most sync tools take (a lookup, a format). So a sync tool that
has proven quick is called inline, on the loop thread, under the loop watchdog
(chainlang.runtime.watchdog): PROVEN calls in a row under QUICK seconds each, in worker
threads, make it inline; an inline call that takes QUICK or more sends it back to threads,
and it must then prove itself for four times as many calls. A tool declared
`blocking=True` always gets a thread.

Inline, the tool sees what it would see in a thread: no running event loop (it may call
`asyncio.run`), its own copy of the context variables. What differs: it holds the loop
while it runs (the reason for the proof), and a step's timeout interrupts it there (the
watchdog raises in it) instead of abandoning it in its thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import time
from asyncio import events
from typing import Any, Callable

from chainlang.runtime import watchdog

__all__ = ["PROVEN", "QUICK", "LoopTimeout", "call_inline", "inline_ok", "note_thread_call"]

#: seconds under which a sync tool's call counts as quick: CHAINLANG_INLINE_MS milliseconds
#: (default 1; 0 turns inline calls off)
QUICK = 0.001
#: quick calls in a row (in threads) before a sync tool is called inline
PROVEN = 3


class LoopTimeout(TimeoutError):
    """A step's own deadline passed while its tool held the event loop: the watchdog
    interrupted the tool."""


class _Pace:
    __slots__ = ("quick", "needed")

    def __init__(self) -> None:
        self.quick = 0  # quick calls in a row, in threads
        self.needed = PROVEN


_PACES: dict[Callable[..., Any], _Pace] = {}  # per tool function, for the life of the process


def _quick_from_env() -> float:
    text = os.environ.get("CHAINLANG_INLINE_MS", "").strip()
    try:
        value = float(text) if text else QUICK * 1000
        if not value >= 0:
            raise ValueError
    except ValueError:  # said once, where the person who set it looks (a setting of the process)
        import sys

        print(f"chainlang: warning: CHAINLANG_INLINE_MS={text!r} is not a number of milliseconds (0 or more); "
              f"using {QUICK * 1000:g}", file=sys.stderr)
        value = QUICK * 1000
    return value / 1000


QUICK = _quick_from_env()


def inline_ok(func: Callable[..., Any], blocking: bool) -> bool:
    """Whether this call of the sync tool `func` goes inline."""
    pace = _PACES.get(func)
    return (pace is not None and pace.quick >= pace.needed and not blocking and QUICK > 0
            and watchdog.available())


def note_thread_call(func: Callable[..., Any], seconds: float) -> None:
    """A call of `func` in a worker thread took `seconds`."""
    pace = _PACES.get(func)
    if pace is None:
        pace = _PACES[func] = _Pace()
    pace.quick = pace.quick + 1 if seconds < QUICK else 0


async def call_inline(func: Callable[..., Any], kwargs: dict[str, Any], deadline: float | None,
                      own: float | None) -> Any:
    """Call `func(**kwargs)` on the loop thread, watched until `deadline` (time.monotonic;
    None: no deadline). `own` is the step's own deadline: past it, LoopTimeout; past another
    (the run's limits.timeout), the cancellation that deadline brings is let in."""
    loop = events.get_running_loop()
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)  # the thread's current loop
    current = getattr(local, "_loop", None)
    token = watchdog.arm(deadline) if deadline is not None else 0
    events._set_running_loop(None)  # as in a thread: the tool may run a loop of its own
    start = time.perf_counter()
    try:
        try:
            return contextvars.copy_context().run(func, **kwargs)
        finally:
            watchdog.disarm(token)  # first: past it, the watchdog's signal raises nothing
            events._set_running_loop(loop)
            if local is not None and getattr(local, "_loop", None) is not current:  # asyncio.run in the tool
                asyncio.set_event_loop(current)
            # not quick after all (or interrupted at a deadline, however long it had): back to
            # threads, and four times as many quick calls there before it comes back
            if time.perf_counter() - start >= QUICK or sys.exc_info()[0] is watchdog.LoopBlocked:
                pace = _PACES[func]
                pace.quick, pace.needed = 0, pace.needed * 4
    except watchdog.LoopBlocked as exc:
        if own is not None and exc.deadline >= own:
            raise LoopTimeout() from None
        for _ in range(3):  # the run's deadline (limits.timeout): its timer runs after this task's next step,
            await asyncio.sleep(0)  # and its cancellation comes in here
        raise LoopTimeout() from None
