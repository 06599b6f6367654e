"""The live progress display of `chainlang run`: one more consumer of the transcript records.

The interpreter hands every record it writes to the transcript (the same dict) to
`view.record(rec)`, and calls `view.close()` once at the end. `make_progress()` picks the
view:

- `quiet`: nothing at all.
- `plain` (the default when the stream is not a terminal): one line per finished step, per
  retry, per progress message, per decide answer and for the run's start and finish::

      ▶ run greet (chains/greet.yaml)
      … 3 web.fetch 40% downloading
      ↻ 2 web.fetch retry 2/3
      ? 4 email.send decide: skip (condition `x` is false)
      ✓ 3.1 tools.now 0.4 ms
      ✗ 4 email.send failed: connection refused
      - 5 user.notify skipped
      run ok in 12.3 ms

  A stream whose encoding cannot carry the symbols gets ASCII ones (`+ x - ~ ... ? >`).
  Progress lines of one step are thinned out: a repeat is shown only when its message
  changes or its fraction crosses another 10 %. On a terminal each line is written and
  flushed at once. On a pipe or file (CI) lines are collected and written in batches, one
  write and one flush each, so that `record()` costs a few microseconds: a line waits at
  most `PlainProgress.FLUSH_INTERVAL` (0.1 s; a background thread writes it when no later
  line does), and the batch is written at once for a failed step, a note, the run's start
  and finish, on `close()` and at interpreter exit.
- `rich` (the default on a terminal): the same lines scroll above a live table of the
  running steps (their latest progress message, a bar, the elapsed time; a few rows and
  "+N more"), redrawn by a background thread at most ~10 times a second. rich is imported
  only when this view is made; without it the plain view is used.

Every text that comes from a chain, a tool or a result (step paths, event names, messages,
reasons, errors) is cut to one line of bounded length and shown with control and bidi
characters escaped (`chainlang.diagnostics.visible`), so a hostile message cannot move the
cursor, rewrite earlier lines or reorder the text on the terminal.

Secrets never show: the runner hands each view the run's redaction service
(`use_secrets()`, see chainlang.runtime.secrets), and every text of a line passes through
it before it is cut to length (the records are masked already by the transcript writer;
this also covers notes). Without secrets it costs one attribute test per text.

A display must never break the run it shows: records of unknown types or with odd fields
are tolerated, and a stream that fails (closed pipe) silences the view instead of raising.
`record()` may be called from several threads; memory stays bounded however long the run.
"""

from __future__ import annotations

import atexit
import codecs
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

from chainlang.diagnostics import visible

if TYPE_CHECKING:
    from rich.console import Console, OverflowMethod, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    from chainlang.runtime.secrets import Redactor

__all__ = [
    "MAX_TEXT",
    "Mode",
    "PlainProgress",
    "ProgressView",
    "QuietProgress",
    "RichProgress",
    "make_progress",
]

Mode = Literal["auto", "plain", "rich", "quiet"]

MAX_TEXT = 200  # characters of one message, reason or error on a line
_MAX_NAME = 80  # characters of a step path or an event name
_MAX_NOTE = 1000  # characters of a notification line

# One piece of a line: its text and a style name ("" for none), rendered as ANSI escapes by
# the plain view and as rich styles by the rich view.
Segment = tuple[str, str]
Line = list[Segment]

_UNICODE_SYMBOLS = {
    "ok": "✓",
    "failed": "✗",
    "skipped": "-",
    "cancelled": "⊘",
    "other": "•",
    "retry": "↻",
    "progress": "…",
    "decide": "?",
    "run": "▶",
    "ellipsis": "…",
    "sep": " · ",
}
_ASCII_SYMBOLS = {
    "ok": "+",
    "failed": "x",
    "skipped": "-",
    "cancelled": "/",
    "other": "*",
    "retry": "~",
    "progress": "...",
    "decide": "?",
    "run": ">",
    "ellipsis": "...",
    "sep": " - ",
}

_STEP_STATUSES = ("ok", "failed", "skipped", "cancelled")

