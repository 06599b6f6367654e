"""The transcript side of a run on this machine: the one writer of its transcript, the
live view that shows its records, and where its notifications go, all masked by the
run's redaction service. Every engine writes through one (the embedded engine as the
run goes; Temporal's submitter as it reads the workflow's records)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.journal.lock import RunLock
    from chainlang.journal.records import Record
    from chainlang.output.progress import ProgressView
    from chainlang.redaction import Redactor

__all__ = ["Session", "log_notification", "log_note", "stderr_note"]

# A library writes nothing of its own: what a run tells goes to the caller's `notify`, or
# else to these loggers, which chainlang never configures. The NullHandler keeps Python's
# last-resort handler from printing WARNING records on stderr when the app set up no logging.
logging.getLogger("chainlang").addHandler(logging.NullHandler())
_run_log = logging.getLogger("chainlang.run")


class Session:
    """Open the transcript at `where` for `run_id` (new, or continued by a resume) under
    `lock`; show its records on `progress` and its notifications there (or on `notify`,
    or else the `chainlang.run` logger at INFO). Close it once the run ended."""

    def __init__(self, where: Path, run_id: str, redactor: "Redactor", key: bytes, lock: "RunLock | None",
                 progress: "ProgressView | None" = None, notify: Callable[[str], None] | None = None,
                 *, memory: bool = False) -> None:
        from chainlang.journal.jsonl import TranscriptWriter

        self.memory = memory  # the records kept in memory (the API's transcripts="memory"): no file, no resume
        try:
            # the writer masks every record it writes, the view what it shows (it gets the typed
            # records, unmasked), `tell` the notifications
            if memory:
                from chainlang.journal.in_memory import MemoryTranscript

                self.writer: TranscriptWriter = MemoryTranscript(run_id, redactor, key=key)
            else:
                self.writer = TranscriptWriter(where, run_id, redactor, key=key, lock=lock)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{where}: cannot write the transcript: {getattr(exc, 'strerror', None) or exc}") from None
        self.where = where
        self.redactor = redactor
        self.view = progress
        use_secrets = getattr(progress, "use_secrets", None)  # the views of chainlang.output.progress have it
        if use_secrets is not None:
            use_secrets(redactor)
        # notifications go through the progress view, so they appear in order with the steps
        self._shown = notify or (progress.note if progress is not None else log_notification)
        self.commit = self.writer.commit
        append = self.writer.append  # every value is JSON by construction (inputs and results are checked)
        if progress is None:
            self.record: Callable[["Record"], Any] = append
        else:
            show = progress.record

            def record(rec: "Record") -> Any:
                written = append(rec)
                show(rec)  # the typed record: the view masks what it shows with the run's redactor
                return written

            self.record = record
        self.show: Callable[["Record"], None] | None = progress.record if progress is not None else None

    def tell(self, text: str) -> None:
        self._shown(self.redactor.mask(text))

    def close(self) -> None:
        self.writer.close()
        if self.view is not None:
            self.view.close()


def log_notification(text: str) -> None:
    """A notification of a run (user.notify...) for a caller who gave no `notify`: an INFO
    record of the `chainlang.run` logger."""
    _run_log.info("%s", text)


def log_note(text: str) -> None:
    """A note about how a run was started or resumed (a changed --tools, a wake that failed)
    for a caller who gave no `notify`: a WARNING record of the `chainlang.run` logger."""
    _run_log.warning("%s", text)


def stderr_note(text: str) -> None:
    """A notification on stderr, on one line, control characters made visible (the CLI's)."""
    from chainlang.diagnostics import visible
    from chainlang.redaction import escape_surrogates

    print(escape_surrogates(visible(" ".join(text.splitlines()))), file=sys.stderr, flush=True)
