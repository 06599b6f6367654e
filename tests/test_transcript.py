"""The durable transcript (LANGUAGE.md §9): writer, reader, redaction, idempotency keys.

Every record these tests write is a valid record of its type (chainlang.journal.records):
the writer and the reader both refuse any other. The codec itself, the seals and the head
file have their own tests in test_journal.py.
"""

from __future__ import annotations

import enum
import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.jsonl import (
    RECORD_TYPES,
    Entry,
    Transcript,
    TranscriptError,
    TranscriptWriter,
    idempotency_key,
    read_transcript,
)
from chainlang.journal.integrity import GENESIS, seal
from chainlang.journal.lock import RunLock
from chainlang.journal.records import (
    Clock,
    Decide,
    Envelope,
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
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SECRET = "sk-live-0123456789abcdef"
ENVELOPE = ("type", "run_id", "seq", "ts")
KEY = bytes(range(32))


def lines(path: Path) -> list[dict[str, Any]]:
    """The records as written, without their seals (`mac`)."""
    out = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for rec in out:
        assert list(rec)[-1] == "mac", rec
        assert re.fullmatch(r"[0-9a-f]{32}", rec.pop("mac")), rec
    return out


def members(rec: dict[str, Any]) -> dict[str, Any]:
    """A record read back, without its envelope."""
    return {k: v for k, v in rec.items() if k not in ENVELOPE}


# --------------------------------------------------------------------------- valid records


RUN: dict[str, Any] = {
    "chain": "deploy.release",
    "file": "/proj/chains/deploy.yaml",
    "file_sha256": "5e" * 32,
    "inputs": {"env": "prod"},
    "now": "2025-01-02T03:04:05Z",
    "started_at": "2025-01-02T03:04:05Z",
    "tools": ["tools.http.get"],
    "resumed": False,
}


def run_started(**over: Any) -> dict[str, Any]:
    return {**RUN, **over}


def step_started(step: str, event: str = "e", attempt: int = 1, **over: Any) -> dict[str, Any]:
    return {"step": step, "event": event, "attempt": attempt, "params": None, **over}


def step_finished(step: str, event: str = "e", status: str = "ok", attempt: int = 1, **over: Any) -> dict[str, Any]:
    return {"step": step, "event": event, "status": status, "result": None, "error": None, "duration_ms": 1,
            "attempt": attempt, **over}


def step_progress(step: str, event: str = "e", message: Any = "working", **over: Any) -> dict[str, Any]:
    return {"step": step, "event": event, "message": message, **over}


def decide(step: str, event: str = "e", action: str = "continue", **over: Any) -> dict[str, Any]:
    return {"step": step, "event": event, "asked": {"condition": None, "errors": [], "params": {}},
            "action": action, "reason": "fine", "source": "embedded", **over}


def hook_fired(**over: Any) -> dict[str, Any]:
    return {"hook": "notify", "when": "post", "event": "e", **over}


def hook_finished(**over: Any) -> dict[str, Any]:
    return {"hook": "notify", "status": "ok", "error": None, "duration_ms": 1.5, **over}


def hook_dropped(**over: Any) -> dict[str, Any]:
    return {"hook": "notify", "when": "post", "event": "e", "reason": "single", "message": "busy", **over}


def run_finished(status: str = "ok", **over: Any) -> dict[str, Any]:
    return {"status": status, "outputs": {}, "error": None, "duration_ms": 5, **over}


def clock(value: Any = "2025-01-02T03:04:05Z", **over: Any) -> dict[str, Any]:
    return {"value": value, **over}


#: one valid record of every type (each test overrides the members it is about)
VALID: dict[str, dict[str, Any]] = {
    "run_started": run_started(),
    "step_started": step_started("1"),
    "step_progress": step_progress("1"),
    "decide": decide("1"),
    "hook_fired": hook_fired(),
    "hook_finished": hook_finished(),
    "hook_dropped": hook_dropped(),
    "step_finished": step_finished("1"),
    "run_finished": run_finished(),
    "clock": clock(),
    "model_call": {"step": "1", "tier": "light", "model": "m", "task": "decide", "request": {}, "answer": "{}",
                   "usage": {}, "duration_ms": 2},
    "wait_started": {"step": "2", "event": "approval.given", "where": None, "values": {}, "deadline": None},
    "wait_finished": {"step": "2", "status": "ok", "payload": {"a": 1}},
}
assert set(VALID) == RECORD_TYPES


def write_run(path: Path, run_id: str = "run-1", **kwargs: Any) -> None:
    """A small run: two steps (one retried), a decide, a hook, clock readings, a finish.
    Every member of every type appears (optional ones too), in the order of `fields()`."""
    http = "tools.http.get"
    with TranscriptWriter(path, run_id, **kwargs) as w:
        w.write("run_started", **RUN)
        w.write("clock", value="2025-01-02T03:04:05Z")
        w.write("step_started", step="1", event=http, attempt=1, max_attempts=2, params={"url": "https://x"})
        w.write("step_progress", step="1", event=http, message="half", fraction=0.5)
        w.write("step_finished", step="1", event=http, status="failed", result=None,
                error={"type": "HttpError", "message": "boom"}, duration_ms=3, attempt=1)
        w.write("step_started", step="1", event=http, attempt=2, max_attempts=2, params={"url": "https://x"})
        w.write("step_finished", step="1", event=http, status="ok", result={"code": 200}, error=None,
                duration_ms=4.5, attempt=2)
        w.write("decide", step="3.1", event="agent.ask", asked={"condition": "x > 1", "errors": [], "params": {}},
                action="skip", reason="x is small", source="embedded")
        w.write("decide", step="3.1", event="agent.ask", asked={"condition": None, "errors": ["q"], "params": {}},
                action="continue", params={"q": "why?"}, reason="fixed the params", source="model")
        w.write("hook_fired", hook="notify", when="post", event=http, step="1", trigger="post:tools.http.*")
        w.write("hook_finished", hook="notify", step="1", status="failed", error={"type": "chain", "message": "m"},
                duration_ms=1.5)
        w.write("hook_dropped", hook="notify", when="post", event=http, step="1", reason="single",
                message="its previous action still runs")
        w.write("step_started", step="3.1", event="agent.ask", attempt=1, params={"q": "why?"})
        w.write("clock", value="2025-01-02T03:04:06Z", step="3.1")
        w.write("model_call", step="3.1", tier="light", model="m", task="decide", request={"messages": []},
                answer="{}", usage={"prompt_tokens": 2, "completion_tokens": 1}, duration_ms=3.5,
                error={"type": "model", "message": "late"})
        w.write("wait_started", step="4", event="approval.given", where="draft_id == d.result",
                values={"d.result": "x"}, deadline="2025-01-04T03:04:05.000Z",
                question={"id": "q-1", "question": "ok?"})
        w.write("wait_finished", step="4", status="ok", payload={"draft_id": "x"}, emit_id="e-1",
                at="2025-01-02T03:04:07.000Z")
        w.write("run_finished", status="ok", outputs={"answer": "é✓"}, error=None, duration_ms=12.5)


# --------------------------------------------------------------------------- round trip


def test_round_trip_of_every_type(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "run.jsonl"  # parent dirs are created
    write_run(path)
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n") and ", " not in raw and '": ' not in raw  # compact
    assert "é✓" in raw  # ensure_ascii=False
    recs = lines(path)
    assert {r["type"] for r in recs} == RECORD_TYPES
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    for r in recs:
        assert list(r)[:4] == ["type", "run_id", "seq", "ts"]
        assert r["run_id"] == "run-1"
        assert TS.match(r["ts"]), r["ts"]
        # each line is exactly its typed record: same members, in the codec's order
        assert list(fields(decode(r)).items()) == list(members(r).items())

    t = read_transcript(path)
    assert isinstance(t, Transcript)
    assert t.run_id == "run-1" and t.last_seq == len(recs) and not t.torn_tail
    assert isinstance(t.started, RunStarted) and t.started.chain == "deploy.release"
    assert t.started.inputs == {"env": "prod"}
    assert t.started.now == "2025-01-02T03:04:05Z" and t.started.resumed is False
    assert isinstance(t.finished, RunFinished) and t.finished.outputs == {"answer": "é✓"}
    # every line decoded once: its typed record beside its envelope, nothing left as a dict
    assert [type(e) for e in t.records] == [Entry] * len(recs)
    assert [e.record for e in t.records] == [decode(r) for r in recs]
    assert [type(e.record).TYPE for e in t.records] == [r["type"] for r in recs]
    assert [e.envelope for e in t.records] == [Envelope(r["run_id"], r["seq"], r["ts"]) for r in recs]
    assert [e.as_dict() for e in t.records] == recs  # the line as written, when one is to be shown
    assert t.records[0].record is t.started and t.records[-1].record is t.finished
    assert list(t.steps) == ["1", "3.1"]
    one = t.steps["1"]
    assert isinstance(one.started, StepStarted) and one.attempts == 2 and one.started.attempt == 2
    assert isinstance(one.finished, StepFinished) and one.finished.status == "ok" and one.done
    assert one.finished.attempt == 2 and one.finished.result == {"code": 200}
    assert one.started.max_attempts == 2 and one.started.params == {"url": "https://x"}
    assert [s.step for s in t.unfinished()] == ["3.1"]
    assert t.steps["3.1"].finished is None and t.steps["3.1"].attempts == 1
    assert isinstance(t.steps["3.1"].started, StepStarted)
    assert t.clock_readings == ["2025-01-02T03:04:05Z", "2025-01-02T03:04:06Z"]
    assert all(isinstance(d, Decide) for d in t.decisions["3.1"])
    assert [d.action for d in t.decisions["3.1"]] == ["skip", "continue"]
    assert t.decisions["3.1"][1].params == {"q": "why?"} and t.decisions["3.1"][0].params is None
    assert t.restarts == []
    kinds = {type(e.record) for e in t.records}
    assert kinds == {RunStarted, Clock, StepStarted, StepProgress, StepFinished, Decide, HookFired, HookFinished,
                     HookDropped, ModelCall, RunFinished, WaitStarted, WaitFinished}


def test_a_member_the_codec_does_not_know_is_not_carried_along(tmp_path: Path) -> None:
    """The reader hands back each line's typed record: a member no record type has (a
    newer writer's, a hand edit's) is read past, not kept beside the record."""
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        w.write("step_started", **step_started("1", params={"n": 1}))
    edited = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    edited[1]["extra"] = {"x": 1}
    path.write_text("".join(json.dumps(rec) + "\n" for rec in edited), encoding="utf-8")
    t = read_transcript(path)  # key=None: the seal of the edited line is not checked
    assert t.steps["1"].started == StepStarted(step="1", event="e", attempt=1, params={"n": 1})
    assert t.records[1].record is t.steps["1"].started
    assert "extra" not in t.records[1].as_dict() and t.records[1].as_dict()["params"] == {"n": 1}


def test_append_writes_typed_records(tmp_path: Path) -> None:
    """`append` (the interpreter's path) writes a typed record's members in the codec's
    order after the envelope; it reads back as the same record."""
    typed: list[Record] = [
        RunStarted(chain=None, file="/p/c.yaml", file_sha256="ab" * 32, inputs={"n": 1}, now=None,
                   started_at="2025-01-02T03:04:05Z", tools=[], resumed=False),
        StepStarted(step="1", event="e", attempt=1, params={"n": 1}, max_attempts=3),
        StepProgress(step="1", event="e", message="half", fraction=None),
        Clock(value="2025-01-02T03:04:05Z", step="1"),
        StepFinished(step="1", event="e", status="skipped", result=None, error=None, duration_ms=0, attempt=1,
                     reason="its if is false"),
        Decide(step="2", event="e", asked={"condition": "x"}, action="break", reason="done", source="model"),
        StepStarted(step="2", event="e", attempt=1, params=None),
        StepFinished(step="2", event="e", status="cancelled", result=None, error={"type": "X", "message": "m"},
                     duration_ms=0.25, attempt=1, broke=True),
        HookFired(hook="h", when="pre", event="e"),
        RunFinished(status="broken", outputs={}, error={"type": "Break", "message": "b"}, duration_ms=7.5),
    ]
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        returned = [w.append(rec) for rec in typed]
    recs = lines(path)
    assert returned == recs
    for rec, written in zip(typed, recs):
        assert list(written)[:4] == list(ENVELOPE) and written["type"] == rec.TYPE
        assert list(members(written).items()) == list(fields(rec).items())
        assert decode(written) == rec
    t = read_transcript(path)
    assert [e.record for e in t.records] == typed  # read back as the very records appended
    assert [e.as_dict() for e in t.records] == recs
    assert isinstance(t.finished, RunFinished) and t.finished.status == "broken"
    assert "fraction" not in recs[2]  # an optional member that is not set is left out
    assert "max_attempts" not in recs[6] and recs[6]["params"] is None


def test_write_returns_the_record_as_written(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", "r") as w:
        rec = w.write("run_started", **RUN)
        assert w.last_seq == 1
    assert rec == lines(tmp_path / "t.jsonl")[0]
    assert members(rec) == RUN
    assert w.closed


def test_retry_resets_the_finished_record(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        w.write("step_started", **step_started("2", attempt=1))
        w.write("step_finished", **step_finished("2", status="failed", attempt=1,
                                                 error={"type": "E", "message": "m"}))
        w.write("step_started", **step_started("2", attempt=2))
    t = read_transcript(path)
    assert t.steps["2"].attempts == 2 and t.steps["2"].finished is None
    assert isinstance(t.steps["2"].started, StepStarted) and t.steps["2"].started.attempt == 2
    assert t.unfinished() == [t.steps["2"]]
    assert t.finished is None


def test_a_later_run_started_reopens_the_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **run_started(started_at="first"))
        w.write("run_finished", **run_finished("interrupted"))
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **run_started(started_at="second", resumed=True))
    t = read_transcript(path)
    assert t.started.started_at == "first" and t.started.resumed is False
    assert all(isinstance(r, RunStarted) for r in t.restarts)
    assert [(r.started_at, r.resumed) for r in t.restarts] == [("second", True)]
    assert t.finished is None


# --------------------------------------------------------------------------- resume


def test_seq_continues_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        assert not w.resumed and w.last_seq == 0
        w.write("run_started", **RUN)
        w.write("step_started", **step_started("1"))
    with TranscriptWriter(path, "r") as w:
        assert w.resumed and w.last_seq == 2
        assert w.write("step_finished", **step_finished("1"))["seq"] == 3
    assert [r["seq"] for r in lines(path)] == [1, 2, 3]
    assert read_transcript(path).steps["1"].done


def test_reopen_with_another_run_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r1") as w:
        w.write("run_started", **RUN)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="r1"):
        TranscriptWriter(path, "r2")
    assert path.read_bytes() == before


def test_reopen_of_a_corrupt_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"nope": 1}\n{"also": 2}\n')
    with pytest.raises(TranscriptError, match=":1: the line has no seal"):  # the writer verifies seals first
        TranscriptWriter(path, "r")
    reseal(path)  # sealed, and still no record
    with pytest.raises(TranscriptError, match=":1: a record without a type"):
        TranscriptWriter(path, "r")


