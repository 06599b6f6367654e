"""What serve refuses before a request reaches its handler (LANGUAGE.md §12, "serve is safe on
a laptop"): a browser on the same machine is an attacker's relay.

- **Host.** A page of another site can make the browser talk to 127.0.0.1 under a name of its
  own (DNS rebinding: `evil.example` first resolves to the attacker's server, then to
  127.0.0.1); the browser then treats serve's answers as that site's and lets its script
  read them. The name stays in the `Host` header, so serve answers only a `Host` that is
  the address the connection reached (`localhost` too, when that is a loopback address) or
  a name of `[serve] hosts`: 421 otherwise. A request without `Host` is not a browser's.
- **Origin.** A page may send a POST to any address without being allowed to read the answer
  (`fetch(..., {mode: "no-cors"})`, a form): the hook would still run. Browsers name the
  page's origin in `Origin` (on every POST); serve refuses one that is not its own (403).
  No `Origin` at all is a program, not a page (curl, `chainlang emit --to`, a webhook).
- **Content-Type.** Only `application/json`, in UTF-8: a page can send `text/plain` or a form
  without asking first, but not `application/json` to another origin (that needs a CORS
  preflight, which serve never grants). 415 otherwise, and a body in UTF-16 or UTF-32 is
  refused even when the header says JSON (Python's JSON reader would take it).
"""

from __future__ import annotations

import codecs
import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

__all__ = ["Hosts", "Refusal", "body_text", "content_type_refusal", "host_name", "origin_refusal"]

_DEFAULT_PORT = {"http": 80, "https": 443}
_UTF16_32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


@dataclass(frozen=True)
class Refusal:
    """A request serve refuses: the HTTP status, the metric's reason and the error shown."""
    status: int
    reason: str  # the label of chainlang_events_rejected_total
    error: str


