"""Durations as written in chains: `500ms`, `30s`, `5m`, `1h`, `1d`, or compound `1h30m`."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

MAX_DURATION = 7 * 86400.0  # a week: longer waits belong to task.schedule


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration."""
    text = text.strip()
    if not _WHOLE.match(text):
        return None
    return sum(float(n) * _SECONDS[unit] for n, unit in _PART.findall(text))


DURATION_HINT = "write a number with a unit: 500ms, 30s, 5m, 1h, 1d (or compound: 1h30m)"
