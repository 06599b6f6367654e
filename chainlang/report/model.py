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
from typing import TYPE_CHECKING, Any

from chainlang.journal.records import (Decide, HookDropped, HookFinished, HookFired, ModelCall, RunFinished, RunStarted,
                                       StepFinished, StepProgress, StepStarted, WaitFinished, WaitStarted)

if TYPE_CHECKING:
    from chainlang.journal.reader import Entry

__all__ = ["RunReport", "build", "ms_of", "run_state", "trigger_of"]

# what every shown value of a run may take in the report, in all (each value gets its share)
VALUE_BUDGET = 16 * 1024 * 1024
VALUE_MIN, VALUE_MAX = 1024, 64 * 1024


@dataclass
class RunReport:
    """A run as its report shows it (see `build`)."""

    run_id: str
    title: str
    status: str  # ok, failed, limit, interrupted, waiting, running (no run_finished yet, its transcript held)
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


def trigger_of(started: RunStarted) -> str:
    """How the run began: `schedule` (a task's firing), `event` (an emit) or `cli` (a chain run)."""
    from chainlang.tasks.firing import DUE_EVENT  # an emit that is a task's firing

    if started.emit is not None:
        return "schedule" if started.emit.get("event") == DUE_EVENT else "event"
    return "cli"


def run_state(finished: RunFinished | None, held: bool) -> str:
    """The status shown: the run's final one, else running (its transcript is held by a
    process) or interrupted (nobody runs it: resume it)."""
    if finished is not None:
        return finished.status
    return "running" if held else "interrupted"


def build(records: list["Entry"], *, held: bool = False, notes: list[str] | None = None) -> RunReport:
    """The report of the run whose (complete, checked) lines are `records`, as the transcript
    reader gives them; `held`: a live process holds its transcript (a run under way)."""
    started = records[0].record
    assert isinstance(started, RunStarted)  # the reader refuses a transcript that starts otherwise
    t0 = ms_of(records[0].envelope.ts)
    last = max(ms_of(r.envelope.ts) for r in records)
    finished: RunFinished | None = None
    restarts: list[float] = []
    attempts: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}  # step path → its attempt under way
    latest: dict[str, dict[str, Any]] = {}  # step path → its last attempt
    pending: dict[str, list[dict[str, Any]]] = {}  # decisions waiting for their attempt
    hooks: list[dict[str, Any]] = []
    waits: dict[str, dict[str, Any]] = {}  # step path → its wait under way (it goes on across resumes)
    before = 0.0  # when the record before this one was written
    for entry in records:
        rec, seq = entry.record, entry.envelope.seq
        at = ms_of(entry.envelope.ts) - t0
        if isinstance(rec, RunStarted) and rec is not started:
            restarts.append(at)
            finished = None
            for cut in open_.values():  # the attempts the stop cut off end where the records did
                cut.update(status="interrupted", end_ms=max(before, cut["start_ms"]))
            open_.clear()
        elif isinstance(rec, StepStarted):
            attempt = {"i": len(attempts), "step": rec.step, "event": rec.event, "attempt": rec.attempt,
                       "max": rec.max_attempts, "start_ms": at, "end_ms": None, "status": None,
                       "reason": None, "params": rec.params, "result": None, "error": None,
                       "duration_ms": None, "decide": pending.pop(rec.step, []), "models": [], "progress": [],
                       "hook": _hook_of(rec.step), "fired": [], "seq0": seq, "seq1": None, "wait": False}
            attempts.append(attempt)
            open_[rec.step] = latest[rec.step] = attempt
        elif isinstance(rec, StepFinished):
            if rec.step not in open_:
                continue
            attempt = open_.pop(rec.step)
            duration = float(rec.duration_ms)
            attempt["seq1"] = seq
            attempt.update(status=rec.status, reason=rec.reason, result=rec.result, error=rec.error,
                           duration_ms=duration, end_ms=max(at, attempt["start_ms"] + duration)
                           if rec.status != "skipped" else attempt["start_ms"], broke=rec.broke)
        elif isinstance(rec, Decide):
            pending.setdefault(rec.step, []).append(
                {"asked": rec.asked, "action": rec.action, "reason": rec.reason, "source": rec.source,
                 "params": rec.params})
        elif isinstance(rec, ModelCall):
            owner = open_.get(rec.step) or latest.get(rec.step)
            if owner is not None:
                owner["models"].append({"tier": rec.tier, "model": rec.model, "task": rec.task, "request": rec.request,
                                        "answer": rec.answer, "usage": rec.usage, "duration_ms": rec.duration_ms,
                                        "error": rec.error})
        elif isinstance(rec, StepProgress):
            owner = open_.get(rec.step)
            if owner is not None:
                owner["progress"].append({"at_ms": at, "message": rec.message, "fraction": rec.fraction})
        elif isinstance(rec, (HookFired, HookFinished, HookDropped)):
            hooks.append(_hook_row(rec, at))
            if isinstance(rec, HookFired) and rec.step in latest:
                latest[rec.step]["fired"].append({"hook": rec.hook, "at_ms": at, "when": rec.when})
        elif isinstance(rec, WaitStarted):
            attempt = _wait_bar(rec, len(attempts), at, seq)
            attempts.append(attempt)
            waits[rec.step] = latest[rec.step] = attempt
        elif isinstance(rec, WaitFinished):
            if rec.step in waits:
                _wait_ended(waits.pop(rec.step), rec, at, seq)
        elif isinstance(rec, RunFinished):
            finished = rec
        before = max(before, at)
    status = run_state(finished, held)
    span = max(last - t0, 1.0)
    for attempt in attempts:
        if attempt["status"] is None:  # no step_finished: under way, or cut off by a stop
            # a wait not finished still waits, whether a process watches it or not (the store has it)
            attempt["status"] = "waiting" if attempt["wait"] else "running" if status == "running" else "interrupted"
            attempt["end_ms"] = span
    _cut_values(attempts)
    return RunReport(
        run_id=records[0].envelope.run_id, title=_title(started), status=status, trigger=trigger_of(started),
        summary=_summary(started, finished, span, attempts), attempts=attempts, lanes=_lanes(attempts),
        hooks=hooks, span_ms=span, restarts=restarts, notes=list(notes or []))


