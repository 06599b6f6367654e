"""The quiet view (`--progress quiet`): no progress lines, only the notes meant for the user
and what a run waits for (a run that stops for an event or an answer must say so)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from chainlang.journal.records import WaitStarted
from chainlang.output.progress.format import _MAX_NOTE, _Formatter

if TYPE_CHECKING:
    from chainlang.journal.records import Record
    from chainlang.redaction import Redactor


class QuietProgress:
    """Shows no progress; notes (notifications meant for the user) and what the run waits for
    still go to `stream`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._fmt = _Formatter(getattr(stream, "encoding", None))

    def use_secrets(self, redactor: Redactor) -> None:
        """Mask the run's secrets in every note."""
        self._fmt.secrets = redactor

    def record(self, rec: Record) -> None:
        if type(rec) is WaitStarted and self._stream is not None:
            for line in self._fmt.wait_started(rec):
                self.note("".join(part for part, _ in line))

    def note(self, text: str) -> None:
        if self._stream is not None:
            try:
                self._stream.write(self._fmt.clean(text, _MAX_NOTE) + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                self._stream = None

    def close(self) -> None:
        pass
