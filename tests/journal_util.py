"""Rewriting a transcript as a crash would have left it, for resume tests.

A real crash only ever loses the end of a transcript's last line; tests simulate a crash
"after record k" by keeping the first k records. Since transcripts are sealed (a MAC per
line and a sealed head, chainlang.journal), a test that cuts or edits one must seal it
again with the project's key, as only the writer could. That is what these helpers do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from chainlang.journal.integrity import GENESIS, load_key, seal
from chainlang.journal.lock import RunLock


def project_root_of(transcript: Path) -> Path:
    """The project whose key sealed `transcript`: the directory of the chain it names
    (tests keep chainlang.toml there when they have one)."""
    first = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    return Path(first["file"]).parent


def rewrite(transcript: Path, records: list[dict[str, Any]], root: Path | None = None) -> None:
    """Write `records` as the whole transcript, sealed with the project key, and move the
    head to its last record."""
    root = root or Path(records[0]["file"]).parent
    key = load_key(root, create=False)
    previous, out = GENESIS, []
    for rec in records:
        clean = {k: v for k, v in rec.items() if k != "mac"}
        line = json.dumps(clean, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        data, previous = seal(key, previous, line)
        out.append(data)
    transcript.write_bytes(b"".join(out))
    lock = RunLock.acquire(transcript)
    try:
        lock.use_key(key)
        lock.record(records[-1]["seq"], previous)
    finally:
        lock.release()


def read_records(transcript: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]


def cut_after(transcript: Path, predicate: Callable[[dict[str, Any]], bool]) -> None:
    """Keep the transcript up to and including the first record matching `predicate`."""
    records = read_records(transcript)
    for i, rec in enumerate(records):
        if predicate(rec):
            rewrite(transcript, records[: i + 1], project_root_of(transcript))
            return
    raise AssertionError("no such record")
