"""Reading LSP frames from stdin without trusting the sender's framing.

pygls reads `Content-Length: N` headers with a pattern that a header in another
case, a negative or non-numeric length or a missing length never matches: from
there on every later frame is read as header text and the server never answers
again. And it reads the body with `read(N)` whatever N is, so a length of 10**12
ends the process with a MemoryError.

`CheckedFrames` sits between stdin and pygls' own message loop (`run_async`): it
reads frames itself, hands pygls only well-formed ones in the exact form pygls
expects, and for anything else writes one error line to stderr and finds the
next frame. Finding it means scanning, in bounded chunks, for the next
`Content-Length:` header: the body of a frame whose length is unusable is
skipped that way (a JSON body holds no raw line break before such a header,
so a header quoted inside a string does not parse as one). A body longer than
`MAX_MESSAGE_BYTES` is skipped the same way, read and dropped chunk by chunk.
The server therefore keeps answering whatever a client sends; only the end
of stdin ends it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import BinaryIO

__all__ = ["MAX_HEADER_BYTES", "MAX_MESSAGE_BYTES", "CheckedFrames", "FrameReader"]

#: The longest message body accepted. The checker refuses files over 4 MiB; a
#: document's text, JSON-escaped, is at most six times that, so no message the
#: server can use is longer.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: The longest header block (all header lines of one frame).
MAX_HEADER_BYTES = 8 * 1024

_CHUNK = 64 * 1024
_MARKER = b"content-length:"
_DIGITS = re.compile(rb"[0-9]{1,20}")


def _stderr(message: str) -> None:
    print(f"chainlang lsp: error: {message}", file=sys.stderr, flush=True)


class FrameReader:
    """Frames from a binary stream; `next_body()` is the next well-formed body or None at the end."""

    def __init__(self, stream: BinaryIO, report: Callable[[str], None] = _stderr,
                 max_body: int = MAX_MESSAGE_BYTES) -> None:
        self._read = getattr(stream, "read1", stream.read)
        self._buffer = bytearray()
        self._eof = False
        self._report = report
        self._max_body = max_body

    def _fill(self) -> bool:
        """Read more into the buffer; False at the end of the stream."""
        if self._eof:
            return False
        chunk = self._read(_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def next_body(self) -> bytes | None:
        while True:
            headers = self._headers()
            if headers is None:
                return None
            problem, length = _length_of(headers)
            if problem is None and length is not None and length > self._max_body:
                problem = (f"a message of {length} bytes is over the limit of {self._max_body} bytes: "
                           "skipped (the request gets no answer)")
            if problem is not None or length is None:
                self._report(f"{problem}; looking for the next message")
                if not self._skip_to_next_header():
                    return None
                continue
            body = self._exactly(length)
            if body is None:
                self._report(f"the input ended inside a message ({len(self._buffer)} of {length} bytes)")
                return None
            return body

    def _headers(self) -> list[bytes] | None:
        """The header lines of the next frame (blank lines before it skipped), None at the end.
        A header block over MAX_HEADER_BYTES is returned as far as read, so that it is reported."""
        lines: list[bytes] = []
        size = 0
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    del self._buffer[:1]  # the skip that follows must not find this line's own header again
                    return [b"\x00too-long"]
                if not self._fill():
                    if lines or self._buffer.strip():
                        self._report("the input ended inside a message header")
                    return None
                continue
            line = bytes(self._buffer[: end + 1])
            del self._buffer[: end + 1]
            stripped = line.rstrip(b"\r\n")
            if not stripped:
                if lines:
                    return lines
                continue  # blank lines between frames: tolerated
            size += len(line)
            if size > MAX_HEADER_BYTES:
                return [b"\x00too-long"]
            lines.append(stripped)

    def _exactly(self, length: int) -> bytes | None:
        while len(self._buffer) < length:
            if not self._fill():
                return None
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    def _skip_to_next_header(self) -> bool:
        """Drop input up to the next `Content-Length:` at the start of a line (or anywhere:
        a body without a trailing line break runs into the next header). False at the end."""
        keep = len(_MARKER) - 1  # a marker split between two chunks is still found
        while True:
            at = self._buffer.lower().find(_MARKER)
            if at >= 0:
                del self._buffer[:at]
                return True
            if len(self._buffer) > keep:
                del self._buffer[: len(self._buffer) - keep]
            if not self._fill():
                return False


def _length_of(headers: list[bytes]) -> tuple[str | None, int | None]:
    """(what is wrong with the header block, or None; the Content-Length)."""
    if headers == [b"\x00too-long"]:
        return f"a message header over {MAX_HEADER_BYTES} bytes", None
    length: int | None = None
    for line in headers:
        name, colon, value = line.partition(b":")
        if not colon:
            return f"not a message header: {_shown(line)}", None
        if name.strip().lower() != b"content-length":
            continue  # Content-Type, or a header of a newer protocol: ignored
        value = value.strip()
        if not _DIGITS.fullmatch(value):
            return f"Content-Length is not a whole number of bytes: {_shown(value)}", None
        length = int(value)
    if length is None:
        return "a message without a Content-Length header", None
    if length == 0:
        return "a message with Content-Length 0 (an empty body is not a JSON-RPC message)", None
    return None, length


def _shown(raw: bytes) -> str:
    text = raw[:80].decode("ascii", "backslashreplace")
    return repr(text + ("…" if len(raw) > 80 else ""))


class CheckedFrames:
    """The async reader pygls' `run_async` expects (`readline`, `readexactly`), fed with
    well-formed frames only: each one as `Content-Length: N\\r\\n`, `\\r\\n`, then its body."""

    def __init__(self, stream: BinaryIO, executor: Executor | None = None) -> None:
        self._frames = FrameReader(stream)
        self._executor = executor
        self._lines: list[bytes] = []
        self._body = b""

    def _next(self) -> bytes:
        body = self._frames.next_body()
        if body is None:
            return b""  # the end: pygls' loop stops
        self._body = body
        self._lines = [b"\r\n"]
        return b"Content-Length: %d\r\n" % len(body)

    def readline(self) -> Awaitable[bytes]:
        loop = asyncio.get_running_loop()
        if self._lines:
            done = loop.create_future()
            done.set_result(self._lines.pop(0))
            return done
        return loop.run_in_executor(self._executor, self._next)

    def readexactly(self, n: int) -> Awaitable[bytes]:
        body, self._body = self._body, b""
        assert len(body) == n, "pygls asked for another length than the frame's"
        done = asyncio.get_running_loop().create_future()
        done.set_result(body)
        return done
