"""What a report shows of a run, worked out from its transcript: the summary, every step
attempt as a bar on the run's time axis (packed into lanes: steps that ran at once get
lanes of their own), the hooks that fired, the decisions and model calls of each attempt.

Everything here is plain data (dicts, lists, numbers and strings) for the templates
(chainlang.report.html); nothing is evaluated. The transcript is untrusted: values are
shown, never interpreted, and each shown value is cut to a size that keeps a report of
10,000 steps small enough for a browser.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunReport", "build", "ms_of", "run_state", "trigger_of"]

# what every shown value of a run may take in the report, in all (each value gets its share)
VALUE_BUDGET = 16 * 1024 * 1024
VALUE_MIN, VALUE_MAX = 1024, 64 * 1024


@dataclass
class RunReport:
    """A run as its report shows it (see `build`)."""

    run_id: str
    title: str
    status: str  # ok, failed, limit, interrupted, running (no run_finished yet, its transcript held)
    trigger: str  # cli, event or schedule
    summary: dict[str, Any]
    attempts: list[dict[str, Any]]
    lanes: list[dict[str, Any]]
    hooks: list[dict[str, Any]]
    span_ms: float
    restarts: list[float] = field(default_factory=list)  # where the run was resumed, ms from its start
    notes: list[str] = field(default_factory=list)  # what the reader should know (torn tail, seals)

    def details(self) -> dict[str, Any]:
        """What the page's script shows when a step is opened, by attempt index."""
        return {"attempts": [{k: a[k] for k in ("step", "event", "attempt", "max", "status", "reason", "params",
                                                 "result", "error", "duration_ms", "decide", "models", "progress",
                                                 "hook", "start_ms", "end_ms")} for a in self.attempts]}


def ms_of(ts: Any) -> float:
    """A record's `ts` in ms since the epoch (read as the transcript reader checked it);
    ValueError for one that is not a time."""
    from chainlang.journal.reader import ts_ms

    ms = ts_ms(ts) if isinstance(ts, str) else None
    if ms is None:
        raise ValueError(f"not an ISO 8601 time with its offset: {str(ts)[:60]!r}")
    return ms


def _cut(value: Any, limit: int) -> Any:
    """`value`, or a note in its place when its JSON is longer than `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return f"(not JSON: {type(value).__name__})"
    if len(text) <= limit:
        return value
    return {"cut": f"{len(text):,} characters, cut to {limit:,} in the report; the transcript has the whole value",
            "start": text[:limit]}


def trigger_of(started: dict[str, Any]) -> str:
    """How the run began: `schedule` (a task's firing), `event` (an emit) or `cli` (a chain run)."""
    from chainlang.tasks.firing import DUE_EVENT  # an emit that is a task's firing

    emit = started.get("emit")
    if isinstance(emit, dict):
        return "schedule" if emit.get("event") == DUE_EVENT else "event"
    return "cli"


def run_state(finished: dict[str, Any] | None, held: bool) -> str:
    """The status shown: the run's final one, else running (its transcript is held by a
    process) or interrupted (nobody runs it: resume it)."""
    if finished is not None:
        return str(finished.get("status"))
    return "running" if held else "interrupted"


def build(records: list[dict[str, Any]], *, held: bool = False, notes: list[str] | None = None) -> RunReport:
    """The report of the run whose (complete, checked) records are `records`; `held`: a live
    process holds its transcript (a run under way)."""
    started = records[0]
    t0 = ms_of(started["ts"])
    last = max(ms_of(r["ts"]) for r in records)
    finished = None
    restarts: list[float] = []
    attempts: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}  # step path → its attempt under way
    latest: dict[str, dict[str, Any]] = {}  # step path → its last attempt
    pending: dict[str, list[dict[str, Any]]] = {}  # decisions waiting for their attempt
    hooks: list[dict[str, Any]] = []
    before = 0.0  # when the record before this one was written
    for rec in records:
        kind = rec["type"]
        at = ms_of(rec["ts"]) - t0
        if kind == "run_started" and rec is not started:
            restarts.append(at)
            finished = None
            for cut in open_.values():  # the attempts the stop cut off end where the records did
                cut.update(status="interrupted", end_ms=max(before, cut["start_ms"]))
            open_.clear()
        elif kind == "step_started":
            attempt = {"i": len(attempts), "step": rec["step"], "event": rec["event"], "attempt": rec["attempt"],
                       "max": rec.get("max_attempts"), "start_ms": at, "end_ms": None, "status": None,
                       "reason": None, "params": rec.get("params"), "result": None, "error": None,
                       "duration_ms": None, "decide": pending.pop(rec["step"], []), "models": [], "progress": [],
                       "hook": _hook_of(rec["step"]), "fired": [], "seq0": rec["seq"], "seq1": None}
            attempts.append(attempt)
            open_[rec["step"]] = latest[rec["step"]] = attempt
        elif kind == "step_finished":
            if rec["step"] not in open_:
                continue
            attempt = open_.pop(rec["step"])
            duration = float(rec.get("duration_ms") or 0.0)
            attempt["seq1"] = rec["seq"]
            attempt.update(status=rec["status"], reason=rec.get("reason"), result=rec.get("result"),
                           error=rec.get("error"), duration_ms=duration, end_ms=max(at, attempt["start_ms"] + duration)
                           if rec["status"] != "skipped" else attempt["start_ms"], broke=rec.get("broke"))
        elif kind == "decide":
            pending.setdefault(rec["step"], []).append(
                {k: rec.get(k) for k in ("asked", "action", "reason", "source", "params")})
        elif kind == "model_call":
            owner = open_.get(rec["step"]) or latest.get(rec["step"])
            call = {k: rec.get(k) for k in ("tier", "model", "task", "request", "answer", "usage", "duration_ms",
                                             "error")}
            if owner is not None:
                owner["models"].append(call)
        elif kind == "step_progress":
            owner = open_.get(rec["step"])
            if owner is not None:
                owner["progress"].append({"at_ms": at, "message": rec.get("message"), "fraction": rec.get("fraction")})
        elif kind in ("hook_fired", "hook_finished", "hook_dropped"):
            hooks.append({"kind": kind.removeprefix("hook_"), "at_ms": at, "hook": rec.get("hook"),
                          "step": rec.get("step"), "event": rec.get("event"), "when": rec.get("when"),
                          "status": rec.get("status"), "error": rec.get("error"), "reason": rec.get("reason"),
                          "message": rec.get("message"), "duration_ms": rec.get("duration_ms")})
            if kind == "hook_fired" and rec.get("step") in latest:
                latest[rec["step"]]["fired"].append({"hook": rec.get("hook"), "at_ms": at, "when": rec.get("when")})
        elif kind == "run_finished":
            finished = rec
        before = max(before, at)
    status = run_state(finished, held)
    span = max(last - t0, 1.0)
    for attempt in attempts:
        if attempt["status"] is None:  # no step_finished: under way, or cut off by a stop
            attempt["status"] = "running" if status == "running" else "interrupted"
            attempt["end_ms"] = span
    _cut_values(attempts)
    return RunReport(
        run_id=str(started["run_id"]), title=_title(started), status=status, trigger=trigger_of(started),
        summary=_summary(started, finished, span, attempts), attempts=attempts, lanes=_lanes(attempts),
        hooks=hooks, span_ms=span, restarts=restarts, notes=list(notes or []))


