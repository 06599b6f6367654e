"""serve's pages (issue: see what a run did): `GET /` lists the recent runs of the project
(status, chain or event, start, duration, trigger) and its stored tasks (next run,
failures, dead), reloading itself; `GET /runs/ID/report` is a run's report
(chainlang.report), reloading itself while the run is under way.

The runs are read from the transcripts in `.chainlang/runs`: the first record and the last
complete one of each (never the whole file), the newest first (a run id starts with its
UTC start time). Transcripts are untrusted: each of the two lines is checked and typed by
the transcript reader's `load_line` (seals are not verified here); a first line it refuses
shows the run as unreadable, a last one it refuses (a torn write) gives way to the line
before it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.journal.reader import Entry, TranscriptError, load_line
from chainlang.journal.records import RunFinished, RunStarted
from chainlang.report.model import ms_of, run_state, trigger_of

if TYPE_CHECKING:
    from chainlang.store import Store

__all__ = ["RUN_ID", "list_runs", "list_tasks", "runs_page"]

RUN_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,99}")
TAIL = 64 * 1024  # bytes read from a transcript's end to find its last record
HEAD = 1024 * 1024  # bytes a first record may take (its inputs are in it)
MAX_RUNS = 1000
REFRESH = 5  # seconds between two loads of the list


def _first(path: Path) -> Entry | None:
    with path.open("rb") as f:
        line = f.readline(HEAD)
    return _record(line, path)


def _last(path: Path) -> Entry | None:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - TAIL))
        lines = f.read().split(b"\n")
    for line in reversed(lines[1:] if size > TAIL else lines):  # the first may be cut: not a whole line
        entry = _record(line, path)
        if entry is not None:
            return entry
    return None


def _record(line: bytes, path: Path) -> Entry | None:
    """The line's typed record, or None when the reader refuses it (the line number is not
    known here and not shown)."""
    try:
        return load_line(line, 0, path)
    except TranscriptError:
        return None


def _ms(ts: Any) -> float | None:
    try:
        return ms_of(ts)
    except ValueError:  # an untrusted transcript's time that is not one
        return None


def _age(entry: "os.DirEntry[str]") -> int:
    try:
        return entry.stat().st_mtime_ns
    except OSError:
        return 0


def list_runs(runs_dir: Path, limit: int = 100) -> list[dict[str, Any]]:
    """The newest `limit` runs in `runs_dir`, newest first: run id, status, what ran (chain
    or event), trigger, start, duration, task."""
    from chainlang.report.page import held

    try:  # newest first: by the start time the id begins with, then (the same second) by the file's age
        with os.scandir(runs_dir) as entries:
            found = [(e.name.split("-")[0], _age(e), e.name) for e in entries
                     if e.name.endswith(".jsonl") and RUN_ID.fullmatch(e.name[:-6])]
    except OSError:
        return []
    names = [name for _, _, name in sorted(found, reverse=True)[:max(1, min(limit, MAX_RUNS))]]
    out = []
    for name in names:
        path = runs_dir / name
        row: dict[str, Any] = {"run_id": name[:-6], "status": "unreadable", "what": "", "trigger": "",
                               "started_at": "", "duration_ms": None, "task": None, "error": None}
        try:
            first, last = _first(path), _last(path)
        except OSError:
            first = last = None
        if first is None or not isinstance(first.record, RunStarted) or last is None:
            out.append(row)
            continue
        started = first.record
        emit = started.emit
        finished = last.record if isinstance(last.record, RunFinished) else None
        start, end = _ms(first.envelope.ts), _ms(last.envelope.ts)
        error = finished.error if finished else None
        row.update(
            status=run_state(finished, held(path)), trigger=trigger_of(started),
            what=str(emit.get("event")) if emit else (started.chain or Path(started.file).name),
            started_at=started.started_at or first.envelope.ts,
            duration_ms=finished.duration_ms if finished else (end - start if start and end else None),
            task=str(emit["task"]) if emit and emit.get("task") else None,
            error=str(error.get("message"))[:300] if error and error.get("message") else None)
        out.append(row)
    return out


def list_tasks(store: "Store") -> list[dict[str, Any]]:
    """The project's stored tasks: scheduled ones first, then hooks; archived ones left out."""
    rows = []
    for task in store.list_tasks():
        if task.status == "archived" and task.problem is None:
            continue
        definition = task.definition if isinstance(task.definition, dict) else {}
        what = str(definition.get("description") or definition.get("trigger") or definition.get("type") or "")
        if task.problem is not None:  # a row that cannot be read: never fired; the page says why
            what = f"quarantined: {task.problem}"
        rows.append({"id": task.id, "kind": task.kind, "status": "quarantined" if task.problem else task.status,
                     "next_run": task.next_run,
                     "last_run": task.last_run, "failures": task.failures,
                     # masked before it is cut (no part of a secret shows), also in a row stored before the store masked
                     "what": store.redaction.text(what)[:200]})
    rows.sort(key=lambda r: (r["kind"] != "schedule", r["status"] != "dead", r["next_run"] or "~", r["id"]))
    return rows


def runs_page(project: Path, runs: list[dict[str, Any]], tasks: list[dict[str, Any]] | None, tasks_error: str | None,
              *, refresh: int | None = REFRESH, nonce: str = "") -> str:
    """The page of `GET /`."""
    from datetime import datetime, timezone

    from chainlang.report.page import templates

    return templates().get_template("runs.html.j2").render(
        project=project.name or str(project), runs=runs, tasks=tasks, tasks_error=tasks_error, refresh=refresh, nonce=nonce,
        made=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
