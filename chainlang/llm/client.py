"""One pooled HTTP client for an OpenAI-compatible model endpoint.

`ModelClient` owns an `httpx.AsyncClient` and everything about the exchange: the base
URL, the API key header, the timeouts, the limit on an answer's size, and the retries.
A run makes one (the decide model's) and closes it at its end with `aclose()`; the
model-backed events to come can ask through the same one.

- **Pooled**: connections are kept alive and reused between requests (HTTP/1.1).
- **Timeouts honoured**: `Timeouts.total` bounds the whole exchange, retries included,
  whatever the server does (httpx's read timeout is per read, so a server that trickles
  bytes would otherwise hold a request forever); `connect` bounds opening a connection,
  `read` the longest silence.
- **Bounded answers**: the body is streamed and reading stops past `max_answer_bytes`
  (1 MiB by default), with an error that says so.
- **Retries**, bounded: only a failed connection (refused, reset, closed while idle in the
  pool) and the statuses that mean "try again" (408, 429, 5xx), at most `retries` more
  tries after `backoff`, `2 × backoff` (or the server's `Retry-After`), never past the
  total deadline. Other statuses, bad answers and timeouts are not retried.
- **The key stays put**: it is read from the environment variable `api_key_env` at each
  request and sent as `Authorization: Bearer ...` to `base_url` only (redirects are not
  followed); error messages never contain it, even when the server echoes it back.

httpx is imported when the first request is made, not with this module. An
`httpx.AsyncClient` belongs to the event loop it was made in: a request from another
loop (another `asyncio.run`) gets a fresh pool.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "Completion",
    "ModelAnswerCut",
    "ModelAnswerTooLarge",
    "ModelBadAnswer",
    "ModelClient",
    "ModelConfigError",
    "ModelError",
    "ModelHTTPError",
    "ModelTimeout",
    "ModelUnreachable",
    "HttpPool",
    "Timeouts",
]

DEFAULT_MAX_ANSWER_BYTES = 1024 * 1024  # a chat answer is a few kB; 1 MiB is generous
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF = 0.5  # seconds before the first retry; doubled for the next
MAX_TIMEOUT = 3600.0
_MAX_RETRIES = 5
_MAX_WAIT = 8.0  # the longest pause before a retry (a longer Retry-After: no retry)
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_ERROR_BODY_BYTES = 2000  # read of an error answer, for its message
_SHOWN = 160  # characters of a server's text shown in a message
_MAX_CONNECTIONS = 16  # a run's parallel steps asking at once; more wait for a free one
_KEEP_ALIVE = 30.0  # seconds an idle connection stays in the pool


# -- errors ---------------------------------------------------------------------------------


class ModelError(Exception):
    """The exchange with the model failed. `message` is one line without the API key;
    `url` is the URL that was asked (empty before a request)."""

    def __init__(self, message: str, url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        self.schema_notes: tuple[str, ...] = ()  # what was simplified in the schema sent (tiers.OpenAIProvider)

    def __str__(self) -> str:
        return self.message

    def _redact(self, key: str | None) -> None:
        if key and key in self.message:
            self.message = self.message.replace(key, "***")
            self.args = (self.message,)


class ModelConfigError(ModelError):
    """The client cannot be used as configured: a bad base_url or timeout, or the API key
    variable is not set. Not a failure of the model: callers should not fall back."""


class ModelUnreachable(ModelError):
    """No connection to the endpoint, or it broke before an answer came."""


class ModelTimeout(ModelError):
    """No (complete) answer within the timeouts."""


class ModelHTTPError(ModelError):
    """The endpoint answered with a status that is not 2xx (`status`); redirects included."""

    def __init__(self, message: str, url: str = "", status: int = 0) -> None:
        super().__init__(message, url)
        self.status = status


class ModelAnswerTooLarge(ModelError):
    """The answer is larger than the client's `max_answer_bytes`; it was not read further."""


class ModelBadAnswer(ModelError):
    """The endpoint answered, but not with what the protocol says (not JSON, no message...)."""


