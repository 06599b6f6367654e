"""The head file stays one sealed line whatever it held before the lock was taken: the lock
cuts it once, when it takes it (and only then: a new head file has nothing to cut), so that
moving the head later needs no system call (chainlang.journal.lock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chainlang.journal.lock import Head, RunLock, head_path

KEY = b"k" * 32
LINE = 115  # the fixed width of a head line


@pytest.mark.parametrize("before", [None, b"", b"garbage\n", b"x" * 300,
                                    b"pid=0000000001 seq=00000000000000000003 mac=" + b"a" * 32 + b" seal=" + b"b" * 32
                                    + b"\n" + b"y" * 150])
def test_the_head_file_is_one_sealed_line_after_a_record(tmp_path: Path, before: bytes | None) -> None:
    transcript = tmp_path / "runs" / "t.jsonl"  # runs/ does not exist yet: the lock makes it
    if before is not None:
        transcript.parent.mkdir()
        head_path(transcript).write_bytes(before)
    with RunLock.acquire(transcript) as lock:
        assert lock.found is None  # nothing valid before: a head line longer than one line is not one
        assert lock.damaged == bool(before)
        assert os.path.getsize(head_path(transcript)) == LINE
        lock.use_key(KEY)
        lock.record(5, b"c" * 32)
        data = head_path(transcript).read_bytes()
    assert len(data) == LINE and data.startswith(b"pid=%010d seq=%020d mac=%s " % (os.getpid(), 5, b"c" * 32))
    with RunLock.acquire(transcript, create=False) as again:
        assert isinstance(again.found, Head) and again.found.seq == 5 and again.found.valid(KEY)


def test_a_missing_head_file_is_not_made_without_create(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        RunLock.acquire(tmp_path / "nowhere" / "t.jsonl", create=False)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("moves", [1, 16, 17, 40])
def test_the_head_is_where_the_last_move_put_it_before_and_after_the_file_is_mapped(
        tmp_path: Path, moves: int) -> None:
    # the first moves are written with pwrite(2), the later ones through a mapping of the file
    transcript = tmp_path / "t.jsonl"
    with RunLock.acquire(transcript) as lock:
        lock.use_key(KEY)
        for seq in range(1, moves + 1):
            lock.record(seq, b"%032x" % seq)
            found = head_path(transcript).read_bytes()
            assert found.startswith(b"pid=%010d seq=%020d mac=%032x " % (os.getpid(), seq, seq)), (seq, found)
    assert os.path.getsize(head_path(transcript)) == LINE
    with RunLock.acquire(transcript, create=False) as again:
        assert isinstance(again.found, Head) and again.found.seq == moves and again.found.valid(KEY)
