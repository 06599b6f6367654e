"""The loop watchdog: tool code that keeps the event loop busy past its step's deadline is
interrupted there.

Code that runs on the loop thread (an async tool between two awaits; a quick sync tool
called inline, see chainlang.runtime.calls) cannot be stopped by an asyncio timeout: the
timeout's callback needs the loop, which that code holds. So while such code runs with a
deadline, the step *arms* the watchdog (one attribute write, no system call) and disarms
it after. A daemon thread looks every POLL seconds; when the loop is still inside the same
armed call past its deadline, it sends the loop thread SIGNAL, whose handler raises
`LoopBlocked` there: at the next bytecode of the tool, or out of the blocking system call it
waits in (`time.sleep`, a socket, a lock), which the signal interrupts.

It works where the loop runs in the main thread (Python runs signal handlers there) and
SIGNAL has no other handler; elsewhere `available()` is False, and the runtime keeps sync
tools in worker threads. Tool code stuck in C that never returns to Python (a long regex, a
C extension's loop) cannot be interrupted by anything short of ending the process.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

__all__ = ["POLL", "LoopBlocked", "arm", "available", "disarm"]

#: seconds between two looks of the watchdog thread (how late past a deadline it interrupts, at most)
POLL = 0.05
_SIGNAL: int | None = (signal.SIGRTMIN + 5) if hasattr(signal, "SIGRTMIN") else None  # a real-time signal: unused


class LoopBlocked(BaseException):
    """Raised in tool code that held the event loop past `deadline` (time.monotonic).
    A BaseException, so that a tool's `except Exception:` does not swallow it."""

    def __init__(self, deadline: float) -> None:
        super().__init__("the tool kept the event loop busy past its deadline and was interrupted")
        self.deadline = deadline


class _Watchdog:
    __slots__ = ("armed", "fired", "installed", "thread", "tokens", "lock")

    def __init__(self) -> None:
        self.armed: tuple[int, float] = (0, 0.0)  # (token of the call in progress, its deadline); 0: none
        self.fired = 0  # the token the watchdog signalled for
        self.installed: bool | None = None  # the signal handler: None until tried
        self.thread: threading.Thread | None = None
        self.tokens = 0
        self.lock = threading.Lock()

    def install(self) -> bool:
        """Install the signal handler (once; only from the main thread, where the loop must run)."""
        if self.installed is None:
            if _SIGNAL is None or threading.current_thread() is not threading.main_thread():
                return False  # not decided: the main thread may still try
            try:
                free = signal.getsignal(_SIGNAL) in (signal.SIG_DFL, None)
                if free:
                    signal.signal(_SIGNAL, self.on_signal)
            except (ValueError, OSError):  # pragma: no cover - a platform that refuses it
                free = False
            self.installed = free
        return bool(self.installed) and threading.current_thread() is threading.main_thread()

    def start(self) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self.watch, name="chainlang-loop-watchdog", daemon=True)
                self.thread.start()

    def watch(self) -> None:
        main = threading.main_thread().ident
        assert main is not None and _SIGNAL is not None
        while True:
            time.sleep(POLL)
            token, deadline = self.armed
            if token and token != self.fired and time.monotonic() >= deadline:
                self.fired = token
                try:
                    signal.pthread_kill(main, _SIGNAL)
                except (ProcessLookupError, OSError):  # pragma: no cover - the main thread is gone
                    return

    def on_signal(self, signum: int, frame: Any) -> None:
        token, deadline = self.armed
        if token and token == self.fired:  # still inside the call the watchdog fired for
            self.armed = (0, 0.0)
            raise LoopBlocked(deadline)


_DOG = _Watchdog()


def available() -> bool:
    """Whether tool code on this thread's loop can be interrupted at a deadline."""
    return _DOG.install()


def arm(deadline: float) -> int:
    """Watch the code that runs from now on, on the loop thread, until `disarm(token)`:
    past `deadline` (time.monotonic), it gets LoopBlocked. 0 when not available."""
    dog = _DOG
    if not dog.install():
        return 0
    if dog.thread is None:
        dog.start()
    dog.tokens += 1
    token = dog.tokens
    dog.armed = (token, deadline)
    return token


def disarm(token: int) -> None:
    if token and _DOG.armed[0] == token:
        _DOG.armed = (0, 0.0)


def _after_fork() -> None:  # the child has no watchdog thread
    _DOG.thread = None
    _DOG.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
