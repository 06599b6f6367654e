"""The run journal's pieces (chainlang.journal): the record codec, the seals of the lines,
the head file and its lock, and the project's transcript key.

The writer and reader as a whole are tested in test_transcript.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.integrity import (
    GENESIS,
    KEY_FILE,
    IntegrityError,
    load_key,
    mac_of,
    seal,
    split_sealed,
)
from chainlang.journal.jsonl import TranscriptError, TranscriptWriter, read_transcript
from chainlang.journal.lock import Head, RunInUse, RunLock, head_path
from chainlang.journal.records import (
    RECORD_TYPES,
    Clock,
    Decide,
    HookDropped,
    HookFinished,
    HookFired,
    ModelCall,
    Record,
    RecordError,
    RunFinished,
    RunStarted,
    StepFinished,
    StepProgress,
    StepStarted,
    WaitFinished,
    WaitStarted,
    decode,
    fields,
)

REPO = Path(__file__).resolve().parent.parent
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ENVELOPE = {"type": "x", "run_id": "r", "seq": 1, "ts": "2025-01-02T03:04:05.678Z"}


# =========================================================================== the codec

#: every type with every member set, in the documented order of its JSON members
FULL: list[Record] = [
    RunStarted(chain="deploy", file="/p/deploy.yaml", file_sha256="ab" * 32, inputs={"env": "prod"},
               now="2025-01-02T03:04:05Z", started_at="2025-01-02T03:04:05Z", tools=["mod"], resumed=True,
               emit={"event": "mail.got", "data": {"a": 1}, "id": "k1"}, thread="t1"),
    StepStarted(step="3.1", event="tools.x", attempt=2, params={"a": [1, None]}, max_attempts=3),
    StepProgress(step="3.1", event="tools.x", message="half", fraction=0.5),
    Decide(step="3.1", event="tools.x", asked={"condition": "x", "errors": [], "params": {}}, action="continue",
           reason="fine", source="model", params={"a": 1}),
    HookFired(hook="notify", when="post", event="tools.x", step="3.1", trigger="post:tools.*"),
    HookFinished(hook="notify", step="3.1", status="failed", error={"type": "chain", "message": "m"}, duration_ms=2.5),
    HookDropped(hook="notify", when="post", event="tools.x", step="3.1", reason="depth", message="too deep"),
    StepFinished(step="3.1", event="tools.x", status="skipped", result=None, error={"type": "E", "message": "m"},
                 duration_ms=0.25, attempt=2, reason="its if is false", broke=True),
    RunFinished(status="broken", outputs={"o": 1}, error={"type": "Break", "message": "b"}, duration_ms=12),
    Clock(value="2025-01-02T03:04:05Z", step="3.1"),
    ModelCall(step="3.1", tier="fast", model="m", task="chain", request={"messages": []}, answer="{}",
              usage={"prompt_tokens": 3}, duration_ms=1.5, error={"type": "model", "message": "m"},
              finish_reason="length"),
    WaitStarted(step="2", event="approval.given", where="draft_id == d.result", values={"d.result": "x"},
                deadline="2025-01-04T03:04:05.000Z", question={"id": "q-1", "question": "ok?", "choices": ["y"]}),
    WaitFinished(step="2", status="ok", payload={"draft_id": "x"}, emit_id="e-1", at="2025-01-02T03:04:06.000Z"),
]

#: every type with only its required members (nullable ones null)
MINIMAL: list[Record] = [
    RunStarted(chain=None, file="f", file_sha256="", inputs={}, now=None, started_at="", tools=[], resumed=False),
    StepStarted(step="1", event="e", attempt=1, params=None),
    StepProgress(step="1", event="e", message=""),
    Decide(step="1", event="e", asked={}, action="", reason="", source=""),
    HookFired(hook="h", when="", event="e"),
    HookFinished(hook="h", status="ok", error=None, duration_ms=0),
    HookDropped(hook="h", when="", event="e", reason="", message=""),
    StepFinished(step="1", event="e", status="ok", result=None, error=None, duration_ms=0, attempt=1),
    RunFinished(status="ok", outputs={}, error=None, duration_ms=0.0),
    Clock(value="v"),
    ModelCall(step="1", tier="t", model="m", task="k", request={}, answer=None, usage={}, duration_ms=0),
    WaitStarted(step="1", event="e", where=None, values={}, deadline=None),
    WaitFinished(step="1", status="timed_out", payload=None),
]

ORDER: dict[str, list[str]] = {
    "run_started": ["chain", "file", "file_sha256", "inputs", "now", "started_at", "tools", "resumed", "emit", "thread"],
    "step_started": ["step", "event", "attempt", "max_attempts", "params"],
    "step_progress": ["step", "event", "message", "fraction"],
    "decide": ["step", "event", "asked", "action", "params", "reason", "source"],
    "hook_fired": ["hook", "when", "event", "step", "trigger"],
    "hook_finished": ["hook", "step", "status", "error", "duration_ms"],
    "hook_dropped": ["hook", "when", "event", "step", "reason", "message"],
    "step_finished": ["step", "event", "status", "result", "error", "duration_ms", "attempt", "reason", "broke"],
    "run_finished": ["status", "outputs", "error", "duration_ms"],
    "clock": ["value", "step"],
    "model_call": ["step", "tier", "model", "task", "request", "answer", "usage", "duration_ms", "error",
                   "finish_reason"],
    "wait_started": ["step", "event", "where", "values", "deadline", "question"],
    "wait_finished": ["step", "status", "payload", "emit_id", "at"],
}
OPTIONAL: dict[str, set[str]] = {
    "run_started": {"emit", "thread"},
    "step_started": {"max_attempts"},
    "step_progress": {"fraction"},
    "decide": {"params"},
    "hook_fired": {"step", "trigger"},
    "hook_finished": {"step"},
    "hook_dropped": {"step"},
    "step_finished": {"reason", "broke"},
    "run_finished": set(),
    "clock": {"step"},
    "model_call": {"error", "finish_reason"},
    "wait_started": {"question"},
    "wait_finished": {"emit_id", "at"},
}
NULLABLE: dict[str, set[str]] = {
    "run_started": {"chain", "now"},
    "step_started": {"params"},
    "step_progress": {"fraction"},
    "decide": set(),
    "hook_fired": set(),
    "hook_finished": {"error"},
    "hook_dropped": set(),
    "step_finished": {"result", "error"},
    "run_finished": {"error"},
    "clock": set(),
    "model_call": {"answer"},
    "wait_started": {"where", "deadline"},
    "wait_finished": {"payload"},
}
#: per member, the JSON kind it must have (None: any JSON value)
KIND: dict[str, dict[str, str | None]] = {
    "run_started": {"chain": "a string", "file": "a string", "file_sha256": "a string", "inputs": "an object",
                    "now": "a string", "started_at": "a string", "tools": "an array", "resumed": "a boolean",
                    "emit": "an object", "thread": "a string"},
    "step_started": {"step": "a string", "event": "a string", "attempt": "an integer", "max_attempts": "an integer",
                     "params": None},
    "step_progress": {"step": "a string", "event": "a string", "message": "a string", "fraction": "a number"},
    "decide": {"step": "a string", "event": "a string", "asked": "an object", "action": "a string",
               "params": "an object", "reason": "a string", "source": "a string"},
    "hook_fired": {"hook": "a string", "when": "a string", "event": "a string", "step": "a string",
                   "trigger": "a string"},
    "hook_finished": {"hook": "a string", "step": "a string", "status": "a string", "error": "an object",
                      "duration_ms": "a number"},
    "hook_dropped": {"hook": "a string", "when": "a string", "event": "a string", "step": "a string",
                     "reason": "a string", "message": "a string"},
    "step_finished": {"step": "a string", "event": "a string", "status": "a string", "result": None,
                      "error": "an object", "duration_ms": "a number", "attempt": "an integer", "reason": "a string",
                      "broke": "a boolean"},
    "run_finished": {"status": "a string", "outputs": "an object", "error": "an object", "duration_ms": "a number"},
    "clock": {"value": "a string", "step": "a string"},
    "model_call": {"step": "a string", "tier": "a string", "model": "a string", "task": "a string",
                   "request": "an object", "answer": "a string", "usage": "an object", "duration_ms": "a number",
                   "error": "an object", "finish_reason": "a string"},
    "wait_started": {"step": "a string", "event": "a string", "where": "a string", "values": "an object",
                     "deadline": "a string", "question": "an object"},
    "wait_finished": {"step": "a string", "status": "a string", "payload": None, "emit_id": "a string",
                      "at": "a string"},
}
#: a JSON value of the wrong kind for each kind, and how the codec names it
WRONG: dict[str, list[tuple[Any, str]]] = {
    "a string": [(1, "a number"), (["s"], "an array"), ({}, "an object"), (True, "a boolean")],
    "an integer": [("1", "a string"), (1.0, "a number"), (True, "a boolean"), ([1], "an array")],
    "a number": [("1", "a string"), (False, "a boolean"), ({}, "an object")],
    "a boolean": [(1, "a number"), ("true", "a string"), ([], "an array")],
    "an object": [([], "an array"), ("{}", "a string"), (0, "a number"), (True, "a boolean")],
    "an array": [({}, "an object"), ("a", "a string"), (1, "a number")],
}

assert {r.TYPE for r in FULL} == {r.TYPE for r in MINIMAL} == RECORD_TYPES == set(ORDER)


def full(kind: str) -> dict[str, Any]:
    """The JSON object of the FULL record of `kind`, with an envelope."""
    rec = next(r for r in FULL if r.TYPE == kind)
    return {**ENVELOPE, "type": kind, **fields(rec)}


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(RecordError) as info:
        decode(data)
    return str(info.value)


@pytest.mark.parametrize("rec", FULL + MINIMAL, ids=lambda r: type(r).__name__)
def test_decode_round_trips_fields(rec: Record) -> None:
    members = fields(rec)
    data = json.loads(json.dumps({**ENVELOPE, "type": rec.TYPE, **members}))  # through JSON text
    assert decode(data) == rec
    assert fields(decode(data)) == members
    assert list(fields(decode(data))) == list(members)


@pytest.mark.parametrize("rec", FULL, ids=lambda r: type(r).__name__)
def test_fields_are_in_the_documented_order(rec: Record) -> None:
    assert list(fields(rec)) == ORDER[rec.TYPE]


def test_unset_optional_members_are_left_out_and_nullable_ones_kept() -> None:
    for rec in MINIMAL:
        assert list(fields(rec)) == [m for m in ORDER[rec.TYPE] if m not in OPTIONAL[rec.TYPE]], rec
    assert fields(StepStarted(step="1", event="e", attempt=1, params=None)) == {
        "step": "1", "event": "e", "attempt": 1, "params": None}
    assert fields(RunStarted(chain=None, file="f", file_sha256="h", inputs={}, now=None, started_at="s", tools=[],
                             resumed=False))["chain"] is None


def test_decide_answer() -> None:
    with_params = next(r for r in FULL if isinstance(r, Decide))
    assert with_params.answer() == {"action": "continue", "reason": "fine", "source": "model", "params": {"a": 1}}
    without = next(r for r in MINIMAL if isinstance(r, Decide))
    assert without.answer() == {"action": "", "reason": "", "source": ""}


def test_unknown_members_and_the_envelope_are_ignored() -> None:
    for rec in FULL:
        data = {**full(rec.TYPE), "later": {"added": [1]}, "mac": "0" * 32, "x": None}
        assert decode(data) == rec
        assert "later" not in fields(decode(data))


@pytest.mark.parametrize("kind", [None, "", "bogus", "Step_Started", 1, ["clock"]])
def test_unknown_record_type(kind: Any) -> None:
    data = {"value": "v"} if kind is None else {"type": kind, "value": "v"}
    assert _error(data) == f"unknown record type {kind!r}"


REQUIRED = [(kind, name) for kind, names in ORDER.items() for name in names if name not in OPTIONAL[kind]]


@pytest.mark.parametrize("kind, name", REQUIRED)
def test_a_missing_required_member_is_named(kind: str, name: str) -> None:
    data = full(kind)
    del data[name]
    assert _error(data) == f"{kind} record needs {name!r}"


@pytest.mark.parametrize("kind, name", [(k, n) for k, names in OPTIONAL.items() for n in sorted(names)])
def test_a_missing_optional_member_is_unset(kind: str, name: str) -> None:
    data = full(kind)
    del data[name]
    rec = decode(data)
    assert getattr(rec, name) is None and name not in fields(rec)


TYPED = [(kind, name, value, got)
         for kind, kinds in KIND.items() for name, want in kinds.items() if want is not None
         for value, got in WRONG[want]]


@pytest.mark.parametrize("kind, name, value, got", TYPED)
def test_a_member_of_the_wrong_type_is_named(kind: str, name: str, value: Any, got: str) -> None:
    data = {**full(kind), name: value}
    assert _error(data) == f"{kind} record: {name!r} must be {KIND[kind][name]}, not {got}"


@pytest.mark.parametrize("kind, name", [("step_started", "attempt"), ("step_started", "max_attempts"),
                                        ("step_finished", "attempt"), ("step_finished", "duration_ms"),
                                        ("step_progress", "fraction"), ("run_finished", "duration_ms")])
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_not_a_number(kind: str, name: str, value: bool) -> None:
    data = {**full(kind), name: value}
    assert _error(data) == f"{kind} record: {name!r} must be {KIND[kind][name]}, not a boolean"


def test_numbers_accepted_where_a_number_is_expected() -> None:
    for value in (0, 3, 0.5, 1e300, -1.0):
        assert decode({**full("step_finished"), "duration_ms": value}).duration_ms == value  # type: ignore[union-attr]
    for value in (0, 1, 0.25):
        assert decode({**full("step_progress"), "fraction": value}).fraction == value  # type: ignore[union-attr]


NOT_NULLABLE = [(kind, name) for kind, name in REQUIRED if name not in NULLABLE[kind]]


@pytest.mark.parametrize("kind, name", NOT_NULLABLE)
def test_null_where_not_nullable_is_named(kind: str, name: str) -> None:
    data = {**full(kind), name: None}
    assert _error(data) == f"{kind} record: {name!r} must not be null"


@pytest.mark.parametrize("kind, name", [(k, n) for k, names in NULLABLE.items() for n in sorted(names)])
def test_null_where_nullable_is_kept(kind: str, name: str) -> None:
    rec = decode({**full(kind), name: None})
    assert getattr(rec, name) is None
    if name not in OPTIONAL[kind]:
        assert fields(rec)[name] is None  # a required nullable member is written as null


@pytest.mark.parametrize("kind, name", [(k, n) for k, names in OPTIONAL.items() for n in sorted(names)])
def test_null_of_an_optional_member_means_unset(kind: str, name: str) -> None:
    """The codec treats `null` of an optional member as the member left out."""
    rec = decode({**full(kind), name: None})
    assert getattr(rec, name) is None and name not in fields(rec)


@pytest.mark.parametrize("kind, name", [("step_started", "step"), ("step_started", "event"),
                                        ("step_progress", "step"), ("step_progress", "event"),
                                        ("step_finished", "step"), ("step_finished", "event"),
                                        ("decide", "step"), ("decide", "event"), ("hook_fired", "event"),
                                        ("hook_fired", "step"), ("run_started", "file"), ("clock", "value"),
                                        ("clock", "step")])
def test_empty_names_are_refused(kind: str, name: str) -> None:
    assert _error({**full(kind), name: ""}) == f"{kind} record: {name!r} must be a non-empty string"


@pytest.mark.parametrize("status", ["ok", "failed", "skipped", "cancelled"])
def test_step_statuses(status: str) -> None:
    assert decode({**full("step_finished"), "status": status}).status == status  # type: ignore[union-attr]


@pytest.mark.parametrize("status", ["", "OK", "done", "broken", "interrupted", "ok "])
def test_bad_step_status(status: str) -> None:
    assert _error({**full("step_finished"), "status": status}) == f"step_finished record: unknown status {status!r}"


@pytest.mark.parametrize("status", ["ok", "broken", "failed", "limit", "interrupted"])
def test_run_statuses(status: str) -> None:
    assert decode({**full("run_finished"), "status": status}).status == status  # type: ignore[union-attr]


@pytest.mark.parametrize("status", ["", "stopped", "skipped", "cancelled", "Ok"])
def test_bad_run_status(status: str) -> None:
    assert _error({**full("run_finished"), "status": status}) == f"run_finished record: unknown status {status!r}"


@pytest.mark.parametrize("kind", ["step_started", "step_finished"])
@pytest.mark.parametrize("attempt", [0, -1, -(10**20)])
def test_attempt_below_one(kind: str, attempt: int) -> None:
    assert _error({**full(kind), "attempt": attempt}) == f"{kind} record: 'attempt' must be 1 or more"


def test_any_json_value_is_a_result_or_params() -> None:
    values: list[Any] = [None, 0, 1.5, "s", True, [], {}, [{"a": [None]}]]
    for value in values:
        assert decode({**full("step_finished"), "result": value}).result == value  # type: ignore[union-attr]
        assert decode({**full("step_started"), "params": value}).params == value  # type: ignore[union-attr]


def test_record_error_is_a_value_error() -> None:
    assert issubclass(RecordError, ValueError)


# =========================================================================== seals


def run_started() -> dict[str, Any]:
    return {k: v for k, v in fields(FULL[0]).items()}


def write_sealed(path: Path, key: bytes = KEY, lock: RunLock | None = None, n_steps: int = 3) -> int:
    """A sealed transcript: run_started, then per step started/clock/finished; the number of lines."""
    with TranscriptWriter(path, "r", key=key, lock=lock) as w:
        w.write("run_started", **run_started())
        for i in range(1, n_steps + 1):
            w.append(StepStarted(step=str(i), event="e", attempt=1, params={"i": i}, max_attempts=1))
            w.append(Clock(value=f"2025-01-02T03:04:0{i}Z", step=str(i)))
            w.append(StepFinished(step=str(i), event="e", status="ok", result={"i": i}, error=None,
                                  duration_ms=1, attempt=1))
        return w.last_seq


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def refused(path: Path, key: bytes | None = KEY, head: Head | None = None) -> str:
    with pytest.raises(TranscriptError) as info:
        read_transcript(path, key=key, head=head)
    return str(info.value)


def test_a_sealed_transcript_verifies(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    n = write_sealed(path)
    for raw in raw_lines(path):
        parts = split_sealed(raw.rstrip(b"\n"))
        assert parts is not None and re.fullmatch(rb"[0-9a-f]{32}", parts[1])
    t = read_transcript(path, key=KEY)
    assert t.last_seq == n and all("mac" not in e.as_dict() for e in t.records)  # the seal is the line's
    assert t.records == read_transcript(path).records


def test_the_chain_is_what_integrity_says(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path, n_steps=1)
    previous = GENESIS
    for raw in raw_lines(path):
        parts = split_sealed(raw.rstrip(b"\n"))
        assert parts is not None
        body, mac = parts
        assert mac == mac_of(KEY, previous, body)
        assert seal(KEY, previous, body + b"}\n") == (raw, mac)
        previous = mac


def _edit_ts(raw: bytes) -> bytes:
    """The line with one byte changed: the last millisecond digit of its `ts`."""
    i = raw.index(b'Z","') - 1
    digit = raw[i:i + 1]
    return raw[:i] + (b"1" if digit != b"1" else b"2") + raw[i + 1:]


@pytest.mark.parametrize("number", [1, 2, 5, 10])
def test_editing_a_byte_is_found_at_that_line(tmp_path: Path, number: int) -> None:
    path = tmp_path / "t.jsonl"
    n = write_sealed(path)
    assert n == 10
    data = raw_lines(path)
    data[number - 1] = _edit_ts(data[number - 1])
    path.write_bytes(b"".join(data))
    message = refused(path)
    assert message.startswith(f"{path}:{number}: the record does not match its seal")
    assert read_transcript(path, key=None).last_seq == n  # without a key the edit goes unnoticed


@pytest.mark.parametrize("where", ["body", "mac"])
def test_editing_a_value_or_the_mac_is_found(tmp_path: Path, where: str) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    data = raw_lines(path)
    if where == "body":
        data[3] = data[3].replace(b'"result":{"i":1}', b'"result":{"i":7}')
    else:
        i = data[3].rindex(b'"}')
        data[3] = data[3][: i - 1] + (b"0" if data[3][i - 1:i] != b"0" else b"1") + data[3][i:]
    path.write_bytes(b"".join(data))
    assert refused(path).startswith(f"{path}:4: the record does not match its seal")


@pytest.mark.parametrize("number", [1, 4, 9])
def test_removing_a_line_is_found_at_the_line_after_it(tmp_path: Path, number: int) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    data = raw_lines(path)
    del data[number - 1]
    path.write_bytes(b"".join(data))
    assert refused(path).startswith(f"{path}:{number}: the record does not match its seal")


@pytest.mark.parametrize("number", [1, 3, 9])
def test_swapping_two_lines_is_found_at_the_first(tmp_path: Path, number: int) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    data = raw_lines(path)
    data[number - 1], data[number] = data[number], data[number - 1]
    path.write_bytes(b"".join(data))
    assert refused(path).startswith(f"{path}:{number}: the record does not match its seal")


def test_another_key_fails_at_line_1(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    for key in (OTHER_KEY, b"", KEY[:16]):
        assert refused(path, key=key).startswith(f"{path}:1: the record does not match its seal")
    with pytest.raises(TranscriptError, match=":1: the record does not match its seal"):
        TranscriptWriter(path, "r", key=OTHER_KEY)  # a writer does not resume what it cannot verify


@pytest.mark.parametrize("how", ["unsealed", "uppercase", "not last", "short"])
def test_a_line_without_a_proper_seal_is_refused(tmp_path: Path, how: str) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    data = raw_lines(path)
    rec = json.loads(data[2])
    mac = rec.pop("mac")
    if how == "unsealed":
        line = json.dumps(rec, separators=(",", ":"))
    elif how == "uppercase":
        line = json.dumps({**rec, "mac": mac.upper()}, separators=(",", ":"))
    elif how == "not last":
        line = json.dumps({"mac": mac, **rec}, separators=(",", ":"))
    else:
        line = json.dumps({**rec, "mac": mac[:-1]}, separators=(",", ":"))
    data[2] = line.encode() + b"\n"
    path.write_bytes(b"".join(data))
    assert refused(path).startswith(f"{path}:3: the line has no seal (mac)")
    assert read_transcript(path, key=None).last_seq == 10  # not checked without a key


def test_without_a_key_seals_are_ignored_and_stripped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sealed(path)
    data = raw_lines(path)
    data[1], data[2] = data[2], data[1]  # seals broken, seq order too
    path.write_bytes(b"".join(data))
    assert "does not match its seal" in refused(path)
    assert "seq 2 does not follow seq 3" in refused(path, key=None)
    data[1], data[2] = data[2], data[1]
    data[5] = _edit_ts(data[5])
    data[6] = json.dumps({k: v for k, v in json.loads(data[6]).items() if k != "mac"}).encode() + b"\n"
    path.write_bytes(b"".join(data))
    t = read_transcript(path)  # key=None
    assert t.last_seq == 10 and all("mac" not in e.as_dict() for e in t.records)
    assert t.steps["2"].done


# =========================================================================== the head


def head_text(transcript: Path) -> str:
    return head_path(transcript).read_text(encoding="ascii")


def head_seq(transcript: Path) -> int:
    match = re.fullmatch(r"pid=(\d{10}) seq=(\d{20}) mac=([0-9a-f]{32}|-{32}) seal=([0-9a-f]{32})\n",
                         head_text(transcript))
    assert match, head_text(transcript)
    return int(match.group(2))


def test_run_lock_is_exclusive_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lock = RunLock.acquire(path)
    try:
        assert head_path(path).is_file()
        assert head_text(path).startswith(f"pid={os.getpid():010d} ")
        with pytest.raises(RunInUse) as info:
            RunLock.acquire(path)
        assert info.value.pid == os.getpid()
        assert f"in use by process {os.getpid()}" in str(info.value)
        with pytest.raises(RunInUse):
            RunLock.acquire(path, create=False)
    finally:
        lock.release()
    lock.release()  # idempotent
    with RunLock.acquire(path) as again:  # released: it can be taken again
        assert again.found is not None and again.found.seq == 0
        with pytest.raises(RunInUse):
            RunLock.acquire(path)
    RunLock.acquire(path).release()


def test_run_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from chainlang.journal.lock import RunInUse, RunLock
        try:
            RunLock.acquire(Path(sys.argv[1]))
        except RunInUse as exc:
            print(exc.pid)
        else:
            print("taken")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    def other() -> str:
        return subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()

    with RunLock.acquire(path):
        assert other() == str(os.getpid())
    assert other() == "taken"  # that process ended: the kernel released its hold
    with RunLock.acquire(path):
        pass


def test_missing_head_without_create(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        RunLock.acquire(path, create=False)
    assert not head_path(path).exists()


def test_head_moves_before_actions_and_at_close(tmp_path: Path) -> None:
    """The head moves at the run's start, when the interpreter commits (after the start of
    a step that is not idempotent, before it acts) and at close."""
    path = tmp_path / "t.jsonl"
    with RunLock.acquire(path) as lock:
        assert lock.found is None and not lock.damaged
        with TranscriptWriter(path, "r", key=KEY, lock=lock) as w:
            w.write("run_started", **run_started())
            assert head_seq(path) == 1
            w.append(StepStarted(step="1", event="e", attempt=1, params=None))
            assert head_seq(path) == 1  # an idempotent step's start: not committed
            w.commit()
            assert head_seq(path) == 2
            w.append(Clock(value="v", step="1"))
            w.append(StepFinished(step="1", event="e", status="ok", result=None, error=None, duration_ms=1,
                                  attempt=1))
            assert head_seq(path) == 2  # lines after an action are covered by the chain only
        assert head_seq(path) == 4  # closing moves it to the last line
    with RunLock.acquire(path, create=False) as again:
        found = again.found
        assert found is not None and found.seq == 4 and found.valid(KEY) and not found.valid(OTHER_KEY)
        assert read_transcript(path, key=KEY, head=found).last_seq == 4


def test_lines_after_the_head_are_accepted(tmp_path: Path) -> None:
    """A crash after an action leaves the head behind the last lines: that is a crash, not tampering."""
    path = tmp_path / "t.jsonl"
    lock = RunLock.acquire(path)
    w = TranscriptWriter(path, "r", key=KEY, lock=lock)
    w.write("run_started", **run_started())
    w.append(StepStarted(step="1", event="e", attempt=1, params=None))
    w.commit()
    w.append(Clock(value="v", step="1"))
    lock.release()  # as a SIGKILL would: the head is not moved at close
    w.close()
    with RunLock.acquire(path, create=False) as again:
        assert again.found is not None and again.found.seq == 2
        assert read_transcript(path, key=KEY, head=again.found).last_seq == 3


def test_records_removed_from_the_end_are_found(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with RunLock.acquire(path) as lock:
        n = write_sealed(path, lock=lock)
    data = raw_lines(path)
    path.write_bytes(b"".join(data[:6]))  # the chain of what is left is intact
    assert read_transcript(path, key=KEY).last_seq == 6
    with RunLock.acquire(path, create=False) as again:
        assert again.found is not None and again.found.seq == n
        message = refused(path, head=again.found)
    assert message == (f"{path}:6: the transcript ends at seq 6 but its writer recorded seq {n}: records were "
                       "removed from its end; it cannot be trusted")
    assert "records were removed from its end" in message


def test_a_head_sealed_with_another_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with RunLock.acquire(path) as lock:
        n = write_sealed(path, lock=lock)
        assert lock.found is None
    data = raw_lines(path)
    last_mac = split_sealed(data[-1].rstrip(b"\n"))
    assert last_mac is not None
    with RunLock.acquire(path, create=False) as forged:
        forged.use_key(OTHER_KEY)
        forged.record(n, last_mac[1])
    with RunLock.acquire(path, create=False) as again:
        assert again.found is not None and again.found.seq == n and again.found.mac == last_mac[1]
        message = refused(path, head=again.found)
    assert message == (f"{path}.head: the head file is damaged or was not sealed with this project's key; "
                       "the transcript cannot be trusted")


def test_a_head_of_another_transcript_is_refused(tmp_path: Path) -> None:
    """Same key, a line at the head's seq, but not the line the head sealed: refused, naming it."""
    path, other = tmp_path / "t.jsonl", tmp_path / "o.jsonl"
    with RunLock.acquire(path) as lock:
        assert write_sealed(path, lock=lock, n_steps=2) == 7
    with RunLock.acquire(path, create=False) as held:
        head = held.found
    assert head is not None and head.seq == 7 and head.valid(KEY)
    with TranscriptWriter(other, "r", key=KEY) as w:  # a valid chain of 7 lines, another run
        w.write("run_started", **run_started())
        for i in range(1, 7):
            w.append(StepStarted(step=str(i), event="other", attempt=1, params=None))
    assert read_transcript(other, key=KEY).last_seq == 7
    assert refused(other, head=head) == (f"{other}:7: the record does not match the head file (seq 7); "
                                         "the transcript cannot be trusted")