def test_reopen_of_a_transcript_with_an_invalid_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    _corrupt(path, 5, _line("step_finished", seq=5, **step_finished("1", error="boom")))
    reseal(path)  # as only the writer could: what refuses the line is the codec, not its seal
    before = path.read_bytes()
    with pytest.raises(TranscriptError, match=r":5: step_finished record: 'error' must be an object, not a string"):
        TranscriptWriter(path, "run-1")
    assert path.read_bytes() == before


# --------------------------------------------------------------------------- torn tail


def test_torn_last_line_is_tolerated_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    n = len(lines(path))
    with path.open("ab") as f:
        f.write(b'{"type":"step_started","run_id":"run-1","seq":99,"ts":"2025-')
    t = read_transcript(path)
    assert t.torn_tail and t.last_seq == n and len(t.records) == n

    # the writer cuts the fragment off before appending, so no line glues onto it
    with TranscriptWriter(path, "run-1") as w:
        assert w.repaired_torn_tail and w.last_seq == n
        w.write("step_finished", **step_finished("3.1", event="agent.ask", result={"a": 1}))
    t = read_transcript(path)
    assert not t.torn_tail and t.last_seq == n + 1 and t.unfinished() == []
    assert read_transcript(path, key=b"").last_seq == n + 1  # the chain of seals continues across the cut


