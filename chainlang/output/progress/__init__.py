"""The live progress display of `chainlang run`: one more consumer of the transcript records.

The interpreter hands every record it writes to the transcript to `view.record(rec)`, as
the typed record of chainlang.journal.records (`RunStarted`, `StepStarted`, `StepProgress`,
`Decide`, `StepFinished`, `RunFinished`, `Clock`, `HookFired`, `WaitStarted`, `WaitFinished`):
a view dispatches on its type and reads its attributes. It calls `view.close()` once at the end. `make_progress()`
picks the view:

- `quiet`: no progress; only notes and what a run waits for (`wait`, `user.ask`).
- `plain` (the default when the stream is not a terminal): one line per finished step, per
  retry, per progress message, per decide answer and for the run's start and finish::

      ▶ run greet (chains/greet.yaml)
      … 3 web.fetch 40% downloading
      ↻ 2 web.fetch retry 2/3
      ? 4 email.send decide: skip (condition `x` is false)
      ✓ 3.1 tools.now 0.4 ms
      ✗ 4 email.send failed: connection refused
      - 5 user.notify skipped
      ⧖ 6 waits for approval.given where draft_id == draft.id (draft.id = "d-1") until 2026-11-30T10:00:00.000Z
      ✓ 6 approval.given delivered by emit 20261128T100000Z-4bf6b2a45d
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
(`use_secrets()`, see chainlang.redaction), and every text of a line passes through
it before it is cut to length. The records a view gets are the interpreter's own, not the
masked copies the transcript writer writes, so this masking is what keeps secrets off the
screen (notes included). Without secrets it costs one attribute test per text.

A display must never break the run it shows: records of other types (or any other object)
are ignored, odd member values tolerated, and a stream that fails (closed pipe) silences the view instead of raising.
`record()` may be called from several threads; memory stays bounded however long the run.

The package, one job per module: `format` (the text of each line: symbols, durations,
`clean()`), `plain` (the plain view and its batched writes), `live` (the rich view),
`quiet` (the quiet view); this module has the protocol and `make_progress`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal, Protocol, TextIO

from chainlang.output.progress.format import MAX_TEXT, _isatty
from chainlang.output.progress.format import _Formatter as _Formatter  # importable from here too (tests use it)
from chainlang.output.progress.live import RichProgress
from chainlang.output.progress.plain import PlainProgress
from chainlang.output.progress.quiet import QuietProgress

if TYPE_CHECKING:
    from chainlang.journal.records import Record

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


class ProgressView(Protocol):
    """What the interpreter talks to: every journal record (a typed record of
    chainlang.journal.records), then `close()` once. `note(text)` shows a line meant for
    the user (a notification), in order with the steps.

    The views of this package also have `use_secrets(redactor)`, which the runner calls
    before the first record when a view has it. A view of one's own that shows the text of
    records should mask it with the run's redactor: the records it gets are not the masked
    copies the transcript writer writes (the notes are masked by the runner)."""

    def record(self, rec: Record) -> None: ...

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
