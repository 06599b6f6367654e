"""A transcript kept in memory: the Python API's `transcripts="memory"`, for tests and
ephemeral runs. The records are exactly those a file would hold — the same envelope,
masking and seals, made by the same writer — but they are never written: no file, no
head, no lock. Such a run cannot be resumed (nothing outlives the process) and cannot
wait detached."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable

from chainlang.journal.jsonl import TranscriptWriter
from chainlang.redaction import Redactor

__all__ = ["MemoryTranscript"]

_OPEN = -1  # stands for the file descriptor: the writer checks `_fd is None` for closed


class MemoryTranscript(TranscriptWriter):
    """TranscriptWriter's records, kept in `lines` (bytes, as they would be written)."""

    def __init__(self, run_id: str, secrets: Iterable[str] | Redactor = (), *, key: bytes = b"") -> None:
        from chainlang.journal.integrity import GENESIS

        if not isinstance(run_id, str) or not run_id:
            raise ValueError("run_id must be a non-empty string")
        # the writer's state without its file (TranscriptWriter.__init__ opens one)
        self.path = Path(f"<memory:{run_id}>")
        self.run_id = run_id
        self.durable = False
        self._key = key
        self._mac = GENESIS
        self._lock_file = None
        self._redactor = secrets if isinstance(secrets, Redactor) else Redactor(secrets)
        self._lock = threading.Lock()
        self._start_codec(run_id, key)
        self.resumed = False
        self.repaired_torn_tail = False
        self._seq, self._size = 0, 0
        self._fd = _OPEN
        self.lines: list[bytes] = []

    def _append(self, fd: int, data: bytes, seq: int, defer: bool = False) -> None:
        data, mac = self._sealer.seal(self._mac, data)
        self.lines.append(data)
        self._size += len(data)
        self._seq = seq
        self._mac = mac

    def close(self) -> None:
        with self._lock:
            self._fd = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records as a file would hold them (dicts, the seal included)."""
        return [json.loads(line) for line in self.lines]

    def __repr__(self) -> str:
        return f"MemoryTranscript(run_id={self.run_id!r}, {len(self.lines)} records)"
