"""Running one chaintest test in a process of its own, with a deadline.

A test's steps run chains, emits and commands in-process; one that never ends (a tool that
hangs, a model that never answers) would hang pytest. So each test runs in a child forked
from the pytest process (it has everything imported already), in a process group of its
own: past the test's `timeout` the whole group is killed (with whatever it started) and the
test fails, naming the step it was at. The child tells the parent which step it is at and,
at the end, how the test went, through a pipe.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chainlang.testing.runner import CaseFailed, run_case
from chainlang.testing.spec import TestCase, TestFile

__all__ = ["run_isolated"]

_STEP, _END = b"S", b"E"  # the two messages: a step begins (its index); the outcome (pickled)


def run_isolated(test_file: TestFile, case: TestCase, update: bool = False) -> None:
    """Run the test in a child process; raises CaseFailed as `run_case` does, and when the
    test does not end within `case.timeout` seconds (the child is then killed)."""
    workdir = Path(tempfile.mkdtemp(prefix="chaintest-"))
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        _child(test_file, case, update, workdir, write_end)
    os.close(write_end)
    try:
        os.setpgid(pid, pid)  # here too: the group exists before the parent may have to kill it
    except OSError:
        pass  # the child made it already (or has ended)
    outcome: tuple[str, Any] | None = None
    at: int | None = None
    try:
        outcome, at = _wait(read_end, case.timeout)
    finally:
        os.close(read_end)
        if outcome is None or outcome[0] != "passed":
            _kill(pid)  # past its deadline, or interrupted (^C): the child and what it started
        _reap(pid)
        _kill(pid)  # what the test started and left running
    if outcome is None:
        step = case.steps[at] if at is not None else case.steps[0]
        raise CaseFailed(step, [f"the test did not end within {case.timeout:g} s (timeout: in the test file; the "
                                f"default is 60 s): it was at this step, and its process was killed"], workdir)
    kind, detail = outcome
    if kind == "failed":
        index, problems, kept = detail
        raise CaseFailed(case.steps[index], problems, Path(kept) if kept else None)
    if kind == "error":
        raise CaseFailed(case.steps[at or 0], [detail], workdir)


def _child(test_file: TestFile, case: TestCase, update: bool, workdir: Path, out: int) -> None:
    code = 0
    try:
        os.setpgid(0, 0)  # a group of its own: killed whole, with what its steps started
        try:
            run_case(test_file, case, update, workdir=workdir,
                     on_step=lambda index: _send(out, _STEP, str(index).encode()))
            outcome: tuple[str, Any] = ("passed", None)
        except CaseFailed as failed:
            index = next((i for i, s in enumerate(case.steps) if s is failed.step), 0)
            outcome = ("failed", (index, [str(p) for p in failed.problems], str(failed.kept or "")))
        except BaseException as exc:  # noqa: BLE001 - whatever it was, the parent says it
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        _send(out, _END, pickle.dumps(outcome))
    except BaseException:  # noqa: BLE001 - the parent sees no outcome and says so
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)  # not pytest's exit: its atexit and finalizers belong to the parent


def _send(out: int, kind: bytes, payload: bytes) -> None:
    data = kind + len(payload).to_bytes(8, "big") + payload
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def _wait(pipe: int, timeout: float) -> tuple[tuple[str, Any] | None, int | None]:
    """(the outcome, or None past the deadline; the index of the step the child was at)."""
    deadline = time.monotonic() + timeout
    buffer = b""
    at: int | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, at
            if not selector.select(left):
                continue
            chunk = os.read(pipe, 65536)
            if not chunk:  # the child ended without an outcome (killed, or it could not say)
                return ("error", "the test's process ended without an outcome (it was killed, or crashed)"), at
            buffer += chunk
            while len(buffer) >= 9:
                size = int.from_bytes(buffer[1:9], "big")
                if len(buffer) < 9 + size:
                    break
                kind, payload, buffer = buffer[:1], buffer[9:9 + size], buffer[9 + size:]
                if kind == _STEP:
                    at = int(payload)
                else:
                    return pickle.loads(payload), at  # noqa: S301 - our own child's, through our own pipe


def _kill(group: int) -> None:
    """SIGKILL to the child's process group (nothing when it has no process left)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