_ANSI_RESET = "\x1b[0m"
_ANSI = {
    "ok": "\x1b[32m",
    "fail": "\x1b[1;31m",
    "warn": "\x1b[33m",
    "dim": "\x1b[2m",
    "info": "\x1b[36m",
    "decide": "\x1b[35m",
    "bold": "\x1b[1m",
}
_RICH_STYLES = {
    "": "",
    "ok": "green",
    "fail": "bold red",
    "warn": "yellow",
    "dim": "dim",
    "info": "cyan",
    "decide": "magenta",
    "bold": "bold",
}
_STATUS_STYLE = {"ok": "ok", "failed": "fail", "skipped": "dim", "cancelled": "warn"}
_RUN_STYLE = {"ok": "ok", "failed": "fail", "broken": "fail"}


class ProgressView(Protocol):
    """What the interpreter talks to: every transcript record, then `close()` once.
    `note(text)` shows a line meant for the user (a notification), in order with the steps.

    The views of this module also have `use_secrets(redactor)`, which the runner calls
    before the first record when a view has it. A view of one's own needs none: the records
    it gets are masked by the transcript writer, and the notes by the runner."""

    def record(self, rec: dict[str, Any]) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def make_progress(stream: TextIO, mode: Mode = "auto", *, color: bool | None = None) -> ProgressView:
    """The progress view of `mode` writing to `stream` (usually `sys.stderr`).

    `auto` is `rich` on a terminal (unless TERM=dumb) and `plain` otherwise; `rich` falls
    back to `plain` when rich cannot be imported. `color=None` decides as the CLI does:
    NO_COLOR turns colour off, FORCE_COLOR on, otherwise colour when the stream is a terminal.
    """
    if mode == "quiet":
        return QuietProgress(stream)
    if mode not in ("auto", "plain", "rich"):
        raise ValueError(f"unknown progress mode {mode!r}: expected auto, plain, rich or quiet")
    if color is None:
        from chainlang.output.terminal import use_color as _use_color  # one rule for colour in every command

        color = _use_color(stream)
    if mode == "auto":
        mode = "rich" if _isatty(stream) and os.environ.get("TERM") != "dumb" else "plain"
    if mode == "rich":
        try:
            return RichProgress(stream, color=color)
        except ImportError:
            pass
    return PlainProgress(stream, color=color)


def _isatty(stream: object) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def _narrow_encoding(encoding: object) -> str | None:
    """None when `encoding` carries all of Unicode (or is unknown: a StringIO), else its name."""
    if not isinstance(encoding, str) or not encoding:
        return None
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    return None if name.startswith("utf") else name


def _can_encode(text: str, encoding: str | None) -> bool:
    if encoding is None:
        return True
    try:
        text.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def _duration(ms: object) -> str:
    """`0.4 ms`, `12.3 ms`, `1.25 s`, `2m 05s`, `1h 02m 03s`; "" for a missing or odd value."""
    if type(ms) is float and 0.0 <= ms < 999.95:  # the common case first
        return f"{ms:.1f} ms"
    if type(ms) is not float and type(ms) is not int:
        return ""
    if not math.isfinite(ms) or ms < 0:
        return ""
    if ms < 999.95:
        return f"{ms:.1f} ms"
    seconds = ms / 1000
    if seconds < 59.995:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _elapsed(seconds: float) -> str:
    """A running time that does not flicker: `0.3 s`, `42.0 s`, then as `_duration`."""
    return f"{seconds:.1f} s" if seconds < 59.95 else _duration(seconds * 1000)


def _fraction(value: object) -> float | None:
    if (type(value) is float or type(value) is int) and math.isfinite(value):
        return min(1.0, max(0.0, float(value)))
    return None