def _hook_of(step: str) -> str | None:
    """The hook whose action a step belongs to (`4/hook:audit/1`, `hook:audit.1`), if any."""
    for part in step.replace("/", " ").split():
        if part.startswith("hook:"):
            return part[5:].split(".")[0]
    return None


def _title(started: dict[str, Any]) -> str:
    emit = started.get("emit")
    if isinstance(emit, dict):
        return f"emit {emit.get('event')}"
    return str(started.get("chain") or Path(str(started.get("file", "run"))).name)


def _summary(started: dict[str, Any], finished: dict[str, Any] | None, span: float,
             attempts: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for attempt in attempts:
        counts[attempt["status"]] = counts.get(attempt["status"], 0) + 1
    limit = VALUE_MAX
    return {
        "chain": started.get("chain"), "file": started.get("file"), "started_at": started.get("started_at"),
        "now": started.get("now"), "thread": started.get("thread"), "emit": _cut(started.get("emit"), limit),
        "inputs": _cut(started.get("inputs"), limit),
        "outputs": _cut(finished.get("outputs"), limit) if finished else None,
        "error": _cut(finished.get("error"), limit) if finished else None,
        "duration_ms": float(finished["duration_ms"]) if finished else span,
        "steps": len({a["step"] for a in attempts}), "attempts": len(attempts), "counts": counts,
    }


def _cut_values(attempts: list[dict[str, Any]]) -> None:
    """Cut each shown value to its share of VALUE_BUDGET (a few big values of a short run keep
    up to VALUE_MAX; 10,000 steps keep VALUE_MIN each)."""
    share = max(VALUE_MIN, min(VALUE_MAX, VALUE_BUDGET // max(1, 3 * len(attempts))))
    for attempt in attempts:
        for key in ("params", "result", "error"):
            attempt[key] = _cut(attempt[key], share)
        attempt["decide"] = [_cut(d, share) for d in attempt["decide"]]
        attempt["models"] = [_cut(m, share) for m in attempt["models"]]
        del attempt["progress"][50:]


def _lanes(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lanes of bars: each attempt goes into the first lane free when it starts, so steps that
    ran at once are side by side. "At once" is read from the records' order, not their
    times (fast steps share a millisecond): an attempt that started before another one
    finished ran beside it. The actions of hooks get lanes of their own, after the chain's."""
    lanes: list[dict[str, Any]] = []
    never = float("inf")
    for group in ("chain", "hooks"):
        mine: list[dict[str, Any]] = []
        free: list[float] = []  # per lane: the seq of the end of its last attempt
        for attempt in sorted((a for a in attempts if (a["hook"] is None) == (group == "chain")),
                              key=lambda a: a["seq0"]):
            for number, until in enumerate(free):
                if until < attempt["seq0"]:
                    break
            else:
                number = len(free)
                free.append(0)
                mine.append({"group": group, "bars": []})
            mine[number]["bars"].append(attempt["i"])
            free[number] = attempt["seq1"] if attempt["seq1"] is not None else never
            attempt["lane"] = len(lanes) + number
        lanes.extend(mine)
    return lanes