def test_torn_multibyte_tail_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write('{"type":"decide","x":"é'.encode()[:-1])  # cut inside a UTF-8 sequence
    assert read_transcript(path).torn_tail


def test_file_holding_only_a_fragment(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"run_sta')
    with pytest.raises(TranscriptError, match="no run_started"):
        read_transcript(path)
    with TranscriptWriter(path, "r") as w:  # nothing usable: start afresh
        assert w.repaired_torn_tail and not w.resumed
        assert w.write("run_started", **RUN)["seq"] == 1
    assert read_transcript(path).last_seq == 1


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    n = len(lines(path))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    t = read_transcript(path)
    assert not t.torn_tail and t.last_seq == n and t.finished is not None
    with TranscriptWriter(path, "run-1") as w:
        assert not w.repaired_torn_tail
        w.write("run_started", **run_started(resumed=True))
    assert [r["seq"] for r in lines(path)] == list(range(1, n + 2))
    assert read_transcript(path, key=b"").restarts[0].resumed is True


# --------------------------------------------------------------------------- corruption


def _corrupt(path: Path, number: int, text: str) -> None:
    all_lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    all_lines[number - 1] = text + "\n"
    path.write_text("".join(all_lines), encoding="utf-8")


def reseal(path: Path, key: bytes = b"") -> None:
    """Seal every line again along the chain (a writer without a key seals with b"")."""
    previous, out = GENESIS, []
    for raw in path.read_bytes().splitlines():
        rec = json.loads(raw)
        rec.pop("mac", None)
        sealed, previous = seal(key, previous, json.dumps(rec, separators=(",", ":")).encode() + b"\n")
        out.append(sealed)
    path.write_bytes(b"".join(out))


def _line(kind: str, run_id: Any = "run-1", seq: Any = 4, ts: Any = "2025-01-02T03:04:05.678Z", **rec: Any) -> str:
    """A line as a hand (not the writer) would write it; `...` leaves an envelope member out."""
    envelope = {"type": kind, "run_id": run_id, "seq": seq, "ts": ts}
    return json.dumps({k: v for k, v in {**envelope, **rec}.items() if v is not ...}, separators=(",", ":"))


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"type":"step_started","run_id":"run-1","seq":', "not a JSON line"),
        ("", "not a JSON line"),
        ("[1, 2]", "expected a JSON object, got an array"),
        (_line("bogus"), "unknown record type 'bogus'"),
        (_line("hook_fired", run_id=..., **hook_fired()), "hook_fired record without a string run_id"),
        (_line("hook_fired", seq="4", **hook_fired()), "integer seq"),
        (_line("hook_fired", seq=True, **hook_fired()), "integer seq"),
        (_line("hook_fired", ts=..., **hook_fired()), "without a string ts"),
        (_line("hook_fired", run_id="other", **hook_fired()), "run 'other'"),
        (_line("hook_fired", seq=2, **hook_fired()), "seq 2 does not follow seq 3"),
        (_line("hook_fired", seq=3, **hook_fired()), "seq 3 does not follow seq 3"),
        (_line("step_finished", **step_finished("9")), "step 9 finished but never started"),
        # what the codec refuses, named by the reader with the line
        (_line("step_started", event="e", attempt=1, params=None), "step_started record needs 'step'"),
        (_line("clock"), "clock record needs 'value'"),
        (_line("decide", **{k: v for k, v in decide("1").items() if k != "step"}), "decide record needs 'step'"),
        (_line("decide", **{k: v for k, v in decide("1").items() if k != "asked"}), "decide record needs 'asked'"),
        (_line("hook_fired", hook="h", when="post"), "hook_fired record needs 'event'"),
        (_line("hook_fired", **hook_fired(hook=None)), "hook_fired record: 'hook' must not be null"),
        (_line("run_started", chain="c", inputs={}, options={}), "run_started record needs 'file'"),
        (_line("step_finished", **{k: v for k, v in step_finished("1").items() if k != "result"}),
         "step_finished record needs 'result'"),
        (_line("step_finished", **step_finished("1", error="boom")),
         "step_finished record: 'error' must be an object, not a string"),
        (_line("step_finished", **step_finished("1", status="done")), "step_finished record: unknown status 'done'"),
        (_line("step_finished", **step_finished("1", attempt=True)),
         "step_finished record: 'attempt' must be an integer, not a boolean"),
        (_line("step_started", **step_started("1", attempt=0)), "step_started record: 'attempt' must be 1 or more"),
        (_line("step_progress", **step_progress("1", fraction="half")),
         "step_progress record: 'fraction' must be a number, not a string"),
        (_line("step_progress", **step_progress("")), "step_progress record: 'step' must be a non-empty string"),
        (_line("run_finished", **run_finished("stopped")), "run_finished record: unknown status 'stopped'"),
    ],
)
def test_corruption_in_the_middle_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    _corrupt(path, 4, text)
    with pytest.raises(TranscriptError) as info:
        read_transcript(path)
    assert f"{path}:4:" in str(info.value)
    assert message in str(info.value)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    data = path.read_bytes().split(b"\n")
    data[3] = b'{"type":"clock","value":"\xff"}'
    path.write_bytes(b"\n".join(data))
    with pytest.raises(TranscriptError, match=r":4: not UTF-8 text"):
        read_transcript(path)