class _Formatter:
    """Turns records into lines (lists of segments) for a stream of a given encoding."""

    def __init__(self, encoding: object) -> None:
        narrow = _narrow_encoding(encoding)
        unicode_ok = _can_encode("".join(_UNICODE_SYMBOLS.values()), narrow)
        self.symbols = _UNICODE_SYMBOLS if unicode_ok else _ASCII_SYMBOLS
        # the encoding that text must survive: utf-8 (only lone surrogates can fail) or a narrow one
        self._narrow = narrow
        self._target = narrow or "utf-8"
        self._ellipsis = self.symbols["ellipsis"]
        self.secrets: Redactor | None = None  # the run's redaction service (`use_secrets`)
        self._ok_symbol = self.symbols["ok"]
        self._names: dict[str, str] = {}  # event name -> its clean() text, for ok_text

    def clean(self, value: object, limit: int = MAX_TEXT) -> str:
        """`value` as one visible line of at most `limit` characters that the stream can
        encode, with the run's secrets masked (before it is cut: no part of one shows)."""
        text = value if type(value) is str else ("" if value is None else str(value))
        secrets = self.secrets
        if secrets is not None and secrets.secrets:
            text = secrets.mask(text)
        if len(text) > 4 * limit:  # never spend time on a megabyte message
            text = text[: 4 * limit]
        if not text.isprintable():  # the rare case: newlines, tabs, controls, bidi, surrogates
            text = visible(" ".join(text.split()))
            text = text.encode(self._target, "backslashreplace").decode(self._target)
        elif self._narrow is not None and not text.isascii():
            text = text.encode(self._target, "backslashreplace").decode(self._target)
        if len(text) > limit:
            text = text[: limit - len(self._ellipsis)] + self._ellipsis
        return text

    def _step(self, rec: dict[str, Any]) -> tuple[str, str]:
        return self.clean(rec.get("step"), _MAX_NAME), self.clean(rec.get("event"), _MAX_NAME)

    def _error(self, error: object) -> str:
        if isinstance(error, dict):
            message = error.get("message")
            if message is None or message == "":
                message = error.get("type")
            return self.clean(message)
        return self.clean(error)

    def run_started(self, rec: dict[str, Any]) -> Line:
        chain, file = rec.get("chain"), _relative(rec.get("file"))
        what = "resume" if rec.get("resumed") is True else "run"
        line: Line = [(self.symbols["run"], "bold"), (" ", ""), (what, "bold")]
        if chain:
            line.append((" " + self.clean(chain, _MAX_NAME), "bold"))
            if file:
                line.append((f" ({self.clean(file)})", "dim"))
        elif file:
            line.append((" " + self.clean(file), "bold"))
        if rec.get("now"):
            line.append((f", clock pinned to {self.clean(rec.get('now'), _MAX_NAME)}", "dim"))
        return line

    def retry(self, rec: dict[str, Any], attempt: int) -> Line:
        step, event = self._step(rec)
        limit = rec.get("max_attempts")
        of = f"/{limit}" if type(limit) is int else ""
        return [(self.symbols["retry"], "warn"), (f" {step} {event} ", ""), (f"retry {attempt}{of}", "warn")]

    def progress(self, rec: dict[str, Any], fraction: float | None) -> Line:
        step, event = self._step(rec)
        percent = "" if fraction is None else f" {int(fraction * 100)}%"
        message = self.clean(rec.get("message"))
        return [(self.symbols["progress"], "dim"), (f" {step} {event}{percent}", "dim"), (f" {message}" if message else "", "")]

    def decide(self, rec: dict[str, Any]) -> Line:
        step, event = self._step(rec)
        reason = self.clean(rec.get("reason"))
        return [
            (self.symbols["decide"], "decide"),
            (f" {step} {event} decide: ", ""),
            (self.clean(rec.get("action"), _MAX_NAME), "decide"),
            (f" ({reason})" if reason else "", "dim"),
        ]

    def _ok(self, rec: dict[str, Any]) -> tuple[str, str]:
        step, event = self._step(rec)
        tail = "replayed" if rec.get("replayed") is True else _duration(rec.get("duration_ms"))
        return f" {step} {event}", f" {tail}" if tail else ""

    def ok_text(self, rec: dict[str, Any]) -> str:
        """The uncoloured line of a step finished ok: the most frequent line, made directly
        (the same text as `finished(rec, "ok")`, in fewer calls)."""
        return self.ok_line(rec.get("step"), rec.get("event"), rec.get("duration_ms"), rec.get("replayed"))

    def ok_line(self, step: object, event: object, duration_ms: object, replayed: object) -> str:
        """`ok_text` of a record with these fields."""
        clean = self.clean
        path = clean(step, _MAX_NAME)
        name = self._names.get(event) if type(event) is str else None
        if name is None:
            name = clean(event, _MAX_NAME)
            if type(event) is str and len(self._names) < 1024:  # a chain has few event names
                self._names[event] = name
        tail = "replayed" if replayed is True else _duration(duration_ms)
        return f"{self._ok_symbol} {path} {name} {tail}" if tail else f"{self._ok_symbol} {path} {name}"

    def finished(self, rec: dict[str, Any], status: str) -> Line:
        if status == "ok":
            head, tail = self._ok(rec)
            return [(self.symbols["ok"], "ok"), (head, ""), (tail, "dim")]
        step, event = self._step(rec)
        if status == "failed":
            message = self._error(rec.get("error"))
            return [(self.symbols["failed"], "fail"), (f" {step} {event} ", ""), ("failed", "fail"), (f": {message}" if message else "", "")]
        style = _STATUS_STYLE.get(status, "warn")
        symbol = self.symbols[status] if status in ("skipped", "cancelled") else self.symbols["other"]
        reason = self.clean(rec.get("reason"))  # why a step was skipped, when the engine says
        return [(symbol, style), (f" {step} {event} ", ""), (self.clean(status, _MAX_NAME), style), (f" ({reason})" if reason else "", "dim")]

    def run_finished(self, rec: dict[str, Any]) -> Line:
        status = self.clean(rec.get("status") or "finished", _MAX_NAME)
        took = _duration(rec.get("duration_ms"))
        # an interrupted run's message (how to resume, what to check) is printed whole by the
        # command after the view closes: here it would be cut, and said twice
        error = rec.get("error") if status != "interrupted" else None
        message = self._error(error) if error else ""
        line: Line = [(f"run {status}", _RUN_STYLE.get(status, "warn"))]
        if message:
            line.append((f": {message}", ""))
            if took:
                line.append((f" ({took})", "dim"))
        elif took:
            line.append((f" {'in' if status == 'ok' else 'after'} {took}", "dim"))
        return line

    def elided(self, counts: dict[str, int]) -> Line:
        total = sum(counts.values())
        parts = ", ".join(f"{n:,} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        return [(f"{self._ellipsis} {total:,} more lines not shown ({parts}); the transcript has them all", "dim")]


class QuietProgress:
    """Shows no progress; notes (notifications meant for the user) still go to `stream`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._fmt = _Formatter(getattr(stream, "encoding", None))

    def use_secrets(self, redactor: Redactor) -> None:
        """Mask the run's secrets in every note."""
        self._fmt.secrets = redactor

    def record(self, rec: dict[str, Any]) -> None:
        pass

    def note(self, text: str) -> None:
        if self._stream is not None:
            try:
                self._stream.write(self._fmt.clean(text, _MAX_NOTE) + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                self._stream = None

    def close(self) -> None:
        pass


# an ok line's fields, kept until its batch is written: step, event, duration_ms, replayed
_OkFields = tuple[object, object, object, object]


class PlainProgress:
    """One line per finished step, retry, progress message, decide answer, run start and finish.

    On a terminal every line is written and flushed at once. On a pipe or a file (what CI
    reads) lines are collected and written together, one write and one flush per batch:
    when the oldest collected line is `FLUSH_INTERVAL` old (checked as lines come, by a timer
    of the event loop they come from, and by a watching thread when no loop can), when
    `MAX_BUFFERED` lines are waiting, at once for a failed step, a note, the run's start and
    finish, and on `close()`. The line of a step finished ok (most lines) is only formatted
    when its batch is written. Views never closed are flushed when the interpreter exits
    (`atexit`); a process killed with SIGKILL may lose the last fraction of a second of lines
    (the transcript has them all).
    """

    FLUSH_INTERVAL = 0.1  # seconds: on a pipe or file, how long a line waits to be written
    WATCH_INTERVAL = 0.25  # seconds between two looks of the watching thread
    MAX_BUFFERED = 1024  # lines collected at most (~30 KB: a pipe holds 64 KB, so writes seldom wait for the reader)
    _MAX_TRACKED = 4096  # steps whose last progress line is remembered (bounds memory)

    def __init__(self, stream: TextIO, *, color: bool = False) -> None:
        self._stream = stream
        self._fmt = _Formatter(getattr(stream, "encoding", None))
        self._color = color
        self._plain_ok = not color  # an ok line is made as one string (ok_text)
        self._tty = _isatty(stream)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # ends the watching thread's wait at close()
        self._pending: list[str | _OkFields] = []  # lines not written yet (pipe or file only)
        self._since = 0.0  # time.monotonic() when the oldest pending line came
        self._timer_loop: object = None  # the event loop whose timer will write the pending lines
        self._shown: dict[object, tuple[object, int]] = {}  # step -> (message, 10 % bucket) last shown
        self._dead = False
        self._handlers: dict[object, Callable[[dict[str, Any]], None]] = {
            "step_finished": self._finished,
            "step_progress": self._progress,
            "step_started": self._started,
            "decide": self._decide,
            "run_started": self._run_started,
            "run_finished": self._run_finished,
        }
        if not self._tty:
            _UNCLOSED.add(self)
            # started now rather than with the first line, so that its start costs the run nothing
            threading.Thread(target=self._watch, name="chainlang-progress-watch", daemon=True).start()

    def use_secrets(self, redactor: Redactor) -> None:
        """Mask the run's secrets in every line."""
        self._fmt.secrets = redactor

    def record(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "step_finished" and self._plain_ok and rec.get("status") == "ok":
            # the most frequent record: its fields are kept, and its line made when the batch is
            # written (many lines formatted in a row cost the run a fraction of one at a time)
            if not self._dead:
                step = rec.get("step")
                fields = (step, rec.get("event"), rec.get("duration_ms"), rec.get("replayed"))
                with self._lock:
                    if self._shown:
                        self._shown.pop(step, None)
                    self._write_line(fields)
            return
        if kind == "step_started" and rec.get("attempt") == 1:  # the first attempt shows nothing
            return
        handler = self._handlers.get(kind)
        if handler is not None and not self._dead:
            with self._lock:
                handler(rec)

    def note(self, text: str) -> None:
        if not self._dead:
            with self._lock:
                self._write_line(self._fmt.clean(text, _MAX_NOTE), flush=True)

    def close(self) -> None:
        with self._lock:
            if not self._dead:
                self._flush()
            self._dead = True
            self._wake.notify_all()  # the watching thread ends
        _UNCLOSED.discard(self)

    # -- handlers (called with the lock held) ------------------------------------------

    def _started(self, rec: dict[str, Any]) -> None:
        attempt = rec.get("attempt")
        if type(attempt) is int and attempt > 1:
            self._shown.pop(rec.get("step"), None)
            self._emit(self._fmt.retry(rec, attempt))

    def _progress(self, rec: dict[str, Any]) -> None:
        fraction = _fraction(rec.get("fraction"))
        key = (rec.get("message"), -1 if fraction is None else int(fraction * 10))
        step = rec.get("step")
        if step is not None:
            if self._shown.get(step) == key:
                return
            if len(self._shown) >= self._MAX_TRACKED:
                self._shown.clear()
            self._shown[step] = key
        self._emit(self._fmt.progress(rec, fraction))

    def _decide(self, rec: dict[str, Any]) -> None:
        self._emit(self._fmt.decide(rec))

    def _finished(self, rec: dict[str, Any]) -> None:
        if self._shown:
            self._shown.pop(rec.get("step"), None)
        status = rec.get("status")
        if status == "ok" and not self._color:
            self._write_line(self._fmt.ok_text(rec))
            return
        status = status if type(status) is str else "finished"
        self._emit(self._fmt.finished(rec, status), flush=status == "failed")

    def _run_started(self, rec: dict[str, Any]) -> None:
        self._shown.clear()
        self._emit(self._fmt.run_started(rec), flush=True)

    def _run_finished(self, rec: dict[str, Any]) -> None:
        self._shown.clear()
        self._emit(self._fmt.run_finished(rec), flush=True)

    # -- output --------------------------------------------------------------------------

    def _emit(self, line: Line, *, flush: bool = False) -> None:
        if self._color:
            text = "".join(f"{_ANSI[style]}{part}{_ANSI_RESET}" if style and part else part for part, style in line)
        else:
            text = "".join([part for part, _ in line])
        self._write_line(text, flush=flush)

    def _write_line(self, text: str | _OkFields, *, flush: bool = False) -> None:
        """Write `text` as a line now (terminal) or collect it (pipe, file); the lock is held.
        `text` may be the fields of an ok line (`_Formatter.ok_line`), formatted when written."""
        if self._dead:
            return
        if self._tty:
            if isinstance(text, tuple):
                text = self._fmt.ok_line(*text)
            try:
                self._stream.write(text + "\n")
                self._stream.flush()
            except (OSError, ValueError):  # a closed stream: the run goes on without a display
                self._dead = True
            return
        pending = self._pending
        now = time.monotonic()
        if not pending:
            self._since = now
            if not flush:
                self._arm(now)
        pending.append(text)
        if flush or now - self._since >= self.FLUSH_INTERVAL or len(pending) >= self.MAX_BUFFERED:
            self._flush()

    def _flush(self) -> None:
        """Write the collected lines with one write and one flush; the lock is held."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        ok_line = self._fmt.ok_line
        try:
            self._stream.write("\n".join([ok_line(*item) if isinstance(item, tuple) else item for item in pending]) + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: the run goes on without a display
            self._dead = True

    def _arm(self, now: float) -> None:
        """A first line waits: make sure something writes it `FLUSH_INTERVAL` from `now` if no
        later line does. In an event loop's thread (where the interpreter emits) that is a
        timer of the loop, which costs the run no thread switch; elsewhere the watching
        thread does it. The lock is held."""
        loop = _running_loop()
        if loop is None or loop is self._timer_loop:  # no loop here, or its timer is set already
            return
        self._timer_loop = loop
        loop.call_at(now + self.FLUSH_INTERVAL, self._on_timer, loop)

    def _on_timer(self, loop: object) -> None:
        """The loop's timer: write the lines that have waited long enough, or wait for the
        batch that came since."""
        with self._lock:
            if self._timer_loop is not loop:
                return
            self._timer_loop = None
            if self._dead or not self._pending:
                return
            now = time.monotonic()
            if now - self._since >= self.FLUSH_INTERVAL:
                self._flush()
            else:
                self._arm(self._since)

    def _watch(self) -> None:
        """The watching thread: writes lines that have waited `FLUSH_INTERVAL` when no line
        and no loop timer wrote them (records from other threads, a loop blocked by a tool).
        It looks every `WATCH_INTERVAL` and is never woken for a line: waking a thread
        takes the GIL from the run."""
        wake = self._wake
        with wake:
            while not self._dead:
                if self._pending and time.monotonic() - self._since >= self.FLUSH_INTERVAL:
                    self._flush()
                wake.wait(self.WATCH_INTERVAL)

    def _flush_at_exit(self) -> None:
        # the lock may be held by a thread that the exit stopped mid-write: do not wait for ever
        if self._lock.acquire(timeout=1.0):
            try:
                if not self._dead:
                    self._flush()
            finally:
                self._lock.release()


def _running_loop() -> Any:
    """The event loop running in this thread, or None (asyncio is imported only if in use)."""
    asyncio = sys.modules.get("asyncio")
    return None if asyncio is None else asyncio.events._get_running_loop()


# plain views on a pipe or file that were not closed: their collected lines are written at exit
_UNCLOSED: weakref.WeakSet[PlainProgress] = weakref.WeakSet()


@atexit.register
def _flush_unclosed_views() -> None:
    for view in list(_UNCLOSED):
        view._flush_at_exit()


class _Running:
    __slots__ = ("label", "event", "attempt", "started", "message", "fraction")

    def __init__(self, label: str, event: str, attempt: int, started: float) -> None:
        self.label = label
        self.event = event
        self.attempt = attempt
        self.started = started
        self.message = ""
        self.fraction: float | None = None


class RichProgress:
    """A live table of the running steps, with the plain view's lines scrolling above it.

    `record()` only updates a little state under a lock (formatting a line when one is due);
    a background thread prints the collected lines and redraws the table at most
    `refresh_per_second` times a second. Between two redraws at most `MAX_PENDING` lines
    are kept (failures get as many again); the rest are counted in one "N more lines not
    shown" line. The table shows `MAX_ROWS` running steps, oldest first, then "+N more".

    When the console writes to sys.stderr (or sys.stdout), that stream is routed through rich
    while the view is open, so that other writers' lines (notifications, a tool's prints)
    land above the table instead of tearing it; they appear at once, so they may show up
    before the step lines of the same tenth of a second.

    `console` may be given (tests render into `Console(file=StringIO(), force_terminal=True)`);
    otherwise one is made on `stream`. Raises ImportError when rich is not installed.
    """

    MAX_ROWS = 6
    MAX_PENDING = 100
    _MAX_RUNNING = 10_000  # steps tracked as running (bounds memory if finishes go missing)

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        color: bool | None = None,
        console: Console | None = None,
        refresh_per_second: float = 10.0,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        if console is None:
            out = sys.stderr if stream is None else stream
            if color is None:
                from chainlang.output.terminal import use_color as _use_color

                color = _use_color(out)
            console = Console(file=out, color_system="auto" if color else None, highlight=False, emoji=False)
        self._console = console
        self._fmt = _Formatter(console.encoding)
        # rich cuts a line too long for the terminal with "…", which an ASCII terminal cannot show
        self._overflow: OverflowMethod = "ellipsis" if self._fmt.symbols is _UNICODE_SYMBOLS else "crop"
        self._interval = 1.0 / max(0.1, refresh_per_second)
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self._pending: list[tuple[str, Line]] = []  # (kind, line) waiting for the next redraw
        self._elided: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._title = ""
        self._run_start = time.monotonic()
        self._dirty = True
        self._closed = False
        self._spinner: Spinner | None = None
        self._stop = threading.Event()
        # a live display may take over sys.stdout/stderr only when it writes to that very stream,
        # so that other writers' lines land above it (and a redirected stdout stays where it is)
        self._live: Live | None = Live(
            console=console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=console.file is sys.stdout,
            redirect_stderr=console.file is sys.stderr,
        )
        try:
            self._live.start()
        except Exception:  # e.g. another live display on this console: just print the lines
            self._live = None
        self._thread = threading.Thread(target=self._loop, name="chainlang-progress", daemon=True)
        self._thread.start()

    # -- the caller's side: cheap --------------------------------------------------------

    def use_secrets(self, redactor: Redactor) -> None:
        """Mask the run's secrets in every line and in the table."""
        self._fmt.secrets = redactor

    def record(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        fmt = self._fmt
        with self._lock:
            if self._closed:
                return
            if kind == "step_progress":
                step = rec.get("step")
                if type(step) is str:
                    row = self._running.get(step)
                    if row is None:
                        row = self._start_row(step, rec, 1)
                    row.message = fmt.clean(rec.get("message"))
                    row.fraction = _fraction(rec.get("fraction"))
            elif kind == "step_started":
                step = rec.get("step")
                attempt = rec.get("attempt")
                attempt = attempt if type(attempt) is int else 1
                if type(step) is str:  # a new attempt keeps the step's place, oldest first
                    self._start_row(step, rec, attempt)
                if attempt > 1 and self._room("retry"):
                    self._pending.append(("retry", fmt.retry(rec, attempt)))
            elif kind == "step_finished":
                step = rec.get("step")
                if type(step) is str:
                    self._running.pop(step, None)
                status = rec.get("status")
                status = status if type(status) is str else "finished"
                counted = status if status in _STEP_STATUSES else "other"
                self._counts[counted] = self._counts.get(counted, 0) + 1
                if self._room(counted):
                    self._pending.append((status, fmt.finished(rec, status)))
            elif kind == "decide":
                if self._room("decide"):
                    self._pending.append(("decide", fmt.decide(rec)))
            elif kind == "run_started":
                self._counts.clear()
                self._running.clear()
                self._run_start = time.monotonic()
                chain = rec.get("chain") or rec.get("file")
                self._title = fmt.clean(chain, _MAX_NAME) if chain else ""
                self._pending.append(("run", fmt.run_started(rec)))
            elif kind == "run_finished":
                self._running.clear()
                self._pending.append(("run", fmt.run_finished(rec)))
            else:
                return
            self._dirty = True

    def note(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            if self._room("note"):
                self._pending.append(("note", [(self._fmt.clean(text, _MAX_NOTE), "")]))
            self._dirty = True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self._tick(final=True)
        finally:
            if self._live is not None:
                try:
                    self._live.stop()
                except (OSError, ValueError):
                    pass

    def _start_row(self, step: str, rec: dict[str, Any], attempt: int) -> _Running:
        if len(self._running) >= self._MAX_RUNNING and step not in self._running:
            self._running.pop(next(iter(self._running)))
        fmt = self._fmt
        row = _Running(fmt.clean(step, _MAX_NAME), fmt.clean(rec.get("event"), _MAX_NAME), attempt, time.monotonic())
        self._running[step] = row
        return row

    def _room(self, kind: str) -> bool:
        """Whether a line of `kind` may wait for the next redraw; counts it as elided if not."""
        n = len(self._pending)
        if n < self.MAX_PENDING or (kind == "failed" and n < 2 * self.MAX_PENDING):
            return True
        self._elided[kind] = self._elided.get(kind, 0) + 1
        return False

    # -- the drawing thread ---------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tick()
            except Exception:  # a broken terminal must not kill the run: stop drawing
                return

    def _tick(self, *, final: bool = False) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            elided, self._elided = self._elided, {}
            if not (pending or elided or self._running or self._dirty or final):
                return
            self._dirty = False
            table = None if final else self._table()
        lines = [(kind == "note", line) for kind, line in pending]  # a note wraps; step lines are cut
        if elided:  # the lines left out came before a run line (which is never left out)
            at = len(lines) - 1 if pending and pending[-1][0] == "run" else len(lines)
            lines.insert(at, (False, self._fmt.elided(elided)))
        try:
            if lines:
                from rich.console import Group

                self._console.print(Group(*(self._text(line, wrap) for wrap, line in lines)))
            if self._live is not None and table is not None:
                self._live.update(table, refresh=True)
        except (OSError, ValueError):
            self._stop.set()

    def _text(self, line: Line, wrap: bool = False) -> Text:
        from rich.text import Text

        parts = ((part, _RICH_STYLES.get(style, "")) for part, style in line)
        if wrap:
            return Text.assemble(*parts)
        return Text.assemble(*parts, no_wrap=True, overflow=self._overflow)

    def _table(self) -> RenderableType:
        """The live part, built under the lock: a few running steps and a status line."""
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        pulse = self._console.color_system is not None
        overflow = self._overflow
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(no_wrap=True, overflow=overflow, style="bold", max_width=24)
        table.add_column(no_wrap=True, overflow=overflow, max_width=40)
        table.add_column(no_wrap=True, width=12)
        table.add_column(no_wrap=True, justify="right", width=4)
        table.add_column(no_wrap=True, overflow=overflow, ratio=1)
        table.add_column(no_wrap=True, justify="right", style="dim")
        for row in islice(self._running.values(), self.MAX_ROWS):
            bar: RenderableType = ""
            if row.fraction is not None:
                bar = ProgressBar(total=1.0, completed=row.fraction, width=12)
            elif pulse:  # an animated bar for a step of unknown length (without colour it would look full)
                bar = ProgressBar(total=None, width=12)
            percent = "" if row.fraction is None else f"{int(row.fraction * 100)}%"
            event = row.event if row.attempt == 1 else f"{row.event} (attempt {row.attempt})"
            table.add_row(
                Text(row.label), Text(event), bar, Text(percent), Text(row.message, style="dim"), Text(_elapsed(now - row.started))
            )
        more = len(self._running) - self.MAX_ROWS
        if more > 0:
            table.add_row("", Text(f"+{more:,} more", style="dim"), "", "", "", "")
        sep = self._fmt.symbols["sep"]
        status = [f"{len(self._running):,} running"]
        status += [f"{self._counts[s]:,} {s}" for s in (*_STEP_STATUSES, "other") if self._counts.get(s)]
        title = f"{self._title}{sep}" if self._title else ""
        footer = Text(f"{title}{sep.join(status)}{sep}{_elapsed(now - self._run_start)}", style="dim")
        if self._spinner is None:  # one spinner for the whole run, so that it turns
            self._spinner = Spinner("dots" if self._fmt.symbols is _UNICODE_SYMBOLS else "line", footer, style="cyan")
        else:
            self._spinner.update(text=footer)
        return Group(table, self._spinner) if self._running else footer


def _relative(file: Any) -> Any:
    """A chain file as the user would type it: relative to the working directory when under it."""
    if not isinstance(file, str) or not os.path.isabs(file):
        return file
    try:
        return os.path.relpath(file) if not os.path.relpath(file).startswith("..") else file
    except ValueError:  # another drive (Windows)
        return file
