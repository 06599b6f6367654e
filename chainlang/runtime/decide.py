"""The decide model (LANGUAGE.md §5): what a step gets when its params are invalid
or it carries a `decide:` condition.

A decider answers one of exactly three decisions (the seed format):
`{"action": "continue", "params": {...}}`, `{"action": "skip"}`, `{"action": "break"}`.

- `EmbeddedDecider`: deterministic, no network. Repairs params the obvious way
  (schema defaults, `"3"` → 3, `"true"` → true, a scalar → a one-item list, a
  number → text, unknown properties dropped where the schema forbids them) and
  evaluates a condition that is an expression. Anything else raises `Undecided`.
- `ModelDecider`: any OpenAI-compatible chat endpoint, asked with the decision's
  JSON Schema as the required response format; its answer is validated.
- `ChainedDecider`: the embedded decider, then the model (if configured), then
  the configured fallback (`fail` raises `DecisionNeeded`, `skip`, `break`).
- `decider_from_config` builds that chain from the `[decide]` table of chainlang.toml.

A `continue` decision's params are the caller's to validate again (`validate_params`):
if they are still invalid the step fails with the schema errors (no repair loop).
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from chainlang.schema_validation import iter_errors, json_kind, validator_for

if TYPE_CHECKING:
    from chainlang.registry.config import ProjectConfig
    from chainlang.registry.config_model import DecideConfig

__all__ = [
    "ACTIONS",
    "DECISION_SCHEMA",
    "DEFAULT_TIMEOUT",
    "FALLBACKS",
    "ChainedDecider",
    "DecideError",
    "DecideRequest",
    "Decider",
    "DeciderConfigError",
    "Decision",
    "DecisionNeeded",
    "EmbeddedDecider",
    "ModelDecider",
    "Undecided",
    "decider_from_config",
    "repair_params",
    "validate_params",
]

Action = Literal["continue", "skip", "break"]
Fallback = Literal["fail", "skip", "break"]

ACTIONS: tuple[Action, ...] = ("continue", "skip", "break")
FALLBACKS: tuple[Fallback, ...] = ("fail", "skip", "break")
DEFAULT_TIMEOUT = 60.0  # seconds; `timeout` in `[decide]`

#: The answer a decider gives (draft-07). The three alternatives are `anyOf`, not
#: `oneOf`: their `action` constants exclude each other, and `anyOf` is what the
#: structured-output modes of OpenAI-compatible servers understand most widely.
DECISION_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "decision",
    "description": "continue with (repaired) params, skip the step, or break the chain",
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "action": {"type": "string", "const": "continue"},
                "params": {"type": "object", "description": "the params to run the event with"},
            },
            "required": ["action", "params"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"action": {"type": "string", "const": "skip"}},
            "required": ["action"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"action": {"type": "string", "const": "break"}},
            "required": ["action"],
            "additionalProperties": False,
        },
    ],
}

_SOURCES = ("embedded", "model", "fallback")
_MAX_DEPTH = 64  # how deep params are repaired
_MAX_MESSAGE = 240  # characters of one validation message
_MAX_REASON = 400  # characters of a reason


# -- decisions and requests ----------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One answer of the decide model.

    `params` is set for `continue` only. `reason` is a short line for the transcript;
    `source` says who decided: `embedded`, `model` or `fallback`.
    """

    action: Action
    params: dict[str, Any] | None = None
    reason: str = ""
    source: str = "embedded"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a decision is continue, skip or break, not {self.action!r}")
        if self.action == "continue" and not isinstance(self.params, dict):
            raise ValueError("a continue decision carries its params (an object)")
        if self.action != "continue" and self.params is not None:
            raise ValueError(f"a {self.action} decision carries no params")
        if self.source not in _SOURCES:
            raise ValueError(f"a decision's source is embedded, model or fallback, not {self.source!r}")

    def answer(self) -> dict[str, Any]:
        """The decision in the seed format: `{"action": ..., "params": ...}` (params for continue only)."""
        if self.action == "continue":
            return {"action": "continue", "params": self.params}
        return {"action": self.action}

    def to_record(self) -> dict[str, Any]:
        """JSON for the transcript: the answer plus `reason` and `source` (see `from_record`)."""
        return {**self.answer(), "reason": self.reason, "source": self.source}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Decision:
        """The decision recorded by `to_record` (reused on resume). ValueError if it is not one."""
        if not isinstance(record, dict):
            raise ValueError("a recorded decision is an object")
        answer = {key: value for key, value in record.items() if key not in ("reason", "source")}
        problems = _decision_problems(answer)
        if problems:
            raise ValueError(f"not a recorded decision: {problems[0]}")
        return cls(
            action=answer["action"],
            params=answer.get("params"),
            reason=str(record.get("reason", "")),
            source=str(record.get("source", "embedded")),
        )