def test_corrupt_last_line_with_newline_is_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write(b"{garbage\n")
    with pytest.raises(TranscriptError, match=r":19: not a JSON line"):
        read_transcript(path)


def test_unterminated_but_invalid_record_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write(b'{"type":"bogus"}')  # parses: not a torn write, a bad record
    with pytest.raises(TranscriptError, match=r":19: unknown record type"):
        read_transcript(path)
    path.write_bytes(path.read_bytes()[: -len(b'{"type":"bogus"}')])
    with path.open("ab") as f:  # parses, known type, but not a valid record of it
        f.write(_line("clock", seq=16, value="").encode())
    with pytest.raises(TranscriptError, match=r":19: clock record: 'value' must be a non-empty string"):
        read_transcript(path)


def test_missing_run_started(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"clock","run_id":"r","seq":1,"ts":"2025-01-02T03:04:05.678Z","value":"v"}\n')
    with pytest.raises(TranscriptError, match=r":1: the first record is clock, not run_started"):
        read_transcript(path)
    path.write_text("")
    with pytest.raises(TranscriptError, match="no run_started"):
        read_transcript(path)


def test_step_finished_twice_in_one_attempt(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        w.write("step_started", **step_started("1"))
        w.write("step_finished", **step_finished("1"))
        w.write("step_finished", **step_finished("1"))
    with pytest.raises(TranscriptError, match=r":4: step 1 finished twice in one attempt \(first at seq 3\)"):
        read_transcript(path)


# --------------------------------------------------------------------------- secrets


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=[SECRET, "hunter2!"]) as w:
        w.write("run_started", **run_started(inputs={"token": SECRET}))
        w.write("step_started", **step_started("1", event="tools.http.get"))
        rec = w.write(
            "step_finished",
            **step_finished(
                "1",
                event="tools.http.get",
                status="failed",
                result={
                    "headers": {"Authorization": f"Bearer {SECRET}", SECRET: "as a key", f"x-{SECRET}-y": 1},
                    "list": [SECRET, ["deep", {"deeper": f"{SECRET}{SECRET}"}]],
                    "other": "password is hunter2! ok",
                    "clean": "nothing to see",
                },
                error={"type": "HttpError", "message": f"failed with {SECRET}"},
            ),
        )
    raw = path.read_text(encoding="utf-8")
    assert SECRET not in raw and "hunter2!" not in raw
    first, _, third = lines(path)
    assert first["inputs"] == {"token": "***"}
    assert third == rec
    result = third["result"]
    assert result["headers"] == {"Authorization": "Bearer ***", "***": "as a key", "x-***-y": 1}
    assert result["list"] == ["***", ["deep", {"deeper": "***"}]]
    assert result["other"] == "password is *** ok"
    assert result["clean"] == "nothing to see"
    assert third["error"] == {"type": "HttpError", "message": "failed with ***"}
    assert read_transcript(path).steps["1"].finished == decode(rec)


