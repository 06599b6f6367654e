"""Reading a transcript back: every line parsed and checked with the one codec, its seal
verified along the chain (with the project key), its end checked against the sealed head.
See chainlang.journal.jsonl for the format.

What the reader gives back is typed: each line is decoded once into its record
(chainlang.journal.records) and its envelope (`Entry`); nothing downstream reads the
JSON objects again. A consumer that shows a line as it was written asks for it
(`Entry.as_dict()`)."""

from __future__ import annotations

import hmac
import json
import math
import os
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.journal.integrity import GENESIS, mac_of, split_sealed
from chainlang.journal.records import (RECORD_TYPES, Clock, Decide, Envelope, Record, RecordError, RunFinished, RunStarted,
                                       StepFinished, StepStarted, decode, fields)

if TYPE_CHECKING:
    from chainlang.journal.lock import Head


class TranscriptError(Exception):
    """A transcript that cannot be trusted: corrupt line, missing `run_started`, mixed run ids,
    `seq` not increasing, a step finished that never started. The message names the line."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a transcript as read: what the journal added to it (`envelope`: run id,
    `seq`, `ts`) and its typed `record`."""

    envelope: Envelope
    record: Record

    def as_dict(self) -> dict[str, Any]:
        """The line as a JSON object (envelope first, then the record's members; the seal
        and any member the codec does not know left out), for a consumer that shows it."""
        envelope = self.envelope
        return {"type": self.record.TYPE, "run_id": envelope.run_id, "seq": envelope.seq, "ts": envelope.ts,
                **fields(self.record)}


@dataclass
class StepRecord:
    """One step path in a transcript: its LAST attempt.

    `started` is that attempt's `step_started` record, `finished` its `step_finished`
    record or None (the attempt was interrupted), `attempts` how many `step_started`
    records the step has.
    """

    step: str
    started: StepStarted
    finished: StepFinished | None = None
    attempts: int = 1

    @property
    def done(self) -> bool:
        return self.finished is not None


@dataclass
class Transcript:
    """A parsed transcript (see `read_transcript`)."""

    path: Path
    run_id: str
    #: the first `run_started` record (chain path, inputs, options such as the pinned clock)
    started: RunStarted
    #: the `run_finished` record, or None when the run has not finished (since its last start)
    finished: RunFinished | None
    #: by step path, in order of first start
    steps: dict[str, StepRecord]
    #: `value` of every `clock` record, in order
    clock_readings: list[str]
    #: `decide` records by step path, each list in order
    decisions: dict[str, list[Decide]]
    #: `seq` of the last (complete) record
    last_seq: int
    #: True when the last line was cut off by a crash (it was ignored)
    torn_tail: bool
    #: every complete line (envelope and record), in order
    records: list[Entry] = field(repr=False)
    #: later `run_started` records (resumptions that marked themselves), in order
    restarts: list[RunStarted] = field(default_factory=list)

    def unfinished(self) -> list[StepRecord]:
        """Steps whose last attempt started but has no `step_finished`, in order of first start."""
        return [s for s in self.steps.values() if s.finished is None]


@dataclass
class _Parsed:
    """A transcript file read: its complete lines, where a torn tail starts, and the MAC of each line."""
    #: (line number, entry) of every complete line
    records: list[tuple[int, Entry]]
    #: byte offset to cut the file at to drop a torn last line, or None
    cut_at: int | None
    #: the MAC of every complete line, in order (empty when the lines were not verified)
    macs: list[bytes] = field(default_factory=list)

    @property
    def last_mac(self) -> bytes:
        return self.macs[-1] if self.macs else GENESIS


def _parse(data: bytes, source: Path, key: bytes | None = None) -> _Parsed:
    """Split into records and check each one; tolerate only a torn final line. With a
    `key`, every line's MAC is verified along the chain (see chainlang.journal.integrity)."""
    lines = data.split(b"\n")
    # `lines[-1]` is what follows the last newline: empty for a clean file
    tail = lines.pop()
    cut_at: int | None = None
    if tail:
        try:
            json.loads(tail.decode("utf-8"))
        except RecursionError:  # not a torn write (no writer nests this deep): refused below
            lines.append(tail)
        except ValueError:  # UnicodeDecodeError is a ValueError too
            # an unterminated, unparsable last line: the write a crash interrupted. (No
            # proper prefix of a JSON object line is itself a JSON value.)
            cut_at = len(data) - len(tail)
        else:
            # complete, only its newline is missing: it must be a valid record
            lines.append(tail)
    records: list[tuple[int, Entry]] = []
    macs: list[bytes] = []
    previous = GENESIS
    for number, raw in enumerate(lines, start=1):
        if key is not None:
            previous = _verify_line(raw, number, source, key, previous)
            macs.append(previous)
        records.append((number, load_line(raw, number, source)))
    _check_sequence(records, source)
    return _Parsed(records, cut_at, macs)


