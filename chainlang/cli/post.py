"""`chainlang emit NAME --data JSON --to URL`: post an external event to a running
`chainlang serve` (httpx), and report it as a local emit would (same lines, same exit codes).

The bearer token, when the serve needs one, is read from the variable that `[serve]
token_env` of the project's chainlang.toml names, else from CHAINLANG_TOKEN.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from chainlang.errors import UsageError
from chainlang.status import is_outcome

TIMEOUT = 600.0  # seconds to wait for the hooks' actions (with wait); the connection itself: 10 s


def _token() -> str | None:
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        config = find_project_config(Path.cwd())
    except RegistryError:
        config = None
    name = config.serve.token_env if config is not None and config.serve is not None else None
    return (os.environ.get(name or "CHAINLANG_TOKEN") or "").strip() or None  # as serve reads it


def post_command(to: str, name: str, data_text: str, key: str | None, as_json: bool, wait: bool,
                 color: bool | None) -> int:
    import httpx

    from chainlang.cli.run import _no_constant, _out, report_emit
    from chainlang.runtime.emit import EmitResult

    try:
        parts = urlsplit(to)
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
    except ValueError as exc:
        raise UsageError(f"--to {to}: not a URL ({exc}); give the serve's base URL, e.g. http://127.0.0.1:8765") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"--to {to}: give the serve's base URL, e.g. http://127.0.0.1:8765")
    try:
        from chainlang.serve.app import _finite

        data = json.loads(data_text, parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        raise UsageError(f"--data: not JSON ({exc}); give the payload as a JSON object") from None
    if key is not None:  # refused here as a local emit refuses it (a newline could not even be sent)
        from chainlang.store import StoreError
        from chainlang.store.base import check_key

        try:
            check_key(key)
        except StoreError as exc:
            raise UsageError(f"--id {key}: {exc}") from None
    # header values as UTF-8 bytes (httpx would encode text as ASCII): serve reads them as UTF-8,
    # so a key such as "clé" is the same key a local emit --id claims
    headers: dict[bytes, bytes] = {b"Content-Type": b"application/json"}
    if key is not None:
        headers[b"Idempotency-Key"] = key.encode("utf-8", "surrogateescape")
    token = _token()
    if token:
        headers[b"Authorization"] = f"Bearer {token}".encode("utf-8", "surrogateescape")
    url = to.rstrip("/") + "/events/" + quote(name, safe="") + ("?wait=1" if wait else "")
    try:
        reply = httpx.post(url, content=json.dumps(data).encode("utf-8"), headers=headers,
                           timeout=httpx.Timeout(TIMEOUT, connect=10.0))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise UsageError(f"cannot reach serve at {to}: {exc or type(exc).__name__}; is chainlang serve "
                         "running there?") from None
    except (httpx.TimeoutException, httpx.TransportError) as exc:  # connected, then no answer
        again = "send it again with the same --id to learn how it ended" if key is not None else \
            "an --id lets you send it again safely"
        late = isinstance(exc, httpx.TimeoutException)
        raise UsageError(f"serve at {to} " + (f"did not answer within {TIMEOUT:g} s" if late else
                                              f"closed the connection without an answer ({exc or type(exc).__name__})")
                         + f"; the event may have been taken: {again}") from None
    except httpx.HTTPError as exc:  # the URL or the request could not be sent at all
        raise UsageError(f"cannot send the event to {to}: {exc or type(exc).__name__}") from None
    try:
        body: dict[str, Any] = reply.json()
        if not isinstance(body, dict):
            raise ValueError("not an object")
    except ValueError:
        raise UsageError(f"{to} answered {reply.status_code} with a body that is not chainlang serve's JSON") from None
    if reply.status_code == 202:
        if as_json:
            _out(lambda a: json.dumps(body, ensure_ascii=a) + "\n")
        else:
            went = [str(d.get("run_id")) for d in body.get("delivered") or [] if isinstance(d, dict)]
            also = f"; delivered to the waiting run(s) {', '.join(went)}" if went else ""
            _out(lambda _a: f"emit {name}: recorded by serve as run {body.get('run_id')} ({body.get('run')}){also}\n")
        return 0
    if reply.status_code == 200:
        status = str(body.get("status"))
        if not is_outcome(status):
            raise UsageError(f"{to} answered with the status {status!r}, which this chainlang does not know: "
                             "is serve a newer version?")
        previous: dict[str, Any] = body["previous"] if isinstance(body.get("previous"), dict) else {}
        transcript = body.get("transcript") or (previous.get("transcript") if status == "duplicate" else None)
        result = EmitResult(body.get("run_id"), str(body.get("event", name)), status,
                            list(body.get("fired") or []), body.get("error"),
                            Path(transcript) if transcript else None,
                            float(body.get("duration_ms") or 0), list(body.get("errors") or []),
                            previous=body.get("previous"),
                            delivered=[d for d in body.get("delivered") or [] if isinstance(d, dict)])
        return report_emit(result, as_json, color)
    if reply.status_code == 422:
        result = EmitResult(None, name, "invalid", errors=[str(e) for e in body.get("errors") or []])
        return report_emit(result, as_json, color)
    message = str(body.get("error") or f"serve answered {reply.status_code}")
    if reply.status_code == 503:
        from chainlang.cli.run import _err

        if body.get("status") == "interrupted":  # taken, then cut by serve's stop: resumed by the next serve
            _err(f"emit {name} interrupted: {message}")
            return 1
        _err(f"emit {name}: serve at {to} cannot take it now: {message}")
        for line in body.get("diagnostics") or []:
            _err(f"  {line}")
        return 1
    raise UsageError(f"serve at {to} refused the event ({reply.status_code}): {message}")
