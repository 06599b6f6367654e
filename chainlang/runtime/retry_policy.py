"""What `retry` does after a failed attempt: whether to try again, and how long to wait.

One place for both, asked by the step pipeline after each failed attempt (runtime/step.py)
and by resume for the last attempt an interrupted run recorded (runtime/replay.py), on the
embedded engine and inside a Temporal workflow alike, so a live run, a resumed one and a
replayed workflow decide the same. Which error types are retried is chainlang.status's
`retryable`, given the step's `retry.on`.

The wait after attempt n is delay × backoff^(n-1), at most `max_delay`. `jitter: true`
spreads it over [wait/2, wait]; the spread is a hash of the run id, the step's instance
path and the attempt, never a random draw: a workflow must not draw random numbers, and a
resumed run waits what the first one would have.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from chainlang.durations import MAX_DURATION
from chainlang.status import retryable

__all__ = ["MAX_RETRY_DELAY", "jitter_fraction", "retry_delay", "tries_again"]

#: seconds: without `max_delay`, backoff never makes a wait longer than this (or than
#: `delay`, when that is written longer)
MAX_RETRY_DELAY = 3600.0


def tries_again(retry: Any, attempt: int, error: dict[str, Any] | None, most: int | None = None) -> bool:
    """Whether attempt `attempt`, which failed with `error`, is followed by another.
    `most` is the number of attempts the step had when it started (a resume reads it from
    the transcript); by default the step's `retry.attempts`."""
    if most is None:
        if retry is None:
            return False
        most = retry.attempts
    return attempt < most and retryable(error, getattr(retry, "on", None))


def jitter_fraction(run_id: str, ipath: str, attempt: int) -> float:
    """A number in [0, 1) that depends only on the run, the step instance and the attempt."""
    digest = hashlib.sha256(f"{run_id}\x00{ipath}\x00{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def retry_delay(retry: Any, attempt: int, run_id: str = "", ipath: str = "") -> float:
    """The wait in seconds after failed attempt `attempt` (see the module docstring)."""
    written = float(retry.delay)
    try:
        delay = written * (float(retry.backoff) ** (attempt - 1))
    except OverflowError:
        delay = math.inf
    if retry.max_delay is not None:
        delay = min(delay, float(retry.max_delay))
    else:
        delay = min(delay, max(MAX_RETRY_DELAY, written))
    delay = max(0.0, min(delay, MAX_DURATION))
    if getattr(retry, "jitter", False) and delay > 0:
        delay *= 0.5 + 0.5 * jitter_fraction(run_id, ipath, attempt)
    return delay
