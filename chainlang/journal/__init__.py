"""The run journal: every record of a run, typed, sealed and appended before it is acted on.

- `records`: one type per record (§9) and their one codec;
- `jsonl`: the JSONL transcript file, the first `Journal` (writer), and `reader`;
- `integrity`: every line sealed with a MAC chained from the line before it, keyed with
  the project's key, so an edited, removed or reordered record is found;
- `lock`: one process at a time per transcript, and its sealed head (records removed
  from the end are found too);
- `values`: plain JSON values as a run records them; idempotency keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chainlang.journal.records import Record


class Journal(Protocol):
    """Where a run's records go, each before the run acts on it. The JSONL transcript
    (`jsonl.TranscriptWriter`) is the first; the store (§12) and a second engine (§14)
    bring others."""

    def append(self, record: "Record") -> Any: ...

    def close(self) -> None: ...


__all__ = ["Journal"]
