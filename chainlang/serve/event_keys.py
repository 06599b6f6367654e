"""Per-event keys of `chainlang serve` (LANGUAGE.md §12): `[serve.events.NAME] token_env =
"VAR"` gives the endpoint `POST /events/NAME` (a webhook) a bearer token of its own.

- A request to a keyed endpoint must carry that endpoint's token: without an
  `Authorization` header it is refused 401, with another token (the serve-wide one
  included) 403. A key given to a webhook's sender opens that endpoint and nothing else;
  the serve-wide token opens everything else, and not the keyed endpoints (whoever may
  send every event does not thereby hold each sender's key).
- Every other route is guarded as before: by the serve-wide token when there is one.
  serve still listens beyond loopback only with a serve-wide token: per-event keys guard
  their endpoints, not the pages, runs and metrics.
- Tokens are compared in constant time (hmac.compare_digest), checked before the body is
  read, never logged, and masked like API keys in what the project stores.
"""

from __future__ import annotations

import hmac
import os
from typing import TYPE_CHECKING, Any

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.runtime.emit import Project

__all__ = ["check_keyed_events", "event_tokens", "key_refusal"]


def event_tokens(serve: Any, token: str | None) -> dict[str, str]:
    """Event name -> its endpoint's token, read from the environment; UsageError when a
    variable is not set, holds a control character, or repeats the serve-wide token."""
    out: dict[str, str] = {}
    for name, table in (serve.events if serve is not None else {}).items():
        value = (os.environ.get(table.token_env) or "").strip()
        where = f"[serve.events.\"{name}\"] token_env"
        if not value:
            raise UsageError(f"{where} names {table.token_env}, but that variable is not set (or empty); set it to the "
                             f"bearer token the senders of {name} must send")
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise UsageError(f"{where}: the token in {table.token_env} has a control character; clients send it in an "
                             "HTTP header, so it must be printable")
        if token is not None and hmac.compare_digest(value.encode(), token.encode()):
            raise UsageError(f"{where}: {table.token_env} holds the serve-wide token ([serve] token_env); an endpoint's "
                             "own key must be another one, or it gives its senders every route")
        out[name] = value
    return out


def check_keyed_events(project: "Project", tokens: dict[str, str]) -> None:
    """UsageError for a keyed name that is not an external event of the project: a typo
    would leave the real endpoint without its key."""
    for name in tokens:
        spec = project.registry.get(name)
        if spec is None or spec.kind != "external":
            guess = project.registry.suggest(name)
            what = "not an event of this project" if spec is None else f"a {spec.kind}, not an external event"
            raise UsageError(f"[serve.events.\"{name}\"]: {name} is {what}, so no request can reach it; "
                             + (f"did you mean {guess}?" if guess else "declare it under events:"))


def key_refusal(name: str, tokens: dict[str, str], authorization: str) -> tuple[int, str] | None:
    """Why a request to `POST /events/NAME` is refused by the endpoint's own key (None:
    the endpoint has none, or the request carries it): (status, message)."""
    token = tokens.get(name)
    if token is None:
        return None
    if not authorization:
        return 401, (f"the endpoint of {name} has a key of its own: send Authorization: Bearer KEY (the value of "
                     f"the variable [serve.events.\"{name}\"] token_env names)")
    expected = f"Bearer {token}".encode("utf-8")
    if hmac.compare_digest(authorization.encode("utf-8", "surrogateescape"), expected):
        return None
    return 403, f"this is not the key of the endpoint of {name} (each keyed event has its own; the serve token does not open it)"
