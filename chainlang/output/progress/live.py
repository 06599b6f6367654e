"""The rich progress view (the default on a terminal): the plain view's lines scrolling above
a live table of the running steps, redrawn by a background thread. rich is imported only
when a `RichProgress` is made (and by type checkers), never by importing this module."""

from __future__ import annotations

import sys
import threading
import time
from itertools import islice
from typing import TYPE_CHECKING, TextIO

from chainlang.journal.records import (Decide, HookDropped, HookFinished, HookFired, RunFinished, RunStarted,
                                       StepFinished, StepProgress, StepStarted, WaitFinished, WaitStarted)
from chainlang.output.progress.format import (
    _MAX_NAME,
    _MAX_NOTE,
    _RICH_STYLES,
    _STEP_STATUSES,
    _UNICODE_SYMBOLS,
    Line,
    _elapsed,
    _Formatter,
    _fraction,
)

if TYPE_CHECKING:
    from rich.console import Console, OverflowMethod, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    from chainlang.journal.records import Record
    from chainlang.redaction import Redactor

# the record types this view shows something of
_SHOWN = frozenset({StepProgress, StepStarted, StepFinished, Decide, RunStarted, RunFinished, HookFired, HookFinished,
                    HookDropped, WaitStarted, WaitFinished})


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

    def record(self, rec: Record) -> None:
        kind = type(rec)
        if kind not in _SHOWN:  # clock, hook_fired, anything else: nothing to show
            return
        fmt = self._fmt
        with self._lock:
            if self._closed:
                return
            if type(rec) is StepProgress:
                step = rec.step
                if type(step) is str:
                    row = self._running.get(step)
                    if row is None:
                        row = self._start_row(step, rec.event, 1)
                    row.message = fmt.clean(rec.message)
                    row.fraction = _fraction(rec.fraction)
            elif type(rec) is StepStarted:
                step = rec.step
                attempt = rec.attempt if type(rec.attempt) is int else 1
                if type(step) is str:  # a new attempt keeps the step's place, oldest first
                    self._start_row(step, rec.event, attempt)
                if attempt > 1 and self._room("retry"):
                    self._pending.append(("retry", fmt.retry(rec, attempt)))
            elif type(rec) is StepFinished:
                step = rec.step
                if type(step) is str:
                    self._running.pop(step, None)
                status = rec.status if type(rec.status) is str else "finished"
                counted = status if status in _STEP_STATUSES else "other"
                self._counts[counted] = self._counts.get(counted, 0) + 1
                if self._room(counted):
                    self._pending.append((status, fmt.finished(rec, status)))
            elif type(rec) is Decide:
                if self._room("decide"):
                    self._pending.append(("decide", fmt.decide(rec)))
            elif type(rec) is HookFired:
                if self._room("hook"):
                    self._pending.append(("hook", fmt.hook_fired(rec)))
            elif type(rec) is HookFinished:
                failed = rec.status == "failed"
                if self._room("failed" if failed else "hook"):
                    self._pending.append(("failed" if failed else "hook", fmt.hook_finished(rec)))
            elif type(rec) is HookDropped:
                if self._room("hook"):
                    self._pending.append(("hook", fmt.hook_dropped(rec)))
            elif type(rec) is WaitStarted:
                lines = fmt.wait_started(rec)
                self._pending.extend(("wait", line) for line in lines)  # never left out: the run waits on it
                if type(rec.step) is str:  # a row of the table while it waits, with its elapsed time
                    row = self._start_row(rec.step, f"waits for {rec.event}", 1)
                    row.message = fmt.clean(f"until {rec.deadline}" if rec.deadline else "no timeout")
            elif type(rec) is WaitFinished:
                if type(rec.step) is str:
                    self._running.pop(rec.step, None)
                if self._room("wait"):
                    self._pending.append(("wait", fmt.wait_finished(rec)))
            elif type(rec) is RunStarted:
                self._counts.clear()
                self._running.clear()
                self._run_start = time.monotonic()
                chain = rec.chain or rec.file
                self._title = fmt.clean(chain, _MAX_NAME) if chain else ""
                self._pending.append(("run", fmt.run_started(rec)))
            elif type(rec) is RunFinished:
                self._running.clear()
                self._pending.append(("run", fmt.run_finished(rec)))
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

    def _start_row(self, step: str, event: object, attempt: int) -> _Running:
        if len(self._running) >= self._MAX_RUNNING and step not in self._running:
            self._running.pop(next(iter(self._running)))
        fmt = self._fmt
        row = _Running(fmt.clean(step, _MAX_NAME), fmt.clean(event, _MAX_NAME), attempt, time.monotonic())
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
        # a note or a wait wraps; step lines are cut
        lines = [(kind in ("note", "wait"), line) for kind, line in pending]
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