def _with_secret_everywhere(s: str) -> list[tuple[str, dict[str, Any]]]:
    """One record of every type with `s` in every member that may hold free text (not in
    the statuses, which are fixed words, nor in numbers)."""
    return [
        ("run_started", run_started(chain=f"c-{s}", file=f"/p/{s}.yaml", inputs={s: s, "k": [f"<{s}>"]},
                                    now=s, started_at=s, tools=[f"mod_{s}"])),
        ("clock", clock(value=f"{s}Z", step=f"1.{s}")),
        ("step_started", step_started(f"1.{s}", event=f"ev.{s}", params={"p": s, s: {"deep": [s]}})),
        ("step_progress", step_progress(f"1.{s}", event=f"ev.{s}", message=f"at {s}")),
        ("decide", decide(f"1.{s}", event=f"ev.{s}", action=s, asked={"condition": s, "errors": [s], "params": {}},
                          params={s: 1}, reason=f"because {s}", source=s)),
        ("hook_fired", hook_fired(hook=s, when=s, event=f"ev.{s}", step=f"1.{s}")),
        ("step_finished", step_finished(f"1.{s}", event=f"ev.{s}", status="skipped", result={"r": s},
                                        error={"type": s, "message": s}, reason=f"skip {s}")),
        ("run_finished", run_finished("failed", outputs={s: s}, error={"type": "E", "message": s, "step": f"1.{s}"})),
    ]


@pytest.mark.parametrize("typed", [False, True], ids=["write", "append"])
def test_secrets_are_redacted_in_every_member_of_every_type(tmp_path: Path, typed: bool) -> None:
    path = tmp_path / "t.jsonl"
    records = _with_secret_everywhere(SECRET)
    with TranscriptWriter(path, "r", secrets=[SECRET]) as w:
        for kind, rec in records:
            if typed:
                w.append(decode({"type": kind, **rec}))
            else:
                w.write(kind, **rec)
    raw = path.read_text(encoding="utf-8")
    assert SECRET not in raw
    masked = _with_secret_everywhere("***")
    recs = lines(path)
    assert [(r["type"], members(r)) for r in recs] == masked
    t = read_transcript(path, key=b"")  # still valid records, still sealed
    assert [e.as_dict() for e in t.records] == recs and t.steps["1.***"].done


def test_overlapping_secrets_leave_no_fragment(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["abcd", "abcdefgh", "ghij"]) as w:
        w.write("run_started", **run_started(inputs={"a": "xabcdefghijx", "b": "abcdabcd", "c": "zzabcdzz"}))
    rec = lines(path)[0]
    assert rec["inputs"] == {"a": "x***x", "b": "***", "c": "zz***zz"}