def _verify_line(raw: bytes, number: int, source: Path, key: bytes, previous: bytes) -> bytes:
    """The line's MAC, checked against the chain; TranscriptError names the line when it
    does not match."""
    parts = split_sealed(raw)
    if parts is None:
        raise TranscriptError(f"{source}:{number}: the line has no seal (mac); the transcript was not written by "
                              "this version of chainlang or was edited, and cannot be trusted")
    body, mac = parts
    if not hmac.compare_digest(mac, mac_of(key, previous, body)):
        raise TranscriptError(f"{source}:{number}: the record does not match its seal: it was edited, or records "
                              "before it were removed or reordered, or it was sealed with another project's key; "
                              "the transcript cannot be trusted")
    return mac


def load_line(raw: bytes, number: int, source: Path) -> Entry:
    """The entry of one line (line `number` of `source`, named by a TranscriptError),
    checked once here for everything a reader of it relies on: the envelope (a known
    `type`, a string `run_id`, a positive integer `seq`, an ISO 8601 `ts` with its offset),
    each member of its type (chainlang.journal.records), numbers that are finite. The
    record is decoded here, once; members the codec does not know are dropped."""
    where = f"{source}:{number}"
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)
    except UnicodeDecodeError:
        raise TranscriptError(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise TranscriptError(f"{where}: the record nests too deeply to be read") from None
    except ValueError as exc:
        raise TranscriptError(f"{where}: not a JSON line ({exc})") from None
    if not isinstance(value, dict):
        raise TranscriptError(f"{where}: expected a JSON object, got {_json_kind(value)}")
    value.pop("mac", None)  # the seal belongs to the line, not to the record
    kind = value.get("type")
    if "type" not in value:
        raise TranscriptError(f"{where}: a record without a type")
    if not isinstance(kind, str):
        raise TranscriptError(f"{where}: the record's type must be a string (one of {', '.join(sorted(RECORD_TYPES))}), "
                              f"not {_json_kind(kind)}")
    if kind not in RECORD_TYPES:
        raise TranscriptError(f"{where}: unknown record type {kind!r}")
    if not isinstance(value.get("run_id"), str):
        raise TranscriptError(f"{where}: {kind} record without a string run_id")
    seq = value.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TranscriptError(f"{where}: {kind} record without an integer seq")
    if seq < 1:
        raise TranscriptError(f"{where}: {kind} record: seq {seq} (seq counts from 1)")
    if not isinstance(value.get("ts"), str):
        raise TranscriptError(f"{where}: {kind} record without a string ts")
    if ts_ms(value["ts"]) is None:
        raise TranscriptError(f"{where}: {kind} record: ts {_shown(value['ts'])} is not an ISO 8601 time with its "
                              "offset (e.g. 2025-01-02T03:04:05.678Z)")
    try:
        record = decode(value)
    except RecordError as exc:
        raise TranscriptError(f"{where}: {exc}") from None
    error = value.get("error")
    if isinstance(error, dict) and not isinstance(error.get("message", ""), str):
        raise TranscriptError(f"{where}: {kind} record: the error's 'message' must be a string, not "
                              f"{_json_kind(error['message'])}")
    for name, member in value.items():
        # a number the float arithmetic of a reader cannot take (1e400 written as an integer)
        if isinstance(member, int) and not isinstance(member, bool) and name != "seq" and abs(member) > _MAX_FLOAT:
            raise TranscriptError(f"{where}: {kind} record: {name!r} is a number too large to be read")
    if kind == "run_started" and "\0" in value["file"]:  # a path
        raise TranscriptError(f"{where}: run_started record: 'file' is not a path (it holds a NUL character)")
    return Entry(Envelope(value["run_id"], seq, value["ts"]), record)


_MAX_FLOAT = 1.7976931348623157e308


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"the number {text[:40]} is too large")
    return number


def ts_ms(ts: str) -> float | None:
    """A record's `ts` (ISO 8601 with an offset, `Z` for UTC) in ms since the epoch, or None
    when it is not one (the reader refuses such a record; the report reads times with this)."""
    try:
        moment = datetime.fromisoformat(ts[:-1] + "+00:00" if ts.endswith("Z") else ts)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        return None
    try:
        return moment.timestamp() * 1000
    except (OverflowError, ValueError):
        return None


def _shown(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "…")