@dataclass(frozen=True)
class DecideRequest:
    """What a decider is asked about one step.

    `errors` are the validation messages of `params` against `params_schema` (empty
    when only a condition is asked); `condition` is the step's `decide:` text;
    `context` is the JSON data the condition may refer to (built by the interpreter).
    """

    event: str
    description: str
    params_schema: dict[str, Any]
    params: dict[str, Any]
    errors: list[str] = field(default_factory=list)
    condition: str | None = None
    context: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Decider(Protocol):
    """Anything that decides a step; raises `Undecided` when it cannot."""

    async def decide(self, request: DecideRequest) -> Decision: ...


class DecideError(Exception):
    """Base class of the decide model's errors. Messages are single lines."""


class Undecided(DecideError):
    """This decider cannot decide; `reason` says why (one line). A chain of deciders
    goes on to the next one, then to the fallback."""

    def __init__(self, reason: str) -> None:
        self.reason = _one_line(reason)
        super().__init__(self.reason)


class DecisionNeeded(DecideError):
    """No decider could decide and the fallback is `fail`: the step fails with this message."""

    def __init__(self, message: str, event: str = "", reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.event = event
        self.reasons = reasons


class DeciderConfigError(DecideError):
    """The model decider cannot be used as configured (e.g. its API key variable is not set)."""


# -- validation ---------------------------------------------------------------------------


def validate_params(schema: dict[str, Any], params: Any) -> list[str]:
    """The validation messages of `params` against `schema` (draft-07, no fetching,
    RE2 patterns), sorted by location; empty when they are valid. A message names its
    location first (`days: 'three' is not of type 'integer'`), except at the top."""
    try:
        validator = _validator(_schema_key(schema))
        errors = iter_errors(validator, params)
    except Exception as exc:  # a schema jsonschema cannot work with: report, never crash the run
        return [_shorten(f"the params schema cannot be used: {type(exc).__name__}: {exc}", _MAX_MESSAGE)]
    messages: list[tuple[str, str]] = []
    for error in errors:
        where = _location(list(error.absolute_path))
        text = _shorten(_one_line(error.message), _MAX_MESSAGE)
        messages.append((where, f"{where}: {text}" if where else text))
    return [text for _, text in sorted(set(messages))]


def _schema_key(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, default=str)


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    return validator_for(json.loads(schema_json))


def _location(path: list[Any]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _decision_problems(answer: Any) -> list[str]:
    return [_one_line(error.message) for error in iter_errors(_validator(_schema_key(DECISION_SCHEMA)), answer)]


# -- the embedded decider --------------------------------------------------------------


class EmbeddedDecider:
    """The deterministic decider: no network, the same answer for the same request.

    1. A `condition` must parse as an expression whose names are all keys of the
       request's `context`; it is evaluated there: false → skip, true → go on.
       Plain language, an unknown name or an evaluation error → `Undecided`.
    2. Params that are invalid are repaired (`repair_params`) and validated again:
       valid → continue with the repaired params; still invalid → `Undecided`.
    """

    async def decide(self, request: DecideRequest) -> Decision:
        return self.decide_now(request)

    def decide_now(self, request: DecideRequest) -> Decision:
        """`decide`, synchronously (it never waits on anything)."""
        reasons: list[str] = []
        if request.condition is not None:
            if not _condition_holds(request.condition, request.context):
                return Decision("skip", None, f"condition `{_shorten(request.condition, 80)}` is false", "embedded")
            reasons.append(f"condition `{_shorten(request.condition, 80)}` is true")
        params = request.params
        if request.errors or validate_params(request.params_schema, params):
            repaired, notes = repair_params(request.params_schema, params)
            remaining = validate_params(request.params_schema, repaired)
            if remaining:
                more = f" (and {len(remaining) - 1} more)" if len(remaining) > 1 else ""
                raise Undecided(f"the params are invalid and no obvious repair fixes them: {remaining[0]}{more}")
            params = repaired
            reasons.append("repaired params: " + "; ".join(notes) if notes else "the params are valid")
        elif request.condition is None:
            reasons.append("the params are valid")
        return Decision("continue", params, _shorten(", ".join(reasons), _MAX_REASON), "embedded")


def _condition_holds(condition: str, context: dict[str, Any]) -> bool:
    from chainlang.expr import DataResolver, ExprEvalError, ExprSyntaxError, compile_expression, parse_expression, truthy
    from chainlang.expr.ast import Name, iter_refs

    try:
        expr = parse_expression(condition)
    except ExprSyntaxError as exc:
        raise Undecided(f"the condition `{_shorten(condition, 80)}` is not an expression ({exc.message}); "
                        "a decide model must judge it") from None
    for ref in iter_refs(expr):
        first = ref.segments[0]
        root = first.name if isinstance(first, Name) else getattr(first, "value", None)
        if root not in context:
            known = ", ".join(sorted(str(key) for key in context)) or "nothing"
            raise Undecided(f"the condition `{_shorten(condition, 80)}` names '{root}', which the chain does not know "
                            f"here (known: {_shorten(known, 120)}); a decide model must judge it")
    try:
        value = compile_expression(expr)(DataResolver(context))
    except ExprEvalError as exc:
        raise Undecided(f"the condition `{_shorten(condition, 80)}` cannot be evaluated: {exc}") from None
    return truthy(value)


def repair_params(schema: dict[str, Any], params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The embedded decider's obvious repairs, and one note per repair; `params` is not changed.

    Where the schema says so: missing properties get their `default`; a string of an
    integer or number becomes that number, `"true"`/`"false"` a boolean; a number
    becomes text; a scalar becomes a one-item list; unknown properties are dropped
    where `additionalProperties` is false. Nested objects and list items are repaired
    the same way. Values that fit already are never changed."""
    notes: list[str] = []
    repaired = _repair(schema, params, [], notes, 0)
    return (repaired if isinstance(repaired, dict) else dict(params)), notes


_INTEGER = re.compile(r"[+-]?\d{1,300}")
_NUMBER = re.compile(r"[+-]?(?:\d{1,300}(?:\.\d{0,300})?|\.\d{1,300})(?:[eE][+-]?\d{1,4})?")


def _repair(schema: Any, value: Any, path: list[Any], notes: list[str], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return value
    types = _schema_types(schema)
    value = _coerce(value, types, path, notes)
    if isinstance(value, dict):
        target = _branch(schema, "object")
        if target is not None:
            return _repair_object(target, value, path, notes, depth)
    elif isinstance(value, list):
        target = _branch(schema, "array")
        if target is not None and isinstance(target.get("items"), dict):
            items = target["items"]
            return [_repair(items, item, path + [i], notes, depth + 1) for i, item in enumerate(value)]
    return value


def _repair_object(schema: dict[str, Any], value: dict[str, Any], path: list[Any], notes: list[str], depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    extra = schema.get("additionalProperties", True)
    patterns = schema.get("patternProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in properties:
            out[key] = _repair(properties[key], item, path + [key], notes, depth + 1)
        elif _pattern_match(patterns, key):
            out[key] = item
        elif extra is False:
            notes.append(f"dropped unknown '{_location(path + [key])}'")
        elif isinstance(extra, dict):
            out[key] = _repair(extra, item, path + [key], notes, depth + 1)
        else:
            out[key] = item
    for key, subschema in properties.items():
        if key not in out and isinstance(subschema, dict) and "default" in subschema:
            out[key] = copy.deepcopy(subschema["default"])
            notes.append(f"filled '{_location(path + [key])}' with its default {_show(subschema['default'])}")
    return out


def _pattern_match(patterns: Any, key: str) -> bool:
    if not isinstance(patterns, dict):
        return False
    from chainlang.expr.evaluate import compile_regex

    for pattern in patterns:
        compiled, _ = compile_regex(pattern) if isinstance(pattern, str) else (None, None)
        if compiled is None or compiled.search(key) is not None:
            return True  # an unusable pattern: keep the key, validation reports the schema
    return False


def _coerce(value: Any, types: set[str], path: list[Any], notes: list[str]) -> Any:
    if not types or _fits(value, types):
        return value
    new: Any = _NO_CHANGE
    if isinstance(value, str):
        text = value.strip()
        if "integer" in types and _INTEGER.fullmatch(text):
            new = int(text)
        elif "number" in types and _NUMBER.fullmatch(text):
            number = float(text)
            if math.isfinite(number):
                new = int(text) if _INTEGER.fullmatch(text) else number
        elif "boolean" in types and text.lower() in ("true", "false"):
            new = text.lower() == "true"
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and "string" in types:
        if isinstance(value, int) or math.isfinite(value):
            new = json.dumps(value)
    if new is _NO_CHANGE and "array" in types and isinstance(value, (str, int, float, bool)):
        new = [value]
    if new is _NO_CHANGE:
        return value
    notes.append(f"'{_location(path) or 'params'}': {_show(value)} → {_show(new)}")
    return new


_NO_CHANGE = object()


def _fits(value: Any, types: set[str]) -> bool:
    if value is None:
        return "null" in types
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return bool(types & {"integer", "number"})
    if isinstance(value, float):
        return "number" in types or ("integer" in types and value.is_integer())
    if isinstance(value, str):
        return "string" in types
    if isinstance(value, list):
        return "array" in types
    if isinstance(value, dict):
        return "object" in types
    return False


def _schema_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema accepts, as far as `type`, `anyOf`/`oneOf` and `enum`/`const` say
    (empty: unknown, so nothing is coerced)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            found: set[str] = set()
            for branch in branches:
                sub = _schema_types(branch) if isinstance(branch, dict) else set()
                if not sub:
                    return set()  # a branch of unknown type: anything may fit
                found |= sub
            return found
    if "const" in schema:
        return {json_kind(schema["const"])}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {json_kind(item) for item in schema["enum"]}
    return set()


def _branch(schema: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The (sub)schema that describes values of `kind`: the first `anyOf`/`oneOf` branch of
    that type, else the schema itself when it accepts `kind` or says no type at all."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, dict) and kind in _schema_types(branch):
                    return branch
    types = _schema_types(schema)
    return schema if not types or kind in types else None


# -- the model decider ------------------------------------------------------------------

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
            detail = f": {_shorten(_one_line(detail), 160)}" if detail.strip() else ""
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
            raise Undecided(f"the decide model's answer is not JSON: {_shorten(_one_line(content), 120)}") from None
        problems = _decision_problems(answer)
        if problems:
            raise Undecided(f"the decide model's answer is not a decision (continue with params, skip or break): "
                            f"{_shorten(_one_line(json.dumps(answer, ensure_ascii=False)), 120)}")
        action: Action = answer["action"]
        return Decision(action, answer.get("params") if action == "continue" else None,
                        f"the decide model {self.model} answered {action}", "model")


def _content_of(raw: bytes) -> str:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Undecided(f"the decide model endpoint's answer is not JSON: {_shorten(_one_line(raw[:200].decode('utf-8', 'replace')), 120)}") from None
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
            raise Undecided(f"the decide model refused: {_shorten(_one_line(refusal), 120)}")
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


# -- the chain of deciders ----------------------------------------------------------------

_HOW_TO_CONFIGURE = (
    'configure one in chainlang.toml: [decide] with base_url = "http://localhost:11434/v1" (any OpenAI-compatible '
    'endpoint) and model = "phi3", plus api_key_env = "NAME_OF_THE_KEY_VARIABLE" if it needs a key; or set '
    'fallback = "skip" or "break" in [decide]'
)


class ChainedDecider:
    """`first` (the embedded decider), then `then` (the model, if configured); when neither
    decides, the fallback: `fail` raises `DecisionNeeded`, `skip` and `break` return that
    decision with source `fallback`."""

    def __init__(self, first: Decider, then: Decider | None = None, fallback: Fallback = "fail") -> None:
        if fallback not in FALLBACKS:
            raise DeciderConfigError(f"the decide fallback is fail, skip or break, not {fallback!r}")
        self.first = first
        self.then = then
        self.fallback = fallback

    def __repr__(self) -> str:
        return f"ChainedDecider(first={self.first!r}, then={self.then!r}, fallback={self.fallback!r})"

    async def decide(self, request: DecideRequest) -> Decision:
        reasons: list[str] = []
        for decider in (self.first, self.then):
            if decider is None:
                continue
            try:
                return await decider.decide(request)
            except Undecided as exc:
                reasons.append(exc.reason)
        why = "; ".join(reasons) or "no decider is configured"
        if self.fallback in ("skip", "break"):
            action: Action = "skip" if self.fallback == "skip" else "break"
            return Decision(action, None, _shorten(f"fallback {self.fallback}: {why}", _MAX_REASON), "fallback")
        if self.then is None:
            message = f"{request.event}: a decide model is needed ({why}); {_HOW_TO_CONFIGURE}"
        else:
            message = (f"{request.event}: neither the embedded decider nor the decide model could decide ({why}); "
                       f'check the [decide] endpoint in chainlang.toml, or set fallback = "skip" or "break" there')
        raise DecisionNeeded(message, request.event, tuple(reasons))


def decider_from_config(config: ProjectConfig | DecideConfig | None) -> ChainedDecider:
    """The decider of a project: the embedded decider, then the model of `[decide]` if it
    names one (`base_url` and `model`), then its `fallback` (default `fail`).
    Raises `chainlang.registry.errors.ConfigError` for a half-configured model."""
    from chainlang.durations import parse_duration
    from chainlang.registry.config_model import DecideConfig
    from chainlang.registry.errors import ConfigError

    decide = config if isinstance(config, DecideConfig) or config is None else config.decide
    if decide is None:
        return ChainedDecider(EmbeddedDecider(), None, "fail")
    model: ModelDecider | None = None
    if decide.base_url or decide.model:
        missing = [name for name in ("base_url", "model") if not getattr(decide, name)]
        if missing:
            raise ConfigError(f"[decide] in chainlang.toml has {'model' if missing == ['base_url'] else 'base_url'} "
                              f"but no {missing[0]}: a decide model needs both base_url and model")
        timeout = parse_duration(decide.timeout) or DEFAULT_TIMEOUT
        try:
            model = ModelDecider(str(decide.base_url), str(decide.model), decide.api_key_env, timeout)
        except DeciderConfigError as exc:
            raise ConfigError(f"[decide] in chainlang.toml: {exc}") from None
    elif decide.api_key_env:
        raise ConfigError("[decide] in chainlang.toml has api_key_env but no base_url and model: "
                          "a decide model needs both base_url and model")
    return ChainedDecider(EmbeddedDecider(), model, decide.fallback)


# -- text helpers -----------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _shorten(text, 40)
