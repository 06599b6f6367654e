"""One process at a time per transcript, and the sealed head of the transcript.

Beside `RUN.jsonl` lies `RUN.jsonl.head`, one fixed-width line:

    pid=0000004242 seq=00000000000000000042 mac=<32 hex> seal=<32 hex>

- While a process runs or resumes the transcript it holds an exclusive `flock` on this
  file (released by the kernel when the process ends, however it ends). A second
  process is refused at once (`RunInUse`) with the holder's pid.
- The writer overwrites it in place with the seq and MAC of the last line, sealed with
  the project key: before the first line (seq 0, the run's anchor as MAC: a process
  killed between writing that line and moving the head leaves a head that still
  vouches for the run), when the run starts, before the tool of a step that is not
  idempotent is called (its `step_started` is then the last line), and when it closes. The file is mapped into
  memory (`mmap`, shared), so that costs no system call; the kernel holds the page, so a
  killed process loses no update.
- Records removed from the end of a transcript leave the chain of MACs intact but no
  longer reach the head, so `resume` finds them. Lines after the head (a step's end, a
  clock reading, a decision) are covered by the chain of MACs only: removing them makes
  the run look as if it had crashed earlier. Resume handles that as a crash; since the
  head covers the start of every step that is not idempotent, what can run again is
  only what may run twice (idempotent steps, a decide model asked again).

The head file belongs to the transcript: copy or move them together.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path

from chainlang.errors import RunInUse  # a UsageError: every layer catches it by name

__all__ = ["Head", "RunInUse", "RunLock", "head_path", "run_anchor"]

_LINE = re.compile(rb"pid=(\d{10}) seq=(\d{20}) mac=([0-9a-f]{32}|-{32}) seal=([0-9a-f]{32})\n")


def head_path(transcript: Path) -> Path:
    return transcript.with_name(transcript.name + ".head")


@dataclass(frozen=True)
class Head:
    """The last line a writer recorded: its seq and MAC (`None` before the first line)."""

    seq: int
    mac: bytes | None
    seal: bytes

    def valid(self, key: bytes) -> bool:
        return hmac.compare_digest(self.seal, _seal(key, self.seq, self.mac))


_LINE_SIZE = 115
#: head moves written with pwrite(2) before the head file is mapped: setting a mapping up
#: and tearing it down costs about as much as 16 of them; past that, a move is a memory write
_PWRITES = 16
_PID = [os.getpid()]  # this process's (getpid is a system call, and a head moves at every step that may not repeat)


def _new_pid() -> None:  # a forked child is another process
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_pid)


def _line(seq: int, mac: bytes | None, seal: bytes) -> bytes:
    line = b"pid=%010d seq=%020d mac=%s seal=%s\n" % (_PID[0], seq, mac or b"-" * 32, seal)
    assert len(line) == _LINE_SIZE
    return line


def run_anchor(run_id: str) -> bytes:
    """What a head before the first line holds as its MAC: a digest of the run id, so that
    a sealed empty head belongs to one run (it cannot be moved beside another transcript)."""
    return hashlib.blake2b(b"run:" + run_id.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest().encode("ascii")


def _seal(key: bytes, seq: int, mac: bytes | None) -> bytes:
    message = b"head:%d:" % seq + (mac or b"")
    return hashlib.blake2b(message, key=key, digest_size=16).hexdigest().encode("ascii")


class RunLock:
    """The exclusive hold of one transcript, and its head file."""

    def __init__(self, transcript: Path, fd: int, head: Head | None, path: Path | None = None) -> None:
        self.transcript = transcript
        self.path = path if path is not None else head_path(transcript)
        self._fd: int | None = fd
        #: what the head file said when the lock was taken (None: there was none)
        self.found = head
        self._key: bytes | None = None
        self._map: mmap.mmap | None = None
        self._sized = False  # the file is known to be one head line long (acquire made it so)
        self._moves = 0  # head moves written so far with pwrite(2), before the file is mapped

    @classmethod
    def acquire(cls, transcript: Path, *, create: bool = True) -> "RunLock":
        """Take the transcript (creating its head file if needed and `create`). Raises
        RunInUse when a live process holds it, FileNotFoundError when the head file is
        missing and not to be created, OSError when it cannot be made."""
        import fcntl

        path = head_path(transcript)
        flags = os.O_RDWR | (os.O_CREAT if create else 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            if not create:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)  # only when missing: no mkdir per run
            fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            data = os.pread(fd, 200, 0)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                match = _LINE.fullmatch(data)
                raise RunInUse(transcript, int(match.group(1)) if match else None) from None
            raise
        data = os.pread(fd, 200, 0)
        match = _LINE.fullmatch(data)
        head = None
        if match:
            mac = None if match.group(3).startswith(b"-") else match.group(3)
            head = Head(int(match.group(2)), mac, match.group(4))
        lock = cls(transcript, fd, head, path)
        lock.damaged = head is None and bool(data)
        # the holder's pid at once (it is not sealed), so a second process can name it
        if head is not None:
            os.pwrite(fd, b"pid=%010d" % _PID[0], 0)
        else:
            if data:  # damaged (a new head file is empty: nothing to cut)
                os.ftruncate(fd, 0)
            os.pwrite(fd, _line(0, None, b"0" * 32), 0)
        # a valid head line is all of the (at most 200) bytes read, else the file was cut and
        # one line written: either way it is one line long, so `record` need not cut it again
        lock._sized = True
        return lock

    damaged = False  #: the head file had content that is not a head line

    def use_key(self, key: bytes) -> None:
        """The key later heads are sealed with."""
        self._key = key

    def record(self, seq: int, mac: bytes | None) -> None:
        """Write the head (seq and MAC of the last line written), in place."""
        key = self._key
        if self._fd is None or key is None:
            return
        line = _line(seq, mac, _seal(key, seq, mac))
        if self._map is None:
            if not self._sized:
                os.ftruncate(self._fd, _LINE_SIZE)  # a damaged head may have been longer
                self._sized = True
            self._moves += 1
            if self._moves <= _PWRITES:  # a short run: a system call a move costs less than a mapping
                os.pwrite(self._fd, line, 0)
                return
            self._map = mmap.mmap(self._fd, _LINE_SIZE)
        self._map[:] = line

    def sync(self) -> None:
        if self._map is not None:
            self._map.flush()
        if self._fd is not None:
            os.fsync(self._fd)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if self._map is not None:
            self._map.close()
            self._map = None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