def test_a_damaged_head_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    head_path(path).write_bytes(b"garbage\n")
    with RunLock.acquire(path, create=False) as lock:
        assert lock.found is None and lock.damaged
        assert head_text(path).startswith(f"pid={os.getpid():010d} seq={0:020d} ")


# =========================================================================== the key


def test_load_key_creates_a_private_key_and_reuses_it(tmp_path: Path) -> None:
    key = load_key(tmp_path, create=True)
    path = tmp_path / KEY_FILE
    assert path == tmp_path / ".chainlang" / "transcript.key"
    assert isinstance(key, bytes) and len(key) == 32
    text = path.read_text(encoding="ascii")
    assert re.fullmatch(r"[0-9a-f]{64}\n", text) and bytes.fromhex(text) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(tmp_path, create=True) == key
    assert load_key(tmp_path, create=False) == key
    assert sorted(p.name for p in path.parent.iterdir()) == ["transcript.key"]  # no temporary file left
    assert load_key(tmp_path / "elsewhere", create=True) != key


def test_a_missing_key_without_create(tmp_path: Path) -> None:
    with pytest.raises(IntegrityError) as info:
        load_key(tmp_path, create=False)
    assert str(info.value).startswith(f"{tmp_path / KEY_FILE}: the project's transcript key is missing")
    assert not (tmp_path / ".chainlang").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"\n", b"not hex at all", b"ab" * 31, b"ab" * 33, b"zz" * 32, b"ab" * 32 + b"x", b"ab" * 16],
    ids=["empty", "newline", "text", "short", "long", "not-hex", "trailing", "half"],
)
def test_a_damaged_key_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / KEY_FILE
    path.parent.mkdir()
    path.write_bytes(content)
    for create in (False, True):
        with pytest.raises(IntegrityError) as info:
            load_key(tmp_path, create=create)
        assert str(info.value) == (
            f"{path}: not a transcript key (64 hex characters expected); delete it to make a new one "
            "(transcripts sealed with the old key can then no longer be resumed)")
    assert path.read_bytes() == content  # never replaced behind the user's back


