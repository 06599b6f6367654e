"""The JSONL transcript of a run, its first `Journal`: one JSON object per line, appended as
it happens, each sealed (chainlang.journal.integrity) before it is written.

The transcript is the run's audit path and the only thing `chainlang resume` needs
(LANGUAGE.md §9). `TranscriptWriter` appends records. Each line is handed to the
operating system with a single `write(2)` before `write()` returns, so a crash of the
process (even SIGKILL) loses no line that `write()` returned for; except a line the
interpreter deferred (`defer_next`: an idempotent step's, whose loss only makes the step
run again), which shares the write of a later line (see `defer_next`). Power loss or a kernel
crash can still lose the tail of the file unless the writer was opened with
`durable=True`, which adds an `os.fsync` after every line (and of the parent directory
when the file is created). Reading back is `chainlang.journal.reader`; the idempotency
key of a step attempt is in `chainlang.journal.values`.

Record format. Every line is a JSON object (UTF-8, compact separators) whose first four
members are the envelope and whose last member is the seal:

    {"type":"step_started","run_id":"r1","seq":7,"ts":"2025-01-02T03:04:05.678Z",...,"mac":"…"}

- `type`: one of `RECORD_TYPES`; `run_id`: the same on every line of a file;
- `seq`: 1 for the first line, then +1 per line; a writer reopening an existing transcript
  (resume) continues after the last recorded `seq`. Readers require it to increase.
- `ts`: wall-clock time of the write, ISO 8601 UTC with milliseconds. It is for audit
  only; the *run* clock (which `--now` can pin) is recorded in `clock` records.

What each type holds is the one codec's to say (chainlang.journal.records): the writer's
`write()` and the reader refuse anything it refuses. The first line must be
`run_started`; a later `run_started` (a resumption) re-opens the run.

Secrets never reach the file: in every member but the counts, durations and statuses,
every string (dict keys and values, at any depth) has each occurrence of a registered
secret replaced by `***`, and a number whose JSON text contains one becomes the string
`***`. Secrets must be at least `MIN_SECRET_LENGTH` characters. A secret learned during
the run must be registered with `add_secret()` before any value containing it is
written: lines already written are not rewritten.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from chainlang.journal.integrity import GENESIS, Sealer
from chainlang.journal.reader import Entry, StepRecord, Transcript, TranscriptError, _parse, read_transcript
from chainlang.journal.values import describe_path, find_non_json, idempotency_key, is_plain_json

from chainlang.journal.records import RECORD_TYPES, RecordError, decode, fields

if TYPE_CHECKING:
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import Record

# the run's redaction service (chainlang.redaction); the writer is one of its users
from chainlang.redaction import MIN_SECRET_LENGTH, REDACTED
from chainlang.redaction import Redactor as _Redactor

__all__ = [
    "MIN_SECRET_LENGTH",
    "RECORD_TYPES",
    "REDACTED",
    "Entry",
    "StepRecord",
    "Transcript",
    "TranscriptError",
    "TranscriptWriter",
    "idempotency_key",
    "read_transcript",
]


# the head moves to a run's start by itself (see chainlang.journal.lock); before a step's
# action, when the interpreter asks (`commit`)
_HEAD_BEFORE = b'{"type":"run_started"'
#: bytes of deferred lines (see TranscriptWriter.defer_next) that make the writer write them
PENDING_LIMIT = 64 * 1024
_ENVELOPE = ("type", "run_id", "seq", "ts")
_RESERVED_FIELDS = frozenset((*_ENVELOPE, "mac"))
# members whose values are counts, durations or fixed words that chainlang sets itself:
# never masked (masking the digits of a duration would make the record invalid)
_STRUCTURAL = frozenset({"status", "attempt", "max_attempts", "duration_ms", "fraction"})
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})


class _UtcStamp:
    """ISO 8601 UTC timestamps with milliseconds; the last one is cached (a run writes
    several lines in the same millisecond), and so is the per-second prefix."""

    __slots__ = ("_ms", "_last", "_second", "_prefix")

    def __init__(self) -> None:
        self._ms = -1
        self._last = ""
        self._second = -1
        self._prefix = ""

    def __call__(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms == self._ms:
            return self._last
        second, rest = divmod(ms, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        self._ms = ms
        self._last = f"{self._prefix}.{rest:03d}Z"
        return self._last


def _fields_encoder() -> Callable[[dict[str, Any]], str]:
    """json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    for a dict, calling the C encoder directly (what `encode` does after its checks, at
    about half the cost per call). Refuses what that encoder refuses: NaN and infinities
    (ValueError), objects (TypeError); a circular value ends in RecursionError."""
    from json import encoder as _json

    make = getattr(_json, "c_make_encoder", None)  # not in the stubs: the C accelerator's
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

    def refuse(value: object) -> object:
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    quote = getattr(_json, "c_encode_basestring", None) or _json.py_encode_basestring

    # no circular-reference markers (they would need a fresh dict per call): the interpreter's
    # values are plain JSON, checked before they are recorded; a cycle would end in RecursionError
    iterate = make(None, refuse, quote, None, ":", ",", False, False, False)

    def encode(value: dict[str, Any]) -> str:
        return "".join(iterate(value, 0))

    return encode


_ENCODERS: list[tuple[Callable[[Any], str], Callable[[dict[str, Any]], str]]] = []


def _encoders() -> tuple[Callable[[Any], str], Callable[[dict[str, Any]], str]]:
    """The envelope's and the fields' encoders, made once per process: they keep nothing
    between calls, and making them is a tenth of what a short run's writer costs."""
    if not _ENCODERS:
        _ENCODERS.append((json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode,
                          _fields_encoder()))
    return _ENCODERS[0]


