"""`chainlang log`: the project's event log (the store's append-only record of what happened to
its tasks, leases, threads, memory, waits and emits), oldest first, read without sqlite3."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from chainlang.cli.moments import moment
from chainlang.cli.projectstore import open_project_store, project_root
from chainlang.errors import UsageError

DATA_WIDTH = 160  # characters of an event's data shown on its line (all of it with --json)
_AGO = re.compile(r"^(\d+)(s|m|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def log_command(since: str | None, kinds: tuple[str, ...], task: str | None, subject: str | None, limit: int,
                as_json: bool) -> int:
    if task is not None and subject is not None:
        raise UsageError("--task and --subject both name what the events are about: give one")
    start = None if since is None else _since(since)
    store = open_project_store(project_root())
    if store is None:
        rows: list[dict[str, Any]] = []
    else:
        with store:
            rows = store.events(limit, since=start, kinds=kinds or None, subject=task or subject)
            rows = [store.redaction.data(row) for row in rows]  # masked again: older rows may not be
    if as_json:
        for row in rows:
            print(json.dumps({**row, "at": moment(row["at"], precise=True)}, ensure_ascii=False))
        return 0
    if not rows:
        print("no events" + (" matching" if since or kinds or task or subject else ""))
        return 0
    width = max(len(row["kind"]) for row in rows)
    for row in rows:
        data = " ".join(json.dumps(row["data"], ensure_ascii=False).split())
        data = data if len(data) <= DATA_WIDTH else data[: DATA_WIDTH - 1] + "…"
        print(f"{row['seq']:>6}  {moment(row['at'])}  {row['kind']:{width}}  {row['subject']}  {data}".rstrip())
    return 0


def _since(text: str) -> str:
    """`--since`: an ISO 8601 moment (UTC when it has no offset), or a span back from now (30m, 2h, 7d)."""
    ago = _AGO.match(text.strip())
    if ago:
        when = datetime.now(timezone.utc) - timedelta(seconds=int(ago.group(1)) * _UNITS[ago.group(2)])
    else:
        try:
            when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--since {text!r}: give a moment (2026-11-23T10:00:00Z, 2026-11-23) or a span back "
                             "from now (30m, 2h, 7d)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")
