"""The model decider: asks an OpenAI-compatible chat endpoint (LANGUAGE.md §5)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from functools import lru_cache
from typing import Any

from chainlang.runtime.decide.decision import (
    DECISION_SCHEMA,
    DEFAULT_TIMEOUT,
    Action,
    DecideRequest,
    DeciderConfigError,
    Decision,
    Undecided,
    decision_problems,
    one_line,
    shorten,
)

__all__ = ["SYSTEM_PROMPT", "ModelDecider"]

SYSTEM_PROMPT = """\
You are the decide model of chainlang, a language whose chains run events one step at a time.
A step needs a decision before its event runs: its params failed validation against the
event's JSON Schema, or the step has a `decide` condition, or both.

Answer with exactly one JSON object, one of:
  {"action": "continue", "params": {...}}  run the event with these params: complete, valid
                                           against the schema; keep the given values unless
                                           they are wrong
  {"action": "skip"}                       do not run this step; the chain goes on
  {"action": "break"}                      stop the chain here, cleanly

With a condition: answer continue when it holds (with the params, completed if needed) and
skip when it does not. When the params cannot be completed from what you are given, answer
break rather than inventing values. Answer with the JSON object only."""

_MAX_ANSWER_BYTES = 4 * 1024 * 1024
_MAX_CONTEXT_CHARS = 24_000


class ModelDecider:
    """Asks an OpenAI-compatible chat endpoint: POST `{base_url}/chat/completions` with the
    decision's JSON Schema as the required `response_format`. The answer is validated
    against `DECISION_SCHEMA`; an HTTP error, a timeout, an answer that is not JSON or not
    a decision raise `Undecided` with a one-line reason.

    The API key is read from the environment variable named `api_key_env` at each request
    and sent as `Authorization: Bearer ...`; it never appears in a reason, an error or a
    decision. Without `api_key_env` no key is sent (local servers). Redirects are refused,
    so the key is never sent anywhere but `base_url`.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not re.match(r"^https?://[^/\s]+", base_url or ""):
            raise DeciderConfigError(f"the decide model's base_url must be an http:// or https:// URL, not {base_url!r}")
        if not model:
            raise DeciderConfigError("the decide model needs a model name ([decide] model = ...)")
        if not (isinstance(timeout, (int, float)) and 0 < timeout <= 3600):
            raise DeciderConfigError(f"the decide model's timeout must be more than 0 seconds, not {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        return f"ModelDecider(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, timeout={self.timeout!r})"

    def request_body(self, request: DecideRequest) -> dict[str, Any]:
        """The JSON posted to the endpoint (no key in it)."""
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": _user_message(request)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "decision", "schema": DECISION_SCHEMA, "strict": True},
            },
            "temperature": 0,
        }

    async def decide(self, request: DecideRequest) -> Decision:
        key = self._api_key()
        try:
            body = json.dumps(self.request_body(request), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise Undecided(f"the request cannot be sent as JSON: {exc}") from None
        try:
            try:
                content = await asyncio.wait_for(asyncio.to_thread(self._post, body, key), timeout=self.timeout)
            except (asyncio.TimeoutError, TimeoutError):
                raise Undecided(f"the decide model at {self.url} did not answer within {self.timeout:g}s") from None
            return self._decision(content)
        except Undecided as exc:
            raise Undecided(_redact(exc.reason, key)) from None

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise DeciderConfigError(
                f"the decide model's API key is read from the environment variable {self.api_key_env}, which is not set "
                f"(set it, or remove api_key_env from [decide] in chainlang.toml if the endpoint needs no key)"
            )
        return key

    def _post(self, body: bytes, key: str | None) -> str:
        """Runs in a worker thread: the HTTP exchange, down to the answer's content text."""
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "chainlang-decide"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        opener = urllib.request.build_opener(_no_redirect()())
        try:
            with opener.open(req, timeout=self.timeout) as response:
                raw = response.read(_MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = ""
            try:
                detail = exc.read(2000).decode("utf-8", "replace")
            except Exception:
                pass
            detail = f": {shorten(one_line(detail), 160)}" if detail.strip() else ""
            raise Undecided(f"the decide model at {self.url} answered HTTP {exc.code} {exc.reason}{detail}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise Undecided(f"the decide model at {self.url} did not answer within {self.timeout:g}s") from None
            raise Undecided(f"cannot reach the decide model at {self.url}: {exc.reason}") from None
        except TimeoutError:
            raise Undecided(f"the decide model at {self.url} did not answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise Undecided(f"cannot reach the decide model at {self.url}: {exc}") from None
        except Exception as exc:  # http.client's protocol errors and anything else on the wire
            raise Undecided(f"the exchange with the decide model at {self.url} failed: {type(exc).__name__}: {exc}") from None
        if len(raw) > _MAX_ANSWER_BYTES:
            raise Undecided(f"the decide model's answer is larger than {_MAX_ANSWER_BYTES // (1024 * 1024)} MB")
        return _content_of(raw)

    def _decision(self, content: str) -> Decision:
        text = _unfence(content)
        try:
            answer = json.loads(text)
        except ValueError:
            raise Undecided(f"the decide model's answer is not JSON: {shorten(one_line(content), 120)}") from None
        problems = decision_problems(answer)
        if problems:
            raise Undecided(f"the decide model's answer is not a decision (continue with params, skip or break): "
                            f"{shorten(one_line(json.dumps(answer, ensure_ascii=False)), 120)}")
        action: Action = answer["action"]
        return Decision(action, answer.get("params") if action == "continue" else None,
                        f"the decide model {self.model} answered {action}", "model")


def _content_of(raw: bytes) -> str:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Undecided(f"the decide model endpoint's answer is not JSON: {shorten(one_line(raw[:200].decode('utf-8', 'replace')), 120)}") from None
    try:
        message = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise Undecided("the decide model endpoint's answer has no choices[0].message (is base_url an OpenAI-compatible /v1 URL?)") from None
    if not isinstance(message, dict):
        raise Undecided("the decide model endpoint's answer has no choices[0].message")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            raise Undecided(f"the decide model refused: {shorten(one_line(refusal), 120)}")
        raise Undecided("the decide model's answer is empty (no choices[0].message.content)")
    return content


def _unfence(content: str) -> str:
    """The answer without one surrounding ``` fence (servers that ignore response_format)."""
    text = content.strip()
    match = re.fullmatch(r"```[A-Za-z]*\s*\n?(.*?)\n?```", text, re.DOTALL)
    return match.group(1).strip() if match else text


def _user_message(request: DecideRequest) -> str:
    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    context = dump(request.context)
    if len(context) > _MAX_CONTEXT_CHARS:
        context = context[:_MAX_CONTEXT_CHARS] + " …(truncated)"
    errors = "\n".join(f"- {error}" for error in request.errors) if request.errors else "(none: the params are valid)"
    lines = [
        f"Event: {request.event}",
        f"Description: {request.description or '(none)'}",
        f"Params schema: {dump(request.params_schema)}",
        f"Params: {dump(request.params)}",
        f"Validation errors:\n{errors}",
        f"Condition: {request.condition if request.condition is not None else '(none)'}",
        f"Context: {context}",
    ]
    return "\n".join(lines)


@lru_cache(maxsize=1)
def _no_redirect() -> Any:
    """A handler class that refuses redirects: the request carries the API key, which must
    go to base_url only (urllib would otherwise follow a 302 to any host, key included)."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
            return None

    return NoRedirect


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text