class ModelAnswerCut(ModelBadAnswer):
    """The answer stopped at a length limit (`finish_reason: length`): `chat` only, whose
    callers need a whole answer (`complete` returns the cut answer with its reason)."""


@dataclass(frozen=True)
class Completion:
    """An answer of /chat/completions: the text, the tokens the endpoint says it took
    (`prompt_tokens`, `completion_tokens`; empty when it does not say) and why it stopped
    (`finish_reason`: "stop", "length" when a length limit cut it...; None when not said)."""

    content: str
    usage: dict[str, int]
    finish_reason: str | None = None


class _Retry(Exception):
    """An attempt failed in a way worth another try (internal)."""

    def __init__(self, error: ModelError, wait: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait = wait  # the server's Retry-After, seconds


# -- the client ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `total` bounds a whole request (connecting, sending, waiting, reading, the
    retries); `connect` one connection's opening; `read` the longest silence between two
    reads (None: the total, since a model may think for most of it before it answers)."""

    total: float = 60.0
    connect: float = DEFAULT_CONNECT_TIMEOUT
    read: float | None = None

    def __post_init__(self) -> None:
        for name in ("total", "connect", "read"):
            value = getattr(self, name)
            if value is None and name == "read":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT:
                raise ModelConfigError(f"a {name} timeout is more than 0 and at most {MAX_TIMEOUT:g} seconds, not {value!r}")

    def for_httpx(self) -> httpx.Timeout:
        import httpx

        return httpx.Timeout(connect=min(self.connect, self.total), read=min(self.read or self.total, self.total),
                             write=self.total, pool=self.total)


class ModelClient:
    """Requests to one OpenAI-compatible endpoint through a pool of kept-alive connections.

    `label` names the endpoint in messages ("the decide model at http://... did not
    answer within 60s"). See the module's documentation for the rules it keeps.
    """

    def __init__(self, base_url: str, api_key_env: str | None = None, *, timeouts: Timeouts | None = None,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES, retries: int = DEFAULT_RETRIES,
                 backoff: float = DEFAULT_BACKOFF, label: str = "the model", pool: HttpPool | None = None) -> None:
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            raise ModelConfigError(f"{label}'s base_url must be an http:// or https:// URL, not {base_url!r}")
        if not (isinstance(max_answer_bytes, int) and max_answer_bytes > 0):
            raise ModelConfigError(f"the largest answer is a number of bytes, not {max_answer_bytes!r}")
        if not (isinstance(retries, int) and 0 <= retries <= _MAX_RETRIES):
            raise ModelConfigError(f"retries is 0 to {_MAX_RETRIES}, not {retries!r}")
        if not (isinstance(backoff, (int, float)) and 0 <= backoff <= _MAX_WAIT):
            raise ModelConfigError(f"the backoff is 0 to {_MAX_WAIT:g} seconds, not {backoff!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.max_answer_bytes = max_answer_bytes
        self.retries = retries
        self.backoff = float(backoff)
        self.label = label
        self._pool = pool if pool is not None else HttpPool()
        self._owns_pool = pool is None

    def __repr__(self) -> str:
        return (f"ModelClient(base_url={self.base_url!r}, api_key_env={self.api_key_env!r}, "
                f"timeouts={self.timeouts!r}, retries={self.retries!r})")

    def url(self, path: str) -> str:
        """The URL of `path` under the base URL."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def api_key(self) -> str | None:
        """The key, read now from `api_key_env` (None without one). ModelConfigError if
        the variable is not set."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ModelConfigError(f"{self.label}'s API key is read from the environment variable "
                                   f"{self.api_key_env}, which is not set")
        return key

    def redact(self, text: str) -> str:
        """`text` without the API key (`***` in its place)."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return text.replace(key, "***") if key else text

    # -- requests

    async def chat(self, body: dict[str, Any]) -> str:
        """POST `body` to `{base_url}/chat/completions`; the answer's `choices[0].message.content`.
        Raises a `ModelError` (ModelBadAnswer for a refusal or an empty answer, ModelAnswerCut
        for an answer cut at a length limit)."""
        done = await self.complete(body)
        if done.finish_reason == "length":
            limit = f"max_tokens = {body['max_tokens']} or " if isinstance(body.get("max_tokens"), int) else ""
            raise ModelAnswerCut(f"{self.label}'s answer was cut by {limit}the endpoint's length limit "
                                 "(finish_reason: length)", self.url("chat/completions"))
        return done.content

    async def complete(self, body: dict[str, Any]) -> Completion:
        """`chat`, with the tokens the endpoint says the exchange took and why the answer
        ended. An answer cut at a length limit is returned as it is, even empty: whether a
        cut answer is usable is the caller's to say."""
        payload = await self.post_json("chat/completions", body)
        url = self.url("chat/completions")
        try:
            choice = payload["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelBadAnswer(f"{self.label} endpoint's answer has no choices[0].message (is base_url an "
                                 "OpenAI-compatible /v1 URL?)", url) from None
        if not isinstance(message, dict):
            raise ModelBadAnswer(f"{self.label} endpoint's answer has no choices[0].message", url)
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        # a short name of the protocol's ("stop", "length", "content_filter"...), else not said
        finish_reason = reason if isinstance(reason, str) and re.fullmatch(r"[A-Za-z_]{1,40}", reason) else None
        content = message.get("content")
        if finish_reason == "length" and (content is None or isinstance(content, str)):
            content = content or ""  # cut before it wrote anything: the cut is what the caller reports
        elif not isinstance(content, str) or not content.strip():
            refusal = message.get("refusal")
            if isinstance(refusal, str) and refusal.strip():
                raise ModelBadAnswer(self.redact(f"{self.label} refused: {_short(refusal, 120)}"), url)
            raise ModelBadAnswer(f"{self.label}'s answer is empty (no choices[0].message.content)", url)
        usage: dict[str, int] = {}
        reported = payload.get("usage") if isinstance(payload, dict) else None
        if isinstance(reported, dict):
            for name in ("prompt_tokens", "completion_tokens"):
                value = reported.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40:
                    usage[name] = value
        return Completion(content, usage, finish_reason)

    async def post_json(self, path: str, body: Any) -> Any:
        """POST `body` as JSON to `path` under the base URL and return the JSON answer.
        Raises a `ModelError` whose message never contains the API key."""
        key = self.api_key()
        url = self.url(path)
        try:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:  # UnicodeEncodeError (a lone surrogate) is a ValueError
            raise ModelError(f"the request to {self.label} cannot be sent as JSON: {exc}", url) from None
        # identity: no compressed body to inflate far past the bound on an answer (which counts inflated bytes)
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Accept-Encoding": "identity", "User-Agent": "chainlang"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            try:
                async with asyncio.timeout(self.timeouts.total):
                    raw = await self._send(url, data, headers)
            except TimeoutError:
                raise ModelTimeout(self._late(url), url) from None
            try:
                return json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                shown = _short(raw[:200].decode("utf-8", "replace"), 120)
                raise ModelBadAnswer(f"{self.label} endpoint's answer is not JSON: {shown}", url) from None
        except ModelError as exc:
            exc._redact(key)
            raise

    async def _send(self, url: str, data: bytes, headers: dict[str, str]) -> bytes:
        client = self._client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeouts.total
        tries = 0
        while True:
            tries += 1
            try:
                return await self._attempt(client, url, data, headers)
            except _Retry as retry:
                wait = retry.wait
                if wait is None:
                    wait = min(self.backoff * 2 ** (tries - 1), _MAX_WAIT) * random.uniform(0.75, 1)
                if tries > self.retries or wait > _MAX_WAIT or loop.time() + wait >= deadline:
                    error = retry.error
                    if tries > 1:
                        error.message += f" ({tries} tries)"
                        error.args = (error.message,)
                    raise error from None
                await asyncio.sleep(wait)

    async def _attempt(self, client: httpx.AsyncClient, url: str, data: bytes, headers: dict[str, str]) -> bytes:
        import httpx

        try:
            async with client.stream("POST", url, content=data, headers=headers,
                                     timeout=self.timeouts.for_httpx()) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    detail = (await self._read(response, _ERROR_BODY_BYTES, cut=True)).decode("utf-8", "replace")
                    detail = f": {_short(detail, _SHOWN)}" if detail.strip() else ""
                    error = ModelHTTPError(f"{self.label} at {url} answered HTTP {status} {response.reason_phrase}"
                                           f"{detail}", url, status)
                    if status in _RETRY_STATUS:
                        raise _Retry(error, _retry_after(response.headers.get("retry-after")))
                    raise error
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_answer_bytes:
                    self._too_large(url)
                return await self._read(response, self.max_answer_bytes)
        except httpx.ConnectTimeout:
            raise ModelUnreachable(f"cannot reach {self.label} at {url}: no connection within "
                                   f"{min(self.timeouts.connect, self.timeouts.total):g}s", url) from None
        except httpx.ReadTimeout:
            read = self.timeouts.read
            if read is not None and read < self.timeouts.total:
                raise ModelTimeout(f"{self.label} at {url} sent nothing for {read:g}s", url) from None
            raise ModelTimeout(self._late(url), url) from None
        except httpx.TimeoutException:  # writing, or waiting for a connection of the pool
            raise ModelTimeout(self._late(url), url) from None
        except httpx.ConnectError as exc:
            raise _Retry(ModelUnreachable(f"cannot reach {self.label} at {url}: {_short(str(exc) or type(exc).__name__, _SHOWN)}",
                                          url)) from None
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:  # reset, or closed while idle in the pool
            raise _Retry(ModelUnreachable(f"the connection to {self.label} at {url} broke: "
                                          f"{_short(str(exc) or type(exc).__name__, _SHOWN)}", url)) from None
        except httpx.HTTPError as exc:  # anything else on the wire
            raise ModelUnreachable(f"the exchange with {self.label} at {url} failed: {type(exc).__name__}: "
                                   f"{_short(str(exc), _SHOWN)}", url) from None

    async def _read(self, response: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
        """The body, up to `limit` bytes: past it, cut there (`cut`) or ModelAnswerTooLarge."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            if size + len(chunk) > limit:
                if cut:
                    chunks.append(chunk[: limit - size])
                    break
                self._too_large(str(response.request.url))
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    def _too_large(self, url: str) -> NoReturn:
        raise ModelAnswerTooLarge(f"{self.label}'s answer is larger than {_size(self.max_answer_bytes)}; "
                                  "it was not read further", url)

    def _late(self, url: str) -> str:
        return f"{self.label} at {url} did not answer within {self.timeouts.total:g}s"

    # -- the pool

    def _client(self) -> httpx.AsyncClient:
        return self._pool.client()

    async def aclose(self) -> None:
        """Close the pooled connections, if the pool is the client's own (a shared pool is
        closed by its owner). The client stays usable: a later request opens new ones."""
        if self._owns_pool:
            await self._pool.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class HttpPool:
    """Kept-alive connections shared by the clients of a run (one per tier, all endpoints):
    one `httpx.AsyncClient`, made on first use. It belongs to the event loop it was made in:
    a request from another loop (another `asyncio.run`) gets a fresh one."""

    def __init__(self) -> None:
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            import httpx

            # trust_env: HTTP(S)_PROXY and NO_PROXY apply; timeouts are given per request (each client its own)
            limits = httpx.Limits(max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_CONNECTIONS,
                                  keepalive_expiry=_KEEP_ALIVE)
            self._http = httpx.AsyncClient(limits=limits, follow_redirects=False, trust_env=True)
            self._loop = loop
        return self._http

    async def aclose(self) -> None:
        client, loop = self._http, self._loop
        self._http = self._loop = None
        if client is not None and loop is asyncio.get_running_loop():
            await client.aclose()


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header given in seconds (dates are not worth the parsing)."""
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(n: int) -> str:
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
