"""Whether a step did what its test expects (`expect:` of a chaintest step), and golden
transcripts: a run's records with what differs from run to run taken out, compared with
a file the test keeps (written with `pytest --chaintest-update`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from chainlang.testing.fakes import subset_problem
from chainlang.testing.project import ChainProject, StepResult

__all__ = ["check_expectations", "golden_lines"]

# record fields that change from run to run, whatever the chain does
# a wait's deadline and the moment it was settled (wait_started, wait_finished) are moments of the clock too
_VOLATILE = frozenset({"run_id", "seq", "ts", "mac", "duration_ms", "file", "file_sha256", "started_at", "ms",
                       "deadline", "at"})
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6,10}\b")
_KEY = re.compile(r"\b[0-9a-f]{32}\b")  # idempotency keys (made from the run id)
_MADE_ID = re.compile(r"\b([a-z]+)-([0-9a-f]{10,})\b")  # thread-…, task-…, ntf-…: made from random bits


def check_expectations(step: Any, result: StepResult, project: ChainProject, test_file: Path,
                       update: bool) -> list[str]:
    """What is wrong with `result` for the step's `expect` (empty: all as expected)."""
    expect: dict[str, Any] = step.expect
    problems: list[str] = []
    if result.kind == "command":
        wanted_exit = expect.get("exit", 0)
        if result.exit_code != wanted_exit:
            problems.append(f"exit code {result.exit_code}, expected {wanted_exit}; it printed:\n{_indent(result.output)}")
        texts = expect.get("output", [])
        _contains(problems, "output", result.output, [texts] if isinstance(texts, str) else texts)
    else:
        wanted = expect.get("status", "ok")
        if result.status != wanted:
            why = f": {result.error}" if result.error else ""
            problems.append(f"status {result.status}{why}; expected {wanted}")
        for key, value in expect.get("outputs", {}).items():
            if key not in result.outputs:
                problems.append(f"outputs.{key}: missing (the outputs are {', '.join(result.outputs) or 'none'})")
                continue
            problem = subset_problem(value, result.outputs[key], f"outputs.{key}")
            if problem is not None:
                problems.append(problem)
        if "error" in expect and expect["error"] not in (result.error or ""):
            problems.append(f"error: expected a message containing {expect['error']!r}, got {result.error!r}")
        if "records" in expect:
            problems += _records_in_order(expect["records"], result.records)
        if "fired" in expect:
            problems += _fired(expect["fired"], result.fired)
        for event, calls in expect.get("calls", {}).items():
            problems += _calls(event, calls, project)
        if "transcript" in expect:
            problem = _golden(test_file.parent / expect["transcript"], result, update)
            if problem is not None:
                problems.append(problem)
    for relative, texts in expect.get("files", {}).items():
        try:
            text = project.path(relative).read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            problems.append(f"files.{relative}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
            continue
        _contains(problems, f"files.{relative}", text, [texts] if isinstance(texts, str) else texts)
    return problems


def _contains(problems: list[str], what: str, text: str, parts: list[str]) -> None:
    """Each of `parts` in `text`, in order."""
    start = 0
    for part in parts:
        found = text.find(part, start)
        if found < 0:
            later = " after the text before it" if part in text else ""
            problems.append(f"{what}: no {part!r}{later}; it is:\n{_indent(text)}")
            return
        start = found + len(part)


def _records_in_order(patterns: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[str]:
    at = 0
    for number, pattern in enumerate(patterns, 1):
        while at < len(records) and subset_problem(pattern, records[at]) is not None:
            at += 1
        if at == len(records):
            near = [r for r in records if r.get("type") == pattern.get("type")] if "type" in pattern else records
            closest = min((subset_problem(pattern, r) or "" for r in near), key=len, default="no such record")
            return [f"records[{number}]: no record {json.dumps(pattern, ensure_ascii=False)} "
                    f"after the ones before it (the closest: {closest})"]
        at += 1
    return []


def _fired(patterns: list[dict[str, Any]], fired: list[dict[str, Any]]) -> list[str]:
    if len(patterns) != len(fired):
        shown = ", ".join(f"{f.get('hook')} ({f.get('status')})" for f in fired) or "none"
        return [f"fired: {len(fired)} hook(s) fired, expected {len(patterns)}: {shown}"]
    return [f"fired[{i}]: {p}" for i, (pattern, one) in enumerate(zip(patterns, fired), 1)
            if (p := subset_problem(pattern, one)) is not None]


def _calls(event: str, expected: list[dict[str, Any]], project: ChainProject) -> list[str]:
    if event not in project.fakes.fakes:
        return [f"calls.{event}: not a faked event (add it to tools:)"]
    calls = project.calls(event)
    if len(calls) != len(expected):
        return [f"calls.{event}: {len(calls)} call(s), expected {len(expected)}: "
                f"{json.dumps(calls, ensure_ascii=False, default=str)[:500]}"]
    return [p for i, (pattern, call) in enumerate(zip(expected, calls), 1)
            if (p := subset_problem(pattern, call, f"calls.{event}[{i}]")) is not None]


# -- goldens ----------------------------------------------------------------------------------


def golden_lines(records: list[dict[str, Any]]) -> list[str]:
    """The records as the golden keeps them: one JSON object a line, keys sorted, without the
    fields that change from run to run, ids made of random bits numbered by first appearance."""
    names: dict[str, str] = {}

    def stable(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: stable(v) for k, v in value.items()}
        if isinstance(value, list):
            return [stable(v) for v in value]
        if isinstance(value, str):
            value = _RUN_ID.sub(lambda m: names.setdefault(m.group(0), f"<run {len(names) + 1}>"), value)
            value = _KEY.sub(lambda m: names.setdefault(m.group(0), f"<key {len(names) + 1}>"), value)
            return _MADE_ID.sub(lambda m: names.setdefault(m.group(0), f"{m.group(1)}-<{len(names) + 1}>"), value)
        return value

    lines = []
    for record in records:
        kept = {k: v for k, v in record.items() if k not in _VOLATILE}
        fired = (kept.get("outputs") or {}).get("fired") if kept.get("type") == "run_finished" else None
        if isinstance(fired, list):  # an emit's end: how long each hook took
            kept["outputs"] = {**kept["outputs"], "fired": [{k: v for k, v in item.items() if k != "duration_ms"}
                                                            if isinstance(item, dict) else item for item in fired]}
        lines.append(json.dumps(stable(kept), ensure_ascii=False, sort_keys=True))
    return lines


def _golden(path: Path, result: StepResult, update: bool) -> str | None:
    lines = golden_lines(result.records)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return None
    try:
        kept = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return f"transcript: cannot read the golden {path.name}: {exc.strerror or exc} (write it with pytest --chaintest-update)"
    if kept == lines:
        return None
    if sorted(kept) == sorted(lines):
        return None  # the same records; steps that ran at once finished in another order
    for number, (want, got) in enumerate(zip(kept, lines), 1):
        if want != got:
            return (f"transcript: record {number} differs from the golden {path.name}:\n"
                    f"  golden: {want[:600]}\n  run:    {got[:600]}\n(pytest --chaintest-update rewrites the golden)")
    return (f"transcript: the golden {path.name} has {len(kept)} records, the run {len(lines)}"
            " (pytest --chaintest-update rewrites the golden)")


def _indent(text: str, limit: int = 2000) -> str:
    text = text if len(text) <= limit else text[:limit] + "…"
    return "\n".join("    " + line for line in text.rstrip("\n").splitlines()) or "    (nothing)"
