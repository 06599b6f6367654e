"""How the CLI shows the moments the store keeps (UTC, ISO 8601, to the microsecond): to the
second in the text people read (`2026-11-23T10:00:00Z`), to the millisecond in `--json`
(`2026-11-23T10:00:00.123Z`, as transcripts stamp their records). A value that is not such a
moment (a user's own `at:` text, None) is shown as it is."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["MOMENT_FIELDS", "moment", "moments"]

# the fields of a task, a thread, a wait or a task's run that hold the store's moments
MOMENT_FIELDS = frozenset({"due", "last_run", "created_at", "updated_at", "due_at", "started_at", "finished_at",
                           "settled_at", "deadline", "since"})


def moment(stored: Any, precise: bool = False) -> Any:
    """`stored` to the second (`precise`: the millisecond), in UTC with a Z."""
    if not isinstance(stored, str) or len(stored) < 19 or stored[10:11] != "T":
        return stored
    try:
        when = datetime.fromisoformat(stored.replace("Z", "+00:00"))
    except ValueError:
        return stored
    if when.tzinfo is None:
        return stored
    when = when.astimezone(timezone.utc)
    if precise:
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def moments(data: Any, precise: bool = False) -> Any:
    """`data` (a row, or a list of rows) with its MOMENT_FIELDS shown by `moment`; the rows of its
    `runs` too. Nothing deeper: an action's params are the user's values, whatever their keys."""
    if isinstance(data, list):
        return [moments(item, precise) for item in data]
    if not isinstance(data, dict):
        return data
    out = {key: moment(value, precise) if key in MOMENT_FIELDS else value for key, value in data.items()}
    if isinstance(out.get("runs"), list):
        out["runs"] = [moments(run, precise) for run in out["runs"]]
    return out