def _wait_bar(rec: WaitStarted, i: int, at: float, seq: int) -> dict[str, Any]:
    """A wait as a bar from its wait_started to its wait_finished; its params are what it waits
    for (the event, where and the values it froze, the deadline, a user.ask's question)."""
    asked = isinstance(rec.question, dict)
    params: dict[str, Any] = {"event": rec.event, "where": rec.where, "values": rec.values, "deadline": rec.deadline}
    if asked:
        params["question"] = rec.question
    return {"i": i, "step": rec.step, "event": "user.ask" if asked else f"wait {rec.event}", "attempt": 1,
            "max": None, "start_ms": at, "end_ms": None, "status": None,
            "reason": f"waits until {rec.deadline}" if rec.deadline else "waits (no timeout)", "params": params,
            "result": None, "error": None, "duration_ms": None, "decide": [], "models": [], "progress": [],
            "hook": _hook_of(rec.step), "fired": [], "seq0": seq, "seq1": None, "wait": True}


_WAIT_ENDS = {"ok": "ok", "timed_out": "timed_out", "cancelled": "cancelled"}


def _wait_ended(attempt: dict[str, Any], rec: WaitFinished, at: float, seq: int) -> None:
    status = _WAIT_ENDS.get(rec.status, "failed") if isinstance(rec.status, str) else "failed"
    how = {"ok": "answered" if "question" in attempt["params"] else "delivered", "timed_out": "timed out",
           "cancelled": "cancelled (chainlang waits cancel)"}.get(status, str(rec.status))
    if rec.emit_id:
        how += f" by emit {rec.emit_id}"
    attempt.update(status=status, reason=how, result=rec.payload, seq1=seq, end_ms=max(at, attempt["start_ms"]),
                   duration_ms=max(0.0, at - attempt["start_ms"]))


def _hook_row(rec: HookFired | HookFinished | HookDropped, at: float) -> dict[str, Any]:
    """A hook's record as the hooks table shows it (the members a kind of record has not are None)."""
    return {"kind": rec.TYPE.removeprefix("hook_"), "at_ms": at, "hook": rec.hook, "step": rec.step,
            "event": getattr(rec, "event", None), "when": getattr(rec, "when", None),
            "status": getattr(rec, "status", None), "error": getattr(rec, "error", None),
            "reason": getattr(rec, "reason", None), "message": getattr(rec, "message", None),
            "duration_ms": getattr(rec, "duration_ms", None)}


def _hook_of(step: str) -> str | None:
    """The hook whose action a step belongs to (`4/hook:audit/1`, `hook:audit.1`), if any."""
    for part in step.replace("/", " ").split():
        if part.startswith("hook:"):
            return part[5:].split(".")[0]
    return None


def _title(started: RunStarted) -> str:
    if started.emit is not None:
        return f"emit {started.emit.get('event')}"
    return started.chain or Path(started.file).name


def _summary(started: RunStarted, finished: RunFinished | None, span: float,
             attempts: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for attempt in attempts:
        counts[attempt["status"]] = counts.get(attempt["status"], 0) + 1
    limit = VALUE_MAX
    return {
        "chain": started.chain, "file": started.file, "started_at": started.started_at,
        "now": started.now, "thread": started.thread, "emit": _cut(started.emit, limit),
        "inputs": _cut(started.inputs, limit),
        "outputs": _cut(finished.outputs, limit) if finished else None,
        "error": _cut(finished.error, limit) if finished else None,
        "duration_ms": float(finished.duration_ms) if finished else span,
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