def host_name(value: str) -> tuple[str, int | None] | None:
    """The host of a `Host` header (lower case, without brackets or a final dot) and its port
    (None without one); None when it is not a host[:port] at all."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 address
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        port = rest[1:] if rest else ""
    else:
        host, colon, port = value.rpartition(":")
        if not colon:
            host, port = value, ""
        elif not port.isdigit() or ":" in host:
            return None
    host = host[:-1] if host.endswith(".") else host
    if not host or not port.isascii() or (port and int(port) > 65535):
        return None
    return host, int(port) if port else None


def _normal(name: str) -> str:
    """A host name as `host_name` gives it; an address in its one written form."""
    name = name.lower().strip("[]")
    name = name[:-1] if name.endswith(".") else name
    address = _address(name)
    return str(address) if address is not None else name


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address


class Hosts:
    """The names a request's `Host` may give: the address serve listens on (for a wildcard
    bind, the address the connection reached), `localhost` and the loopback addresses when
    that address is loopback, and the names of `[serve] hosts`."""

    def __init__(self, bound: str, extra: Iterable[str] = ()) -> None:
        self.bound = bound
        self.extra = tuple(dict.fromkeys(_normal(name) for name in extra))
        address = _address(bound.strip("[]"))
        self.wildcard = address is not None and address.is_unspecified
        names = set(self.extra)
        if bound == "localhost" or (address is not None and address.is_loopback):
            names |= {"localhost", "127.0.0.1", "::1"}
        if not self.wildcard:
            names.add(_normal(bound))
        self.names = frozenset(names)
        self._answered: set[str] = set()  # Host headers seen and answered by name (most requests repeat one)

    def allows(self, host: str, local_address: str | None) -> bool:
        """Whether `host` (from `host_name`) may be answered on a connection that reached
        `local_address` (the socket's own address: what a wildcard bind, or a name, bound)."""
        if host in self.names:
            return True
        reached = _address(local_address) if local_address is not None else None
        if reached is None:
            return False
        if host == "localhost":
            return reached.is_loopback
        given = _address(host)
        return given is not None and (given == reached or (given.is_loopback and reached.is_loopback))

    def shown(self) -> str:
        if self.wildcard:
            base = ["the address the request reached (e.g. 192.0.2.7)", "localhost (on loopback)"]
        else:
            base = sorted(n if ":" not in n else f"[{n}]" for n in self.names - set(self.extra))
        return ", ".join(base + [n if ":" not in n else f"[{n}]" for n in self.extra])

    def refusal(self, header: str | None, transport: Any) -> Refusal | None:
        """None when a request with this `Host` header, on the connection of `transport`, is answered."""
        if header is None or header in self._answered:
            return None  # no Host: HTTP/1.0 and raw programs (a browser always sends one)
        parsed = host_name(header)
        if parsed is not None:
            if parsed[0] in self.names:
                if len(self._answered) < 64:
                    self._answered.add(header)
                return None
            local = transport.get_extra_info("sockname") if transport is not None else None
            if self.allows(parsed[0], local[0] if local else None):
                return None
        shown = "".join(ch if ch.isprintable() else "?" for ch in header[:100])
        return Refusal(421, "wrong_host", (
            f"this serve does not answer to the name {shown!r} (Host header): it answers to {self.shown()}. "
            "A page of another site can reach this machine under a name of its own, so serve answers no other; "
            "if you reach it through a reverse proxy or by another name, list that name in [serve] hosts in "
            "chainlang.toml (and let the proxy pass the Host header on)"))


def origin_refusal(method: str, headers: Mapping[str, str], hosts: Hosts) -> Refusal | None:
    """None unless a browser sends this request from a page of another origin. Only requests
    that change something are checked (a page of another origin cannot read what a GET
    answers; the Host check keeps DNS rebinding out)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return None
    origin = headers.get("Origin")
    if origin is None:
        # no Origin: not a page, unless an old browser; those that say where the request comes from
        if headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none"):
            return None
        given = "a page of another site (Sec-Fetch-Site)"
    else:
        if _same_origin(origin, headers.get("Host"), hosts):
            return None
        given = "".join(ch if ch.isprintable() else "?" for ch in origin[:100])
        given = f"a page of {given!r} (Origin)" if origin != "null" else "a page without an origin (Origin: null)"
    return Refusal(403, "cross_origin", (
        f"this {method} comes from {given}: serve takes events only from programs (no Origin header) and from its "
        "own pages, so that a web page you open cannot run your hooks; send the event with curl, "
        "chainlang emit --to, or a webhook"))


def _same_origin(origin: str, host_header: str | None, hosts: Hosts) -> bool:
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme not in _DEFAULT_PORT or not parts.hostname or parts.path or parts.query:
        return False
    name = parts.hostname.rstrip(".")
    if name in hosts.extra:
        return True  # a name the operator listed: its pages (behind a proxy, on the proxy's port)
    host = host_name(host_header) if host_header is not None else None
    if host is None or host[0] != name:
        return False
    default = _DEFAULT_PORT[parts.scheme]
    return (port or default) == (host[1] or default)


def content_type_refusal(header: str | None) -> Refusal | None:
    """None for `application/json` with no charset or charset=utf-8."""
    hint = "send the event's payload as JSON in UTF-8 with Content-Type: application/json"
    if header is None:
        return Refusal(415, "unsupported_media_type", f"the request has no Content-Type; {hint}")
    kind, *params = header.split(";")
    if kind.strip().lower() != "application/json":
        shown = "".join(ch if ch.isprintable() else "?" for ch in header[:100])
        return Refusal(415, "unsupported_media_type", f"the body is {shown!r}, not application/json; {hint}")
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            shown = "".join(ch if ch.isprintable() else "?" for ch in value.strip()[:40])
            return Refusal(415, "unsupported_media_type", f"the body is in charset {shown}, not UTF-8; {hint}")
    return None


def body_text(raw: bytes) -> str | Refusal:
    """The body as text: UTF-8 (a UTF-8 byte-order mark is ignored, as JSON allows); or why not."""
    hint = "send the payload encoded as UTF-8"
    if raw.startswith(_UTF16_32_BOMS) or b"\x00" in raw:  # JSON text never has a NUL byte; UTF-16/32 text does
        return Refusal(415, "unsupported_media_type", "the body is not JSON in UTF-8: it looks like UTF-16 or UTF-32 "
                                                      f"(a byte-order mark, or NUL bytes); {hint}")
    if raw[:3] == codecs.BOM_UTF8:
        raw = raw[3:]
    try:
        return raw.decode()  # UTF-8, strict (the C codec: "utf-8-sig" is several times slower)
    except UnicodeDecodeError as exc:
        return Refusal(400, "malformed", f"the body is not JSON in UTF-8: byte {exc.start} (0x{raw[exc.start]:02x}) "
                                         f"is not UTF-8; {hint}")