def test_secret_with_json_special_characters(tmp_path: Path) -> None:
    secret = 'pa"ss\\word\n\u00e9'
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=[secret]) as w:
        w.write("run_started", **run_started(inputs={"value": f"<{secret}>"}))
    assert lines(path)[0]["inputs"]["value"] == "<***>"
    assert secret not in read_transcript(path).started.inputs["value"]


def test_numeric_secret_in_a_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["4242424242"]) as w:
        w.write("run_started", **run_started(inputs={"card": 4242424242, "ok": 7, "flag": True, "f": 14242424242.5}))
        w.write("step_started", **step_started("1", params=[4242424242, 1]))
        w.append(StepFinished(step="1", event="e", status="ok", result=94242424242, error=None, duration_ms=2,
                              attempt=1))
    first, second, third = lines(path)
    assert first["inputs"] == {"card": "***", "ok": 7, "flag": True, "f": "***"}
    assert second["params"] == ["***", 1]
    assert third["result"] == "***"
    assert "4242424242" not in path.read_text(encoding="utf-8")


def test_keys_that_differ_only_in_secrets_are_both_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["s3cret-one", "s3cret-two"]) as w:
        w.write("run_started", **run_started(inputs={"m": {"s3cret-one": 1, "s3cret-two": 2}}))
        w.append(StepStarted(step="1", event="e", attempt=1, params={"s3cret-one": "a", "s3cret-two": "b"}))
    first, second = lines(path)
    assert first["inputs"]["m"] == {"***": 1, "***#2": 2}
    assert second["params"] == {"***": "a", "***#2": "b"}


def test_add_secret_learned_during_the_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **run_started(inputs={"token": "later-learned-token"}))
        w.add_secret("later-learned-token")
        w.write("step_started", **step_started("1", params={"token": "later-learned-token"}))
        w.append(Clock(value="at later-learned-token"))
    first, second, third = lines(path)
    assert first["inputs"]["token"] == "later-learned-token"  # written before it was known
    assert second["params"]["token"] == "***"
    assert third["value"] == "at ***"


@pytest.mark.parametrize("short", ["", "Zq", "Q7x"])
def test_short_secrets_are_refused_without_echoing_them(tmp_path: Path, short: str) -> None:
    with pytest.raises(ValueError, match="shorter than 4") as info:
        TranscriptWriter(tmp_path / "t.jsonl", "r", secrets=["long-enough", short])
    assert short == "" or short not in str(info.value)
    with TranscriptWriter(tmp_path / "u.jsonl", "r") as w:
        with pytest.raises(ValueError, match="shorter than 4"):
            w.add_secret(short)
        with pytest.raises(TypeError):
            w.add_secret(1234)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kind, rec",
    [
        ("run_started", run_started(inputs={SECRET: object()})),
        ("step_started", step_started("1", params={"a": {SECRET: {1, 2}}})),
        ("step_finished", step_finished("1", result={SECRET: object()})),
    ],
)
def test_secret_in_a_bad_field_name_is_not_echoed(tmp_path: Path, kind: str, rec: dict[str, Any]) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", "r", secrets=[SECRET]) as w:
        with pytest.raises(TypeError, match="plain JSON") as info:
            w.write(kind, **rec)
    assert SECRET not in str(info.value) and '["***"]' in str(info.value)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kind, rec, named",
    [
        ("step_finished", step_finished("1", result=object()), "'result'"),
        ("step_finished", step_finished("1", result={"items": [1, {"when": {1, 2}}]}), "'result.items[1].when'"),
        ("step_finished", step_finished("1", result={"a b": b"bytes"}), "'result[\"a b\"]'"),
        ("step_finished", step_finished("1", result={1: "int key"}), "'result'"),
        ("step_finished", step_finished("1", result=[10**5000]), "'result[0]'"),
        ("step_finished", step_finished("1", duration_ms=float("nan")), "'duration_ms'"),
        ("step_finished", step_finished("1", duration_ms=float("inf")), "'duration_ms'"),
        ("step_finished", step_finished("1", error={"type": "E", "message": Path("m")}), "'error.message'"),
        ("step_finished", step_finished("1", x=[float("inf")]), "'x[0]'"),  # a member the codec does not know
        ("step_finished", step_finished("1", path=Path("a")), "'path'"),
        ("step_started", step_started("1", params=object()), "'params'"),
        ("step_started", step_started("1", params={"p": Path("a")}), "'params.p'"),
        ("step_started", step_started("1", params=[1, float("-inf")]), "'params[1]'"),
        ("step_progress", step_progress("1", fraction=float("nan")), "'fraction'"),
        ("run_started", run_started(inputs={"f": Path("a")}), "'inputs.f'"),
        ("run_started", run_started(tools=["a", object()]), "'tools[1]'"),
        ("decide", decide("1", asked={"q": {1, 2}}), "'asked.q'"),
        ("decide", decide("1", params={"p": [b"x"]}), "'params.p[0]'"),
        ("run_finished", run_finished(outputs={"o": b"x"}), "'outputs.o'"),
        ("run_finished", run_finished(error={"type": "E", 2: "x"}), "'error'"),
    ],
)
def test_non_json_values_are_rejected_naming_the_field(
    tmp_path: Path, kind: str, rec: dict[str, Any], named: str
) -> None:
    """Members that hold JSON values (result, params, inputs...) are checked by the
    writer's own JSON walk, which names the path inside them."""
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        with pytest.raises(TypeError, match="plain JSON") as info:
            w.write(kind, **rec)
        assert f"{kind} record: field {named}" in str(info.value)
        assert w.last_seq == 1
    assert len(lines(path)) == 1


