"""Waits that survive the process: a `repeat`'s `delay` between passes (runtime/loops.py) and
`retry`'s wait between attempts (runtime/step.py), on the embedded engine.

A wait's start is in the transcript, so a resumed run (runtime/resume.py reads it back into
a Replay) waits only what is left of a wait the interruption cut short, and not at all once
the whole wait has passed, however long the process was gone. What is left is measured
from the `ts` of the record that marks the start, by the run host's clock: the machine's
wall clock, the one that stamps every record (a `--now` pin fixes what steps read as now,
not how long a wait lasts).

- `repeat`: the start of its delay is a `clock` record with the pass's path (`3#2`),
  written when the wait begins (loops.durable_delay).
- `retry`: the wait after a failed attempt begins when that attempt's `step_finished` is
  written, so it needs no record of its own: a live run records exactly what it did before.

On Temporal `asyncio.sleep` in the workflow is a timer in the workflow's history, and a run
is replayed by Temporal, never resumed from a transcript (its RunState has no replay).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["time_left", "wait_left"]


def time_left(wait: float, began: str | None) -> float:
    """Seconds left of a wait of `wait` seconds that began at `began` (a record's `ts`);
    the whole wait when its start is unknown, never less than 0."""
    from chainlang.journal.reader import ts_ms  # only a resumed run needs it (never a Temporal workflow)

    started_ms = ts_ms(began) if began is not None else None
    if started_ms is None:
        return wait
    passed = max(0.0, time.time() * 1000 - started_ms) / 1000  # a clock set back: nothing passed
    return max(0.0, wait - passed)


async def wait_left(wait: float, began: str | None) -> None:
    """Wait what is left of a wait of `wait` seconds that began at `began` (see time_left)."""
    await asyncio.sleep(time_left(wait, began))
