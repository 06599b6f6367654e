"""serve's connections, bounded: how many are open at once, and how long a client may take to
send a request's headers (LANGUAGE.md §12).

Without a bound, a client that opens connections and sends nothing keeps each one (and its
descriptor) for ever; at the process's descriptor limit serve can accept nothing more, and
asyncio logs an `OSError: [Errno 24]` traceback for every connection it fails to accept.

- `ConnectionLimit` is the protocol factory serve listens with: aiohttp's, with a count. At
  `max_connections` open connections, a new one takes the place of the oldest connection
  that has not sent its first request yet (that one is closed: a client that connects and
  sends nothing cannot keep others out, and one that sends its request at once gets in);
  when every open connection has sent a request, the new one is answered 503 and closed at
  once (its descriptor lives for microseconds). Both are counted in
  `chainlang_events_rejected_total{reason="too_many_connections"}` and said in the log at
  most once a minute. The default limit, 512 or half the descriptor limit if that is lower,
  leaves room for everything else serve opens (the store, transcripts, the tools'
  processes) and for a burst of accepts.
- The header deadline: a connection whose first request has not sent its request line and
  headers within `header_timeout` is closed here, whatever the version of aiohttp (only
  recent ones close a connection that never sent a request). On a kept connection, the next
  request's deadline is aiohttp's keep-alive timeout, set to the same value: it closes a
  connection whose next request's headers are not in by then, and never one whose request
  is being answered. The body deadline is the handler's (app.py).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, Callable

__all__ = ["ConnectionLimit", "default_max_connections", "descriptor_limit"]

log = logging.getLogger("chainlang.serve")

_LOG_EVERY = 60.0  # seconds between two lines about refused connections
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s")
_BUSY_BODY = (b'{"error": "serve has as many connections open as [serve] max_connections allows; '
              b'try again shortly"}')


def descriptor_limit() -> int | None:
    """The process's soft limit on open descriptors (None: unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def default_max_connections() -> int:
    limit = descriptor_limit()
    return 512 if limit is None else max(1, min(512, limit // 2))


class ConnectionLimit:
    """A protocol factory for `loop.create_server`: each connection gets `factory()`'s
    protocol, while fewer than `limit` are open; `refused(reason)` counts what is refused."""

    def __init__(self, limit: int, header_timeout: float, refused: Callable[[str], None]) -> None:
        self.limit = limit
        self.header_timeout = header_timeout
        self.refused = refused
        self.factory: Callable[[], asyncio.Protocol] | None = None  # aiohttp's, once its runner is set up
        self.open: dict[Any, _Connection] = {}  # aiohttp's protocol of each open connection -> ours
        self.waiting: dict[_Connection, None] = {}  # those without a first request yet, oldest first
        self._said_at = -_LOG_EVERY
        self._unsaid = 0

    def __call__(self) -> asyncio.Protocol:
        assert self.factory is not None
        if len(self.open) >= self.limit:
            self._over()
            if not self.waiting:
                return _Refused()
            next(iter(self.waiting)).close()  # its place is the new one's
        inner = self.factory()
        connection = _Connection(self, inner)
        self.open[inner] = connection
        self.waiting[connection] = None
        return connection

    def began(self, protocol: Any) -> None:
        """A request arrived on the connection of aiohttp's `protocol` (its headers are in)."""
        connection = self.open.get(protocol)
        if connection is not None and connection.deadline is not None:
            connection.deadline.cancel()
            connection.deadline = None
            self.waiting.pop(connection, None)

    def forget(self, connection: "_Connection") -> None:
        self.open.pop(connection.inner, None)
        self.waiting.pop(connection, None)

    def _over(self) -> None:
        self.refused("too_many_connections")
        self._unsaid += 1
        now = time.monotonic()
        if now - self._said_at >= _LOG_EVERY:
            log.warning("%d connection(s) over [serve] max_connections (%d): the oldest connections that sent no "
                        "request yet were closed to make room, or the new ones refused (a client holding connections "
                        "open?); said again at most once a minute", self._unsaid, self.limit)
            self._said_at, self._unsaid = now, 0


class _Connection(asyncio.Protocol):
    """aiohttp's protocol for one connection, counted, with the deadline of its first headers."""

    __slots__ = ("limit", "inner", "deadline", "data_received", "connected", "closed")

    def __init__(self, limit: ConnectionLimit, inner: Any) -> None:
        self.limit = limit
        self.inner = inner
        self.deadline: asyncio.TimerHandle | None = None
        self.data_received = inner.data_received  # type: ignore[method-assign]  # the hot path, without a hop
        self.connected = False  # aiohttp's protocol was told of its transport
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.closed:  # its place was taken before it was even connected
            transport.close()
            return
        self.deadline = asyncio.get_running_loop().call_later(self.limit.header_timeout, self._late)
        self.connected = True
        self.inner.connection_made(transport)

    def _late(self) -> None:
        self.deadline = None
        self.limit.refused("header_timeout")
        self.close()

    def close(self) -> None:
        """End the connection (it is no longer counted)."""
        self.limit.forget(self)
        self.closed = True
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        if self.connected:
            self.inner.force_close()  # aiohttp's own way to end a connection: its handler task ends quietly

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()  # type: ignore[no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.limit.forget(self)
        if self.connected:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class _Refused(asyncio.Protocol):
    """A connection over the limit: a 503, then closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_BUSY % (len(_BUSY_BODY), _BUSY_BODY))
        transport.close()

    def data_received(self, data: bytes) -> None:
        pass  # a request sent before it read the 503: ignored, the connection is closing
