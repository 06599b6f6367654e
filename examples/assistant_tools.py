"""The example project's own tools: a stand-in calendar for the seed's Case 6
("If Sarah emails about the budget, schedule a meeting with her").

`calendar.create` books a meeting in a calendar kept as a JSON file in the project's state
directory (`.chainlang/state/calendar.json`). Without `start` it finds the next free slot
itself, from the run's recorded clock, during working hours (09:00–17:00, Monday to
Friday) — the seed asks a decide model to "find next available slot"; a real calendar
tool knows its own free slots. A booking is keyed by the step's idempotency key, so a
step that runs again after a crash returns the booking it made instead of making a
second one: the tool is idempotent.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from chainlang import event

_DURATION = re.compile(r"^\s*(\d+)\s*(m|min|minutes?|h|hours?)\s*$")
_DAY_START, _DAY_END = 9, 17  # working hours, in the clock's own time zone


@event(
    "calendar.create",
    description="Book a calendar entry; without start, in the next free slot of working hours.",
    idempotent=True,  # a booking is made once per step attempt (see the module docstring)
    result={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "start": {"type": "string"},
            "end": {"type": "string"},
            "attendees": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "title", "start", "end", "attendees"],
        "additionalProperties": False,
    },
)
def calendar_create(
    title: str = "Meeting",
    attendees: list[str] | None = None,
    duration: str = "30m",
    start: str | None = None,
    type: Literal["meeting", "reminder", "focus"] = "meeting",
    ctx: Any = None,
) -> dict[str, Any]:
    length = _minutes(duration)
    path = Path(ctx.state_dir) / "calendar.json"
    entries = _load(path)
    key = ctx.idempotency_key
    for entry in entries:
        if entry.get("key") == key:  # this step attempt booked it already (a resumed run)
            return _public(entry)
    begin = datetime.fromisoformat(start) if start else _next_free(ctx.now(), length, entries)
    entry = {"key": key, "id": f"cal-{len(entries) + 1}", "title": title, "type": type,
             "start": begin.isoformat(timespec="minutes"),
             "end": (begin + timedelta(minutes=length)).isoformat(timespec="minutes"),
             "attendees": list(attendees or [])}
    _save(path, entries + [entry])
    return _public(entry)


def _minutes(text: str) -> int:
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"duration {text!r}: write minutes or hours, e.g. 30m or 1h")
    value = int(match.group(1))
    minutes = value * 60 if match.group(2).startswith("h") else value
    if not 5 <= minutes <= 8 * 60:
        raise ValueError(f"duration {text!r}: a meeting lasts from 5 minutes to 8 hours")
    return minutes


def _next_free(now: datetime, minutes: int, entries: list[dict[str, Any]]) -> datetime:
    """The first slot on the half hour, after `now`, in working hours, clear of bookings."""
    slot = now.replace(second=0, microsecond=0)
    slot += timedelta(minutes=(30 - slot.minute % 30) % 30 or 30)
    busy = [(datetime.fromisoformat(e["start"]), datetime.fromisoformat(e["end"])) for e in entries]
    for _ in range(14 * 48):  # two weeks of half hours at most
        end = slot + timedelta(minutes=minutes)
        working = slot.weekday() < 5 and slot.hour >= _DAY_START and (end.hour, end.minute) <= (_DAY_END, 0) \
            and end.date() == slot.date()
        if working and not any(_overlaps(slot, end, a, b) for a, b in busy):
            return slot
        slot += timedelta(minutes=30)
    raise ValueError("no free slot in the next two weeks")


def _overlaps(a: datetime, b: datetime, c: datetime, d: datetime) -> bool:
    try:
        return a < d and c < b
    except TypeError:  # one naive, one aware: compare the wall-clock times
        return a.replace(tzinfo=None) < d.replace(tzinfo=None) and c.replace(tzinfo=None) < b.replace(tzinfo=None)


def _public(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("id", "title", "start", "end", "attendees")}


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return data if isinstance(data, list) else []


def _save(path: Path, entries: list[dict[str, Any]]) -> None:
    """Written to a temporary file, then renamed over the calendar: a crash leaves the old
    calendar or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calendar-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(entries, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