def test_an_unreadable_key_file(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    path.parent.mkdir()
    path.write_bytes("é".encode() * 32)
    with pytest.raises(IntegrityError, match=r"cannot read the transcript key"):
        load_key(tmp_path, create=True)
    path.unlink()
    path.mkdir()
    with pytest.raises(IntegrityError, match=r"transcript.key: cannot read the transcript key: Is a directory"):
        load_key(tmp_path, create=True)


def test_the_key_file_tolerates_surrounding_whitespace(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    path.parent.mkdir()
    path.write_text("  " + KEY.hex().upper() + "\r\n\n", encoding="ascii")
    assert load_key(tmp_path, create=False) == KEY


def test_threads_creating_the_key_at_once_agree(tmp_path: Path) -> None:
    barrier = threading.Barrier(8)
    keys: list[bytes] = []

    def make() -> None:
        barrier.wait()
        keys.append(load_key(tmp_path, create=True))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and set(keys) == {load_key(tmp_path, create=False)}
    assert sorted(p.name for p in (tmp_path / ".chainlang").iterdir()) == ["transcript.key"]


def test_processes_creating_the_key_at_once_agree(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from chainlang.journal.integrity import load_key
        root, go = Path(sys.argv[1]), Path(sys.argv[2])
        (root.parent / f"ready-{sys.argv[3]}").touch()
        while not go.exists():
            time.sleep(0.0005)
        print(load_key(root, create=True).hex())
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for round_ in range(3):
        base = tmp_path / f"round{round_}"
        root, go = base / "project", base / "go"
        root.mkdir(parents=True)
        procs = [subprocess.Popen([sys.executable, "-c", script, str(root), str(go), str(i)], env=env,
                                  stdout=subprocess.PIPE, text=True) for i in range(4)]
        try:
            deadline = time.monotonic() + 60
            while len(list(base.glob("ready-*"))) < len(procs):
                assert time.monotonic() < deadline, "the processes did not start"
                time.sleep(0.005)
            go.touch()
            outs = [p.communicate(timeout=60)[0].strip() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert [p.returncode for p in procs] == [0] * len(procs)
        key = load_key(root, create=False)
        assert outs == [key.hex()] * len(procs)
        assert stat.S_IMODE((root / KEY_FILE).stat().st_mode) == 0o600
        assert sorted(p.name for p in (root / ".chainlang").iterdir()) == ["transcript.key"]


# -- found in review: a numeric secret, a lone surrogate ---------------------------------------


def test_a_numeric_secret_in_a_duration_leaves_the_record_valid(tmp_path: Path) -> None:
    """Masking a duration whose digits contain a secret turned it into "***": a record the
    reader (and so resume) then refused. Counts, durations and statuses are not masked."""
    from chainlang.journal.jsonl import TranscriptWriter, read_transcript
    from chainlang.journal.records import RunStarted, StepFinished, StepStarted

    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["1234"]) as w:
        w.append(RunStarted(None, "/c.chain.yaml", "0" * 64, {}, None, "2026-01-01", [], False))
        w.append(StepStarted("1", "e.v", 1, {"pin": "1234"}, 1))
        w.append(StepFinished("1", "e.v", "ok", {"pin": 1234}, None, 0.1234, 1))
    t = read_transcript(path, key=b"")
    assert isinstance(t.steps["1"].finished, StepFinished) and t.steps["1"].finished.duration_ms == 0.1234
    assert t.steps["1"].finished.result == {"pin": "***"} and t.steps["1"].started.params == {"pin": "***"}


def test_a_lone_surrogate_keeps_the_envelope_first_and_moves_the_head(tmp_path: Path) -> None:
    import os

    from chainlang.journal.jsonl import TranscriptWriter, read_transcript
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import RunStarted, StepStarted

    path = tmp_path / "t.jsonl"
    key = os.urandom(32)
    lock = RunLock.acquire(path)
    w = TranscriptWriter(path, "r", key=key, lock=lock)
    w.append(RunStarted(None, "/c.chain.yaml", "0" * 64, {"s": "x\udc80"}, None, "2026-01-01", [], False))
    first = path.read_text(encoding="utf-8").splitlines()[-1]
    assert first.startswith('{"type":"run_started","run_id":"r","seq":1,'), first
    w.append(StepStarted("1", "e.v", 1, {"s": "x\udc80"}, 1))
    last = path.read_text(encoding="utf-8").splitlines()[-1]
    assert last.startswith('{"type":"step_started","run_id":"r","seq":2,'), last
    lock.release()  # without closing the writer: the head moved by itself at run_started (a crash here)
    again = RunLock.acquire(path, create=False)
    try:
        assert again.found is not None and again.found.seq == 1
        read_transcript(path, key=key, head=again.found)
    finally:
        again.release()
        w.close()
