"""The transcript locks the scheduler holds and looks at (chainlang.journal.lock).

A new firing's transcript is locked before its run is recorded in the store and stays
locked until its end is: a run left open whose transcript nobody holds is then always one
that no process runs. `transcript_holder` only looks (another process's firing whose lease
ran out, paused or after a clock jump, is left to it while it holds its transcript).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chainlang.store.base import StoreError

__all__ = ["discard_lock", "lock_new", "transcript_holder"]


def transcript_holder(transcript: str | Path) -> int | None:
    """The pid of the live process that holds a transcript's lock (0 when it cannot be read),
    None when nobody holds it. Only looks: the head file is opened read-only and left as it is."""
    import fcntl
    import re

    from chainlang.journal.lock import head_path

    try:
        fd = os.open(head_path(Path(transcript)), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # no head file: the run never began here, nobody holds it
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            found = re.match(rb"pid=(\d{10}) ", os.pread(fd, 32, 0))
            return int(found.group(1)) if found else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def lock_new(where: Path) -> Any:
    """The lock of a new firing's transcript, taken before its run is recorded."""
    from chainlang.journal.lock import RunLock

    try:
        return RunLock.acquire(where, create=True)
    except OSError as exc:  # the runs directory cannot be written: not fired, said as a store problem is
        raise StoreError(f"cannot lock the transcript {where}: {exc.strerror or exc}; check that the project's "
                         ".chainlang/runs is a writable directory") from None


def discard_lock(lock: Any, where: Path) -> None:
    """Give up a lock taken for a transcript that will not be written (and its head file)."""
    from chainlang.runtime.emit import release_unused

    release_unused(lock, where)