@pytest.mark.parametrize(
    "kind, rec, message",
    [
        # the codec refuses these before the JSON walk sees them: ValueError (RecordError), not TypeError
        ("step_finished", step_finished("1", error="boom"), "'error' must be an object, not a string"),
        ("step_finished", step_finished("1", error=object()), "'error' must be an object, not object"),
        ("step_finished", step_finished("1", duration_ms=Decimal("1.5")), "'duration_ms' must be a number, not Decimal"),
        ("step_finished", step_finished("1", duration_ms="3"), "'duration_ms' must be a number, not a string"),
        ("step_finished", step_finished("1", attempt=True), "'attempt' must be an integer, not a boolean"),
        ("step_started", step_started("1", max_attempts=2.0), "'max_attempts' must be an integer, not a number"),
        ("step_progress", step_progress("1", message=Path("m")), "'message' must be a string, not PosixPath"),
        ("run_started", run_started(inputs=[("a", 1)]), "'inputs' must be an object, not an array"),
        ("run_started", run_started(resumed=0), "'resumed' must be a boolean, not a number"),
        ("run_finished", run_finished(outputs=None), "'outputs' must not be null"),
        ("clock", clock(value=b"x"), "'value' must be a string, not bytes"),
    ],
)
def test_values_the_codec_refuses_are_rejected_first(
    tmp_path: Path, kind: str, rec: dict[str, Any], message: str
) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        with pytest.raises(RecordError) as info:
            w.write(kind, **rec)
        assert isinstance(info.value, ValueError)
        assert str(info.value) == f"{kind} record: {message}"
        assert w.last_seq == 1
    assert len(lines(path)) == 1


def test_write_checked_refuses_values_the_encoder_refuses(tmp_path: Path) -> None:
    """The interpreter's path skips the walk, not the encoder: nothing half-written."""
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **RUN)
        for bad in (float("nan"), object(), {"s": {1, 2}}):
            with pytest.raises(TypeError, match=r"step_finished record: .*plain JSON"):
                w.write_checked("step_finished", step_finished("1", result=bad))
        with pytest.raises(ValueError, match="unknown transcript record type 'step_done'"):
            w.write_checked("step_done", {})
        assert w.last_seq == 1
    assert len(lines(path)) == 1


def test_json_subclasses_and_tuples_are_accepted(tmp_path: Path) -> None:
    class Color(str, enum.Enum):
        RED = "red"

    class Status(str, enum.Enum):
        OK = "ok"

    class Count(enum.IntEnum):
        TWO = 2

    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **run_started(inputs={"color": Color.RED, "pair": (1, 2), "big": 10**30, "f": 1.5}))
        w.write("step_started", **step_started("1", attempt=Count.TWO, params=(1, (2, 3))))
        w.write("step_finished", **step_finished("1", status=Status.OK, attempt=Count.TWO, result=Color.RED))
    first, second, third = lines(path)
    assert first["inputs"] == {"color": "red", "pair": [1, 2], "big": 10**30, "f": 1.5}
    assert (second["attempt"], second["params"]) == (2, [1, [2, 3]])
    assert (third["status"], third["attempt"], third["result"]) == ("ok", 2, "red")
    assert read_transcript(path).steps["1"].done


def test_lone_surrogate_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", **run_started(inputs={"odd": "x\ud800y"}))
        w.write("step_started", **step_started("1", params={"p": "\udc80"}))
        w.append(StepFinished(step="1", event="e", status="ok", result={"r": "a\udcffb"}, error=None,
                              duration_ms=1, attempt=1))
    raw = path.read_bytes()
    assert b"\\ud800" in raw and b"\\udc80" in raw and b"\\udcff" in raw  # written as JSON escapes
    t = read_transcript(path, key=b"")
    assert t.started.inputs["odd"] == "x\ud800y"
    assert t.steps["1"].started.params == {"p": "\udc80"}
    finished = t.steps["1"].finished
    assert finished is not None and finished.result == {"r": "a\udcffb"}


def test_bad_types_and_fields(tmp_path: Path) -> None:
    def without(rec: dict[str, Any], name: str) -> dict[str, Any]:
        return {k: v for k, v in rec.items() if k != name}

    with TranscriptWriter(tmp_path / "t.jsonl", "r") as w:
        with pytest.raises(ValueError, match="unknown transcript record type 'step_done'"):
            w.write("step_done", **step_finished("1"))
        with pytest.raises(ValueError, match="step_started record needs 'step'"):
            w.write("step_started", **without(step_started("1"), "step"))
        with pytest.raises(ValueError, match="step_progress record needs 'event'"):
            w.write("step_progress", **without(step_progress("1"), "event"))
        with pytest.raises(ValueError, match="step_finished record: 'event' must be a non-empty string"):
            w.write("step_finished", **step_finished("1", event=""))
        with pytest.raises(ValueError, match="clock record: 'value' must be a string, not a number"):
            w.write("clock", value=12)
        with pytest.raises(ValueError, match="decide record needs 'step'"):
            w.write("decide", **without(decide("1"), "step"))
        with pytest.raises(ValueError, match="seq is set by the writer"):
            w.write("run_started", **RUN, seq=5)
        with pytest.raises(ValueError, match="mac is set by the writer"):
            w.write("run_started", **RUN, mac="0" * 32)
        assert w.last_seq == 0
    with pytest.raises(ValueError, match="run_id"):
        TranscriptWriter(tmp_path / "u.jsonl", "")