class TranscriptWriter:
    """Appends records to the transcript at `path` (see the module docstring for the format).

    Opening an existing transcript resumes it: the file must belong to the same `run_id`
    (else `ValueError`), and `seq` continues after its last record. A last line torn by a
    crash is cut off first (`repaired_torn_tail` is then True), so new lines never glue
    onto a fragment. Parent directories are created as needed.

    `write()` is thread-safe. Each line reaches the OS in one `write(2)` before `write()`
    returns; with `durable=True` it is also `fsync`ed.

    `secrets` is a list of strings, or the run's `chainlang.redaction.Redactor`,
    which is then shared: a secret added to it later is masked here too.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        run_id: str,
        secrets: Iterable[str] | _Redactor = (),
        *,
        durable: bool = False,
        key: bytes = b"",
        lock: "RunLock | None" = None,
    ) -> None:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        self.path = path if isinstance(path, Path) else Path(path)
        self.run_id = run_id
        self.durable = durable
        self._key = key
        self._mac = GENESIS  # the MAC of the last line: the next line's MAC chains from it
        self._lock_file = lock
        if lock is not None:
            lock.use_key(key)
        if isinstance(secrets, _Redactor):  # the run's redaction service, shared with its other outputs
            self._redactor = secrets
        else:
            self._redactor = _Redactor(secrets)
        self._lock = threading.Lock()
        self._start_codec(run_id, key)
        self.resumed = False
        self.repaired_torn_tail = False

        fd, existed = _open_append(self.path)
        try:
            self._seq, self._size = self._recover(fd) if existed else (0, 0)
            if durable and not existed:
                _fsync_dir(self.path.parent)
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        if lock is not None and self._seq == 0:  # a sealed head before the first line (see lock.py)
            from chainlang.journal.lock import run_anchor

            lock.record(0, run_anchor(run_id))

    def _start_codec(self, run_id: str, key: bytes) -> None:
        """The clock, encoders and sealer this writer uses for every line, and its deferred lines."""
        self._stamp = _UtcStamp()
        self._encode_envelope, self._encode_fields = _encoders()
        self._sealer = Sealer(key)
        self._run_id_json = self._encode_envelope(run_id)
        self._defer = False  # the next line may wait for the others (defer_next)
        self._pending: list[bytes] = []  # sealed lines not yet written, in order
        self._pending_size = 0
        self._flush_due = False  # a flush is scheduled on the event loop
        self._broken: OSError | None = None  # a write of pending lines failed: the file lacks them

    def _recover(self, fd: int) -> tuple[int, int]:
        """Validate an existing transcript, repair its tail; return (last seq, size)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if not data:
            return 0, 0
        parsed = _parse(data, self.path, self._key)
        if parsed.records:
            run_id = parsed.records[0][1].envelope.run_id
            if run_id != self.run_id:
                raise ValueError(
                    f"{self.path} is the transcript of run {run_id!r}, not of run {self.run_id!r}"
                )
        if parsed.cut_at is not None:
            os.ftruncate(fd, parsed.cut_at)
            self.repaired_torn_tail = True
            data = data[: parsed.cut_at]
        elif not data.endswith(b"\n"):
            # a complete record whose newline was lost: terminate it
            _write_all(fd, b"\n")
            data += b"\n"
        if self.durable:
            os.fsync(fd)
        if not parsed.records:
            return 0, len(data)
        self.resumed = True
        self._mac = parsed.last_mac
        return parsed.records[-1][1].envelope.seq, len(data)

    # -- public API

    @property
    def last_seq(self) -> int:
        """The `seq` of the last line in the file (0 when it is empty)."""
        return self._seq

    @property
    def closed(self) -> bool:
        return self._fd is None

    def add_secret(self, value: str) -> None:
        """Register a secret learned during the run; later lines have it masked."""
        with self._lock:
            self._redactor.add(value)

    def write(self, type: str, **fields: Any) -> dict[str, Any]:
        """Append one record and return it as written (after redaction).

        Raises `ValueError` for an unknown type, a missing or empty required field, or a
        field named like the envelope (`run_id`, `seq`, `ts`); `TypeError` (naming the
        field) for a value that is not plain JSON — str, int, finite float, bool, None,
        list/tuple, dict with str keys.
        """
        return self._write(type, fields)

    def write_checked(self, type: str, fields: dict[str, Any]) -> dict[str, Any]:
        """`write` for the interpreter, whose records are well-formed and whose values are
        plain JSON by construction (it checks every tool result and input before recording
        it): the per-value walk and the field checks are skipped, and the envelope is
        written as text before the encoded fields. The encoder still refuses NaN,
        infinities and objects (`TypeError`); only non-string dict keys would pass,
        converted to strings. Returns `fields`, with the envelope added."""
        if type not in RECORD_TYPES:
            raise ValueError(f"unknown transcript record type {type!r}")
        with self._lock:
            fd = self._fd
            if fd is None:
                raise ValueError(f"transcript {self.path} is closed")
            seq = self._seq + 1
            ts = self._stamp()
            try:
                body = self._encode_fields(fields)
            except (TypeError, ValueError, RecursionError) as exc:
                raise TypeError(f"{type} record: {exc} (transcript values must be plain JSON)") from None
            if len(body) > 2:
                line = f'{{"type":"{type}","run_id":{self._run_id_json},"seq":{seq},"ts":"{ts}",{body[1:]}\n'
            else:
                line = f'{{"type":"{type}","run_id":{self._run_id_json},"seq":{seq},"ts":"{ts}"}}\n'
            if self._redactor.secrets and self._redactor.line_may_leak(line):
                record = {"type": type, "run_id": self.run_id, "seq": seq, "ts": ts, **self._masked(fields)}
                line = self._encode_envelope(record) + "\n"
            else:
                record = fields  # the caller's dict, given to it back with the envelope (no copy)
                record["type"], record["run_id"], record["seq"], record["ts"] = type, self.run_id, seq, ts
            try:
                data = line.encode("utf-8")
            except UnicodeEncodeError:  # the envelope first, as on every line
                data = _to_utf8(line, {"type": type, "run_id": self.run_id, "seq": seq, "ts": ts, **record})
            defer, self._defer = self._defer, False
            self._append(fd, data, seq, defer)
            return record

    def append(self, record: "Record") -> dict[str, Any]:
        """Append a typed record (chainlang.journal.records) with `write_checked`; returns
        it as written (its members, with the envelope)."""
        return self.write_checked(record.TYPE, fields(record))

    def _write(self, type: str, fields: dict[str, Any]) -> dict[str, Any]:
        if type not in RECORD_TYPES:
            raise ValueError(
                f"unknown transcript record type {type!r}; expected one of {', '.join(sorted(RECORD_TYPES))}"
            )
        if _RESERVED_FIELDS.intersection(fields):
            bad = sorted(_RESERVED_FIELDS.intersection(fields))
            raise ValueError(f"{type} record: {', '.join(bad)} is set by the writer, not a field")
        try:
            decode({**fields, "type": type})  # the one codec says what a record of this type holds
        except RecordError as exc:
            raise RecordError(self._redactor.mask(str(exc))) from None  # it may quote a value
        with self._lock:
            fd = self._fd
            if fd is None:
                raise ValueError(f"transcript {self.path} is closed")
            seq = self._seq + 1
            record: dict[str, Any] = {"type": type, "run_id": self.run_id, "seq": seq, "ts": self._stamp()}
            record.update(fields)
            line = self._encode(record, fields)
            if self._redactor and self._redactor.line_may_leak(line):
                record = {**{k: record[k] for k in _ENVELOPE}, **self._masked(fields)}
                line = self._encode_envelope(record) + "\n"
            self._append(fd, _to_utf8(line, record), seq)
            return record

    def _masked(self, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` with secrets masked in every member but the counts, durations and
        statuses (see _STRUCTURAL)."""
        redact = self._redactor.redact
        return {k: v if k in _STRUCTURAL else redact(v) for k, v in fields.items()}

    def _append(self, fd: int, data: bytes, seq: int, defer: bool = False) -> None:
        """Seal and write one line (the lock is held), then move the head; on failure,
        never leave half a line behind: the next line would glue onto it. A deferred line
        waits, sealed, for the next line written now, a flush, or PENDING_LIMIT bytes."""
        if self._broken is not None:
            raise OSError(self._broken.errno, f"{self.path}: an earlier write failed: {self._broken.strerror}")
        data, mac = self._sealer.seal(self._mac, data)
        if defer:
            self._pending.append(data)
            self._pending_size += len(data)
            self._seq = seq
            self._mac = mac
            if self._pending_size >= PENDING_LIMIT:
                self._write_pending(fd)
            elif not self._flush_due:
                self._schedule_flush()
            return
        head = data.startswith(_HEAD_BEFORE)  # see chainlang.journal.lock
        if self._pending:  # the lines that waited go first, in the same write(2)
            self._pending.append(data)
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
            self._put(fd, data, lost_pending=True)
        else:
            self._put(fd, data)
        self._seq = seq
        self._mac = mac
        if self._lock_file is not None and head:
            self._lock_file.record(seq, mac)
            if self.durable:
                self._lock_file.sync()

    def _put(self, fd: int, data: bytes, lost_pending: bool = False) -> None:
        try:
            written = os.write(fd, data)
            if written != len(data):  # a short write (a signal, a nearly full disk): finish it
                _write_all(fd, data[written:])
            if self.durable:
                os.fsync(fd)
        except BaseException as exc:
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass
            if lost_pending:  # lines this writer counted as written are not in the file: no more lines
                self._broken = exc if isinstance(exc, OSError) else OSError(0, str(exc))
            raise
        self._size += len(data)

    def _write_pending(self, fd: int) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        self._put(fd, data, lost_pending=True)

    def defer_next(self) -> None:
        """Let the next line wait for the lines after it, to share their write(2). For the
        records whose loss in a crash only makes an idempotent step run again (its
        step_started and step_finished): the interpreter asks it right before writing one.
        Waiting lines are written before any line that is not deferred, by `commit`, `flush`
        and `close`, once PENDING_LIMIT bytes wait, and when the event loop next turns."""
        self._defer = True

    def flush(self) -> None:
        """Write the lines that wait (see `defer_next`)."""
        with self._lock:
            self._flush_due = False
            if self._pending and self._fd is not None:
                self._write_pending(self._fd)

    def _schedule_flush(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here: nothing would turn, write now
            assert self._fd is not None
            self._write_pending(self._fd)
            return
        self._flush_due = True
        loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        try:
            self.flush()
        except OSError:  # kept in _broken: the next write raises it where a caller can tell
            pass

    def commit(self) -> None:
        """Move the head to the last line written: the interpreter calls it after the
        `step_started` of a step that is not idempotent, before its tool acts. (Removing
        the lines after the head can only make idempotent steps run again, as a crash
        would.)"""
        with self._lock:
            if self._pending and self._fd is not None:
                self._write_pending(self._fd)
            if self._fd is not None and self._lock_file is not None and self._seq:
                self._lock_file.record(self._seq, self._mac)
                if self.durable:
                    self._lock_file.sync()

    def close(self) -> None:
        """Close the file (idempotent), moving the head to its last line. Writing
        afterwards raises `ValueError`."""
        with self._lock:
            if self._pending and self._fd is not None:
                try:
                    self._write_pending(self._fd)
                except OSError:
                    os.close(self._fd)
                    self._fd = None
                    raise
            fd, self._fd = self._fd, None
            if fd is not None and self._lock_file is not None and self._seq:
                self._lock_file.record(self._seq, self._mac)
                if self.durable:
                    self._lock_file.sync()
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._fd is None else f"seq={self._seq}"
        return f"TranscriptWriter({str(self.path)!r}, run_id={self.run_id!r}, {state})"

    # -- internals

    def _encode(self, record: dict[str, Any], fields: dict[str, Any]) -> str:
        # json.dumps alone would turn int keys into strings and NaN into invalid JSON
        found = None if is_plain_json(fields) else find_non_json(fields, [])
        if found is not None:
            path, why = found
            where = self._redactor.mask(describe_path(path)) if path else "?"
            raise TypeError(
                f"{record['type']} record: field {where!r} {why} (transcript values must be plain JSON)"
            )
        try:
            return self._encode_envelope(record) + "\n"
        except (TypeError, ValueError) as exc:  # pragma: no cover - find_non_json catches these
            raise TypeError(f"{record['type']} record: {exc}") from None


def _to_utf8(line: str, record: dict[str, Any]) -> bytes:
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        # a lone surrogate in some string: \u-escape it instead (still valid, round-trips)
        return (
            json.dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n"
        ).encode("ascii")


def _open_append(path: Path) -> tuple[int, bool]:
    """The file at `path` opened to append (its parent directories made if needed), and
    whether it existed. A new file is made with O_EXCL: no stat and no read of what it holds
    (the common case: a run's new transcript)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    for _ in range(2):
        try:
            return os.open(path, flags | os.O_EXCL, 0o666), False
        except FileExistsError:
            try:
                return os.open(path, flags & ~os.O_CREAT, 0o666), True
            except FileNotFoundError:  # removed in between: make it anew
                continue
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, flags, 0o666), True  # it keeps appearing and going: read what it holds


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(directory: Path) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dfd)


