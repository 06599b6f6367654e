"""The plain progress view: one line per finished step, retry, progress message, decide
answer, and for the run's start and finish; on a pipe or file its lines are written in
batches (see `PlainProgress`), flushed by a loop timer, a watching thread, or at exit."""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from chainlang.journal.records import (Decide, HookDropped, HookFinished, HookFired, RunFinished, RunStarted,
                                       StepFinished, StepProgress, StepStarted, WaitFinished, WaitStarted)
from chainlang.output.progress.format import _ANSI, _ANSI_RESET, _MAX_NOTE, Line, _Formatter, _fraction, _isatty

if TYPE_CHECKING:
    from chainlang.journal.records import Record
    from chainlang.redaction import Redactor


# an ok line's members, kept until its batch is written: step, event, duration_ms
_OkFields = tuple[object, object, object]


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
        # record type -> handler; the other types (clock) and anything else show nothing
        self._handlers: dict[type, Callable[[Any], None]] = {
            StepFinished: self._finished,
            StepProgress: self._progress,
            StepStarted: self._started,
            Decide: self._decide,
            RunStarted: self._run_started,
            RunFinished: self._run_finished,
            HookFired: lambda rec: self._emit(self._fmt.hook_fired(rec)),
            HookFinished: lambda rec: self._emit(self._fmt.hook_finished(rec), flush=rec.status == "failed"),
            HookDropped: lambda rec: self._emit(self._fmt.hook_dropped(rec)),
            WaitStarted: self._wait_started,
            WaitFinished: lambda rec: self._emit(self._fmt.wait_finished(rec), flush=True),
        }
        if not self._tty:
            _UNCLOSED.add(self)
            # started now rather than with the first line, so that its start costs the run nothing
            threading.Thread(target=self._watch, name="chainlang-progress-watch", daemon=True).start()

    def use_secrets(self, redactor: Redactor) -> None:
        """Mask the run's secrets in every line."""
        self._fmt.secrets = redactor

    def record(self, rec: Record) -> None:
        kind = type(rec)
        if type(rec) is StepFinished:
            if rec.status == "ok" and self._plain_ok:
                # the most frequent record: its members are kept, and its line made when the batch
                # is written (many lines formatted in a row cost the run a fraction of one at a time)
                if not self._dead:
                    step = rec.step
                    fields = (step, rec.event, rec.duration_ms)
                    with self._lock:
                        if self._shown:
                            self._shown.pop(step, None)
                        self._write_line(fields)
                return
        elif type(rec) is StepStarted and rec.attempt == 1:  # the first attempt shows nothing
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

    def _started(self, rec: StepStarted) -> None:
        attempt = rec.attempt
        if type(attempt) is int and attempt > 1:
            self._shown.pop(rec.step, None)
            self._emit(self._fmt.retry(rec, attempt))

    def _progress(self, rec: StepProgress) -> None:
        fraction = _fraction(rec.fraction)
        key = (rec.message, -1 if fraction is None else int(fraction * 10))
        step = rec.step
        if step is not None:
            if self._shown.get(step) == key:
                return
            if len(self._shown) >= self._MAX_TRACKED:
                self._shown.clear()
            self._shown[step] = key
        self._emit(self._fmt.progress(rec, fraction))

    def _decide(self, rec: Decide) -> None:
        self._emit(self._fmt.decide(rec))

    def _finished(self, rec: StepFinished) -> None:
        if self._shown:
            self._shown.pop(rec.step, None)
        status: str = rec.status  # shown as it is, or as `finished` when it is not a string
        if status == "ok" and not self._color:
            self._write_line(self._fmt.ok_text(rec))
            return
        status = status if type(status) is str else "finished"
        self._emit(self._fmt.finished(rec, status), flush=status == "failed")

    def _wait_started(self, rec: WaitStarted) -> None:
        for line in self._fmt.wait_started(rec):  # written at once: the run may wait for days
            self._emit(line, flush=True)

    def _run_started(self, rec: RunStarted) -> None:
        self._shown.clear()
        self._emit(self._fmt.run_started(rec), flush=True)

    def _run_finished(self, rec: RunFinished) -> None:
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

