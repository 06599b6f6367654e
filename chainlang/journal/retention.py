"""How long transcripts stay: `[runs] keep` (a count or an age), applied by `chainlang gc`,
by serve, and by the Python API's `open_project(keep=...)`.

Only the transcripts of runs that ENDED are removed — ok, broken, failed or limit, as
their last record (`run_finished`) says. A run that is still going (a live process holds
its lock), that waits (§15) or that was interrupted is kept whatever its age: it can
still be resumed, and removing it would lose that. A transcript goes first and its
`.head` file after it, so a kill between the two leaves only a `.head` without its
transcript, which the next collection removes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig

__all__ = ["DEFAULT_RUNS_DIR", "ENDED", "GcReport", "collect", "parse_keep", "runs_dir"]

DEFAULT_RUNS_DIR = Path(".chainlang") / "runs"
ENDED = frozenset({"ok", "broken", "failed", "limit"})  # what may be removed: never waiting nor interrupted
_TAIL = 1 << 16  # the last record of a transcript is read from its last 64 KiB


def runs_dir(config: "ProjectConfig | None", root: Path) -> Path:
    """Where the runs of the project at `root` write their transcripts (`[runs] dir`)."""
    if config is not None and config.runs is not None:
        return Path(config.root) / config.runs.dir
    return Path(root) / DEFAULT_RUNS_DIR


def parse_keep(value: int | str | None) -> int | float | None:
    """`keep`: a count of runs (int), an age in seconds (float), or None (keep all)."""
    from chainlang.durations import parse_duration

    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError("keep must be a count of runs (1 or more) or an age such as '30d'")
    if isinstance(value, int):
        if value < 1:
            raise UsageError(f"keep {value}: keep at least one run, or give an age such as '30d'")
        return value
    text = str(value).strip()
    if text.isdigit():
        return parse_keep(int(text))
    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise UsageError(f"keep {value!r}: neither a count of runs nor an age; give e.g. 500 or '30d'")
    return float(seconds)


@dataclass
class GcReport:
    """What a collection removed and what it kept, by reason (transcript paths)."""

    removed: list[str] = field(default_factory=list)
    kept: int = 0  # ended runs within the retention
    live: list[str] = field(default_factory=list)  # a process holds them
    unfinished: list[str] = field(default_factory=list)  # interrupted, waiting or going: resumable
    orphans: list[str] = field(default_factory=list)  # .head files whose transcript was gone

    def as_json(self) -> dict[str, Any]:
        return {"removed": self.removed, "kept": self.kept, "live": self.live, "unfinished": self.unfinished,
                "orphans": self.orphans}


def collect(directory: Path, keep: int | float, *, dry_run: bool = False, now: float | None = None) -> GcReport:
    """Remove the transcripts of ended runs in `directory` beyond `keep`: a count keeps the
    newest N ended runs; an age (seconds) keeps those that ended within it."""
    report = GcReport()
    if not directory.is_dir():
        return report
    now = time.time() if now is None else now
    ended: list[tuple[float, Path]] = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".jsonl.head") and not os.path.exists(entry.path[: -len(".head")]):
            report.orphans.append(entry.path)
            continue
        if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
            continue
        path = Path(entry.path)
        status = last_status(path)
        if status not in ENDED:
            report.unfinished.append(str(path))
            continue
        ended.append((entry.stat().st_mtime, path))
    ended.sort(key=lambda item: (item[0], item[1].name), reverse=True)  # newest first
    if isinstance(keep, int):
        stale = ended[keep:]
    else:
        stale = [item for item in ended if now - item[0] > keep]
    report.kept = len(ended) - len(stale)
    for _, path in stale:
        if _held(path):
            report.live.append(str(path))
            continue
        report.removed.append(str(path))
        if not dry_run:
            _remove(path)
    if not dry_run:
        for orphan in report.orphans:
            _unlink(Path(orphan))
    return report


def last_status(path: Path) -> str | None:
    """The status of the transcript's `run_finished` record when it is its last, else None
    (the run did not end: going, interrupted, cut)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL))
            tail = handle.read()
    except OSError:
        return None
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    try:
        record = json.loads(lines[-1])
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("type") != "run_finished":
        return None
    status = record.get("status")
    return status if isinstance(status, str) else None


def _held(path: Path) -> bool:
    """Whether a live process holds the transcript's lock (a resume of it going on); asked
    without writing anything to the head file (RunLock.acquire would write our pid)."""
    import errno
    import fcntl

    from chainlang.journal.lock import head_path

    try:
        fd = os.open(head_path(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    from chainlang.journal.lock import head_path

    _unlink(path)  # the transcript first: a .head alone is an orphan the next collection removes
    _unlink(head_path(path))


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