def _check_head(parsed: _Parsed, head: "Head", source: Path, key: bytes) -> None:
    """The transcript reaches the head its writer recorded (a crash may leave it one line
    beyond: the line was written, the head not yet moved)."""
    if not head.valid(key):
        raise TranscriptError(f"{source}.head: the head file is damaged or was not sealed with this project's key; "
                              "the transcript cannot be trusted")
    if head.seq == 0:  # sealed before the first line: it must be this run's
        from chainlang.journal.lock import run_anchor

        if parsed.records and head.mac != run_anchor(parsed.records[0][1].envelope.run_id):
            raise TranscriptError(f"{source}.head: the head file belongs to another run; the transcript cannot "
                                  "be trusted")
        return
    for (number, entry), mac in zip(parsed.records, parsed.macs):
        if entry.envelope.seq == head.seq:
            if mac != head.mac:
                raise TranscriptError(f"{source}:{number}: the record does not match the head file (seq {head.seq}); "
                                      "the transcript cannot be trusted")
            return
    last = parsed.records[-1]
    raise TranscriptError(f"{source}:{last[0]}: the transcript ends at seq {last[1].envelope.seq} but its writer recorded "
                          f"seq {head.seq}: records were removed from its end; it cannot be trusted")


def _json_kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _check_sequence(records: list[tuple[int, Entry]], source: Path) -> None:
    if not records:
        return
    first = records[0][1]
    run_id = first.envelope.run_id
    last_seq: int | None = None
    for number, entry in records:
        where = f"{source}:{number}"
        if entry.envelope.run_id != run_id:
            raise TranscriptError(
                f"{where}: record of run {entry.envelope.run_id!r} in the transcript of run {run_id!r}"
            )
        if last_seq is not None and entry.envelope.seq <= last_seq:
            raise TranscriptError(f"{where}: seq {entry.envelope.seq} does not follow seq {last_seq}")
        last_seq = entry.envelope.seq
    if not isinstance(first.record, RunStarted):
        raise TranscriptError(f"{source}:1: the first record is {first.record.TYPE}, not run_started")


def read_transcript(path: str | os.PathLike[str], *, key: bytes | None = None,
                    head: "Head | None" = None) -> Transcript:
    """Parse the transcript at `path`.

    A last line without a newline that is not a complete JSON record is the write a crash
    interrupted: it is ignored and `torn_tail` is True (an unterminated last line that *is*
    a complete record is kept). Everything else that is wrong raises `TranscriptError`
    with `path:line`: a line that is not a JSON object or lacks the envelope or a required
    field, an unknown type, no `run_started` first, a second run id, `seq` not increasing,
    a `step_finished` without a `step_started` of that step, or a step attempt finished
    twice. A missing or unreadable file raises `OSError`.

    With `key`, every line's seal is verified (an edited, removed or reordered record is
    refused, naming the first bad line); with `head` too (the sealed head of the lock
    file, see chainlang.journal.lock), records removed from the end are found as well.
    Without `key` the seals are not checked: for showing a transcript, never for resuming.
    """
    source = Path(path)
    data = source.read_bytes()
    parsed = _parse(data, source, key)
    if not parsed.records:
        raise TranscriptError(f"{source}: no run_started record (the transcript is empty)")
    if head is not None:
        _check_head(parsed, head, source, key or b"")
    records = [entry for _, entry in parsed.records]
    started = records[0].record
    assert isinstance(started, RunStarted)  # _check_sequence refused any other first record
    restarts: list[RunStarted] = []
    finished: RunFinished | None = None
    steps: dict[str, StepRecord] = {}
    finished_at: dict[str, int] = {}  # step path → seq of its last attempt's step_finished
    clock: list[str] = []
    decisions: dict[str, list[Decide]] = {}
    for number, entry in parsed.records:
        rec = entry.record
        if isinstance(rec, StepStarted):
            step = steps.get(rec.step)
            if step is None:
                steps[rec.step] = StepRecord(rec.step, rec)
            else:
                step.started, step.finished = rec, None
                step.attempts += 1
        elif isinstance(rec, StepFinished):
            step = steps.get(rec.step)
            if step is None:
                raise TranscriptError(
                    f"{source}:{number}: step {rec.step} finished but never started"
                )
            if step.finished is not None:
                raise TranscriptError(
                    f"{source}:{number}: step {rec.step} finished twice in one attempt "
                    f"(first at seq {finished_at[rec.step]})"
                )
            step.finished = rec
            finished_at[rec.step] = entry.envelope.seq
        elif isinstance(rec, Decide):
            decisions.setdefault(rec.step, []).append(rec)
        elif isinstance(rec, Clock):
            clock.append(rec.value)
        elif isinstance(rec, RunFinished):
            finished = rec
        elif isinstance(rec, RunStarted) and rec is not started:
            restarts.append(rec)
            finished = None
    return Transcript(
        path=source,
        run_id=records[0].envelope.run_id,
        started=started,
        finished=finished,
        steps=steps,
        clock_readings=clock,
        decisions=decisions,
        last_seq=records[-1].envelope.seq,
        torn_tail=parsed.cut_at is not None,
        records=records,
        restarts=restarts,
    )


__all__ = ["Entry", "StepRecord", "Transcript", "TranscriptError", "load_line", "read_transcript", "ts_ms"]
