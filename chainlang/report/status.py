"""What serve's `GET /runs/ID` answers: a run's state, read from its transcript.

The transcript is untrusted (anyone who can write the runs directory can craft one): every
record is checked by the reader (chainlang.journal.reader) before anything here uses it,
and a transcript it refuses is answered as `unreadable`, with the line and what is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["RUN_ID", "run_info"]

#: what a run id may be (it names a file of the runs directory)
RUN_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,99}")


def run_info(runs_dir: Path, run_id: str) -> dict[str, Any] | None:
    """The run `run_id` of `runs_dir` as `GET /runs/ID` shows it; None when there is no
    such run. A transcript that cannot be read gives `status: unreadable` and `error`
    (serve answers it with 422)."""
    from chainlang.journal.reader import TranscriptError, read_transcript

    if not RUN_ID.fullmatch(run_id):
        return None
    where = runs_dir / f"{run_id}.jsonl"
    if not where.is_file():
        return None
    try:
        transcript = read_transcript(where)
    except TranscriptError as exc:
        return {"run_id": run_id, "status": "unreadable", "error": _utf8(str(exc))}
    except OSError as exc:  # removed or made unreadable since it was listed
        return {"run_id": run_id, "status": "unreadable", "error": f"{where}: cannot read: {exc.strerror or exc}"}
    started, finished = transcript.started, transcript.finished
    emitted = started.emit or {}
    body: dict[str, Any] = {"run_id": run_id, "transcript": str(where),
                            "status": finished.status if finished else "running",
                            "started_at": started.started_at, "event": emitted.get("event"),
                            "chain": started.chain, "records": len(transcript.records)}
    if emitted.get("task"):
        body["task_id"] = emitted["task"]
    if finished:
        body["duration_ms"] = finished.duration_ms
        body["error"] = finished.error
        body["fired"] = finished.outputs.get("fired")
    return dict(_utf8(body))


def _utf8(value: Any) -> Any:
    """`value` with every lone surrogate of its strings written as its escape (a transcript
    may hold one, escaped as \\uXXXX; the answer is UTF-8)."""
    from chainlang.redaction import escape_surrogates

    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value