def test_write_after_close(tmp_path: Path) -> None:
    w = TranscriptWriter(tmp_path / "t.jsonl", "r")
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.write("run_started", **RUN)
    with pytest.raises(ValueError, match="closed"):
        w.append(RunStarted(**RUN))
    assert (tmp_path / "t.jsonl").read_bytes() == b""


def test_failed_write_leaves_no_half_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter(path, "r")
    w.write("run_started", **RUN)
    real_write = os.write
    calls = {"n": 0}

    def half_then_enospc(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(OSError):
        w.write("step_started", **step_started("1", params={"pad": "x" * 100}))
    assert calls["n"] == 2
    monkeypatch.setattr(os, "write", real_write)
    assert w.write("step_started", **step_started("1"))["seq"] == 2
    w.close()
    t = read_transcript(path, key=b"")  # the failed line left no trace in the chain of seals either
    assert not t.torn_tail and [e.envelope.seq for e in t.records] == [1, 2]


def test_durable_mode(tmp_path: Path) -> None:
    path = tmp_path / "d" / "t.jsonl"
    lock = RunLock.acquire(path)
    try:
        with TranscriptWriter(path, "r", durable=True, key=KEY, lock=lock) as w:
            w.write("run_started", **RUN)
            w.write("run_finished", **run_finished())
    finally:
        lock.release()
    again = RunLock.acquire(path, create=False)  # the head was synced at close: a fresh hold reads it back
    try:
        assert again.found is not None and again.found.seq == 2
        assert read_transcript(path, key=KEY, head=again.found).finished is not None
    finally:
        again.release()


def test_concurrent_writers_threads(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", key=KEY) as w:
        w.write("run_started", **RUN)

        def work(k: int) -> None:
            for i in range(50):
                w.write("step_progress", **step_progress(str(k), message=f"{k}:{i}"))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    records = read_transcript(path, key=KEY).records  # one unbroken chain of seals
    assert [e.envelope.seq for e in records] == list(range(1, 402))
    progress = [e.record for e in records if isinstance(e.record, StepProgress)]
    for k in range(8):
        assert [r.message for r in progress if r.step == str(k)] == [f"{k}:{i}" for i in range(50)]


# --------------------------------------------------------------------------- crash


def test_sigkill_loses_no_written_line(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    n = 200
    script = textwrap.dedent(
        """
        import json, os, signal, sys
        from pathlib import Path
        from chainlang.journal.jsonl import TranscriptWriter
        from chainlang.journal.lock import RunLock
        path = Path(sys.argv[1])
        lock = RunLock.acquire(path)
        w = TranscriptWriter(path, "killed-run", key=bytes.fromhex(sys.argv[3]), lock=lock)
        w.write("run_started", **json.loads(sys.argv[4]))
        for i in range(int(sys.argv[2]) - 1):
            w.write("step_started", step=str(i), event="e", attempt=1, params={"payload": "x" * 64})
            w.commit()  # as the interpreter does before a step that is not idempotent acts
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", script, str(path), str(n), KEY.hex(), json.dumps(RUN)],
                          env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    t = read_transcript(path)
    assert len(t.records) == n and t.last_seq == n and not t.torn_tail
    assert len(t.unfinished()) == n - 1
    # the kernel released the dead process's hold, and kept its last head (before the last action)
    lock = RunLock.acquire(path, create=False)
    try:
        assert lock.found is not None and lock.found.seq == n
        assert read_transcript(path, key=KEY, head=lock.found).records == t.records
    finally:
        lock.release()


# --------------------------------------------------------------------------- idempotency


def test_idempotency_keys() -> None:
    key = idempotency_key("run-1", "3.1", 1)
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    assert idempotency_key("run-1", "3.1", 1) == key
    # pinned: the derivation is part of the contract with tools (keys survive upgrades)
    assert key == "8fa01d5a7acd1a56031afdddc2e30396" == _expected_key("run-1", "3.1", 1)
    keys = {
        idempotency_key(r, s, a)
        for r in ("run-1", "run-2")
        for s in ("1", "3", "3.1", "1.3", "31")
        for a in (1, 2, 3)
    }
    assert len(keys) == 2 * 5 * 3
    assert idempotency_key("a.b", "c", 1) != idempotency_key("a", "b.c", 1)
    for bad in (0, -1, True, "1"):
        with pytest.raises(ValueError):
            idempotency_key("r", "1", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        idempotency_key("", "1", 1)


def _expected_key(run_id: str, step: str, attempt: int) -> str:
    import hashlib

    text = json.dumps([run_id, step, attempt], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def test_idempotency_key_is_the_same_in_another_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from chainlang.journal.jsonl import idempotency_key as k; print(k('run-1', '3.1', 2))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert out == idempotency_key("run-1", "3.1", 2)


# --------------------------------------------------------------------------- speed


def test_hot_path_is_cheap(tmp_path: Path) -> None:
    """4,000 lines (a 2,000-step run) in well under a second, with and without secrets."""
    import time

    for secrets in ((), (SECRET,)):
        path = tmp_path / f"speed{len(secrets)}.jsonl"
        with TranscriptWriter(path, "r", secrets=secrets) as w:
            w.write("run_started", **RUN)
            start = time.process_time()  # CPU time: the writer's cost, not the machine's load
            for i in range(2000):
                w.write("step_started", step=str(i), event="tools.x", attempt=1, max_attempts=1, params={"n": i})
                w.write("step_finished", step=str(i), event="tools.x", status="ok", result={"n": i}, error=None,
                        duration_ms=1, attempt=1)
            elapsed = time.process_time() - start
        assert elapsed < 2.0, elapsed
        assert read_transcript(path).last_seq == 4001
