"""One session per MCP server per event loop, shared by every step that calls its tools.

Starting a stdio server costs a process start and an `initialize` handshake (1-2 s for a
Python server), so a run does it once: the first call on a loop starts the server, later
calls (concurrent ones too: the SDK's ClientSession matches answers to requests by id)
reuse its session. Each session lives on a thread and event loop of its own, so the
run's loop ending (which cancels whatever tasks are left, within a short grace) never
cuts the transport's clean-up short: the session is closed when the loop that started it
is gone (the end of `chainlang run`; each serve worker has its own loop, so its own
sessions) or, at the latest, when the process exits (a stdio server's stdin closes).

A server that stopped (its connection is closed) fails the call that finds it so, and is
started again by the next call. A call is never sent twice: the step's `retry` decides.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["SessionPool", "connection_lost"]

# opens an initialized session (chainlang.registry.mcp._session bound to one server)
Opener = Callable[[], AbstractAsyncContextManager["ClientSession"]]


class LiveSession:
    """One started server: its session, on the loop of the thread that holds it open."""

    def __init__(self, open_session: Opener, name: str) -> None:
        self._open = open_session
        self.ready: concurrent.futures.Future[ClientSession] = concurrent.futures.Future()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._abandoned = False  # closed (set at once; the session's loop learns it a moment later)
        self.thread = threading.Thread(target=self._hold, name=f"mcp-session-{name}", daemon=True)
        self.thread.start()

    def _hold(self) -> None:
        async def own() -> None:
            self.loop, self._closing = asyncio.get_running_loop(), asyncio.Event()
            try:
                async with self._open() as session:
                    self.ready.set_result(session)
                    if not self._abandoned:
                        await self._closing.wait()
            except BaseException as exc:  # noqa: BLE001 (a start failure goes to the caller; a later
                if not self.ready.done():  # one is a stopped server, found by the next call)
                    self.ready.set_exception(exc)

        asyncio.run(own())

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self._abandoned

    async def call(self, job: Callable[[ClientSession], Coroutine[Any, Any, Any]]) -> Any:
        """`await job(session)` on the session's own loop."""
        session = self.ready.result()
        assert self.loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(session), self.loop))

    def close(self) -> None:
        """Leave the transport (a stdio server's stdin closes and it exits); no wait."""
        self._abandoned = True
        loop, closing = self.loop, self._closing
        if loop is not None and closing is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(closing.set)
            except RuntimeError:  # the loop closed meanwhile: the session is gone already
                pass


class SessionPool:
    """The sessions of the servers started for each event loop, by server key."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
            weakref.WeakKeyDictionary())
        self._guard = threading.Lock()

    def _state(self, key: str) -> tuple[dict[str, LiveSession], asyncio.Lock]:
        loop = asyncio.get_running_loop()
        with self._guard:
            state = self._loops.get(loop)
            if state is None:
                state = self._loops[loop] = {"live": {}, "locks": {}}
                live: dict[str, LiveSession] = state["live"]
                # the loop is gone (the run ended): close what it started
                weakref.finalize(loop, _close_all, live)
            lock = state["locks"].setdefault(key, asyncio.Lock())
        return state["live"], lock

    async def session(self, key: str, name: str, open_session: Opener, timeout: float,
                      started: Callable[[float, bool], None]) -> LiveSession:
        """The live session of server `key` for this loop, started (within `timeout` seconds)
        if there is none: then `started(seconds, again)` is called, `again` when an earlier
        one had stopped."""
        live, lock = self._state(key)
        current = live.get(key)
        if current is not None and current.alive:
            return current
        async with lock:  # one start, however many steps ask at once
            current = live.get(key)
            if current is not None and current.alive:
                return current
            again = current is not None
            began = time.perf_counter()
            fresh = LiveSession(open_session, name)
            try:
                await asyncio.wait_for(asyncio.wrap_future(fresh.ready), timeout)
            except BaseException:
                fresh.close()
                raise
            live[key] = fresh
            started(time.perf_counter() - began, again)
            return fresh


def _close_all(live: dict[str, LiveSession]) -> None:
    for session in list(live.values()):
        session.close()


def connection_lost(error: BaseException) -> bool:
    """True when `error` from a call says the server's connection is gone (not a tool error)."""
    import anyio
    from mcp.shared.exceptions import MCPError

    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                          BrokenPipeError, ConnectionError)):
        return True
    return isinstance(error, MCPError) and "connection closed" in str(error).lower()
