"""The decide model (LANGUAGE.md §5): the embedded decider, the model decider against a
small OpenAI-protocol server started here, the chain of deciders and its fallbacks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chainlang.llm import ModelClient, Timeouts
from chainlang.config.project import load_config
from chainlang.config.model import DecideConfig
from chainlang.errors import ConfigError
from chainlang.runtime.decide import (
    DECISION_SCHEMA,
    ChainedDecider,
    DecideRequest,
    Decider,
    DeciderConfigError,
    Decision,
    DecisionNeeded,
    EmbeddedDecider,
    ModelDecider,
    TierDecider,
    Undecided,
    close_decider,
    decider_from_config,
    repair_params,
    repair_schema,
    validate_params,
)
from chainlang.schemas.safe import validator_for
from tests.helpers import records as _records
from tests.journal_util import cut_after

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "default": ""},
        "days": {"type": "integer", "default": 7},
        "ratio": {"type": "number"},
        "unread": {"type": "boolean", "default": False},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "array", "items": {"type": "integer"}},
        "attendees": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
        "title": {"type": "string"},
    },
    "required": ["days"],
    "additionalProperties": False,
}


def request(params: dict[str, Any], schema: dict[str, Any] = SCHEMA, condition: str | None = None,
            context: dict[str, Any] | None = None) -> DecideRequest:
    return DecideRequest(
        event="email.search",
        description="Search the mailbox.",
        params_schema=schema,
        params=params,
        errors=validate_params(schema, params),
        condition=condition,
        context=context if context is not None else {},
    )


def embedded(req: DecideRequest) -> Decision:
    return asyncio.run(EmbeddedDecider().decide(req))


# -- validate_params ------------------------------------------------------------------------


def test_validate_params_messages_name_the_param() -> None:
    messages = validate_params(SCHEMA, {"days": "three", "extra": 1})
    assert "days: 'three' is not of type 'integer'" in messages
    assert any("'extra' was unexpected" in m for m in messages)
    assert validate_params(SCHEMA, {"days": 3}) == []


def test_validate_params_never_fetches_a_ref() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://example.com/schema.json"}}}
    assert validate_params(schema, {"a": 1}) == []  # unresolvable: validates nothing, fetches nothing


# -- the embedded decider: repairs --------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"days": "3"}, {"days": 3}),
        ({"days": 3, "ratio": "3.5"}, {"days": 3, "ratio": 3.5}),
        ({"days": 3, "ratio": "2"}, {"days": 3, "ratio": 2}),
        ({"days": 3, "unread": "true"}, {"days": 3, "unread": True}),
        ({"days": 3, "unread": "false"}, {"days": 3, "unread": False}),
        ({"days": 3, "tags": "budget"}, {"days": 3, "tags": ["budget"]}),
        ({"days": 3, "counts": "4"}, {"days": 3, "counts": [4]}),
        ({"days": 3, "title": 12}, {"days": 3, "title": "12"}),
        ({"days": 3, "title": 2.5}, {"days": 3, "title": "2.5"}),
        ({"days": 3, "attendees": "Sarah"}, {"days": 3, "attendees": ["Sarah"]}),
    ],
)
def test_embedded_coerces_obvious_types(given: dict[str, Any], expected: dict[str, Any]) -> None:
    decision = embedded(request(given))
    assert decision.action == "continue" and decision.source == "embedded"
    assert decision.params is not None
    assert {k: decision.params[k] for k in expected} == expected
    assert type(decision.params["days"]) is int
    assert validate_params(SCHEMA, decision.params) == []
    assert "→" in decision.reason


def test_embedded_fills_defaults() -> None:
    decision = embedded(request({"query": "budget"}))
    assert decision.action == "continue"
    assert decision.params == {"query": "budget", "days": 7, "unread": False, "attendees": None}
    assert "filled 'days' with its default 7" in decision.reason


def test_embedded_drops_unknown_params_where_forbidden() -> None:
    decision = embedded(request({"days": 1, "sender": "Sarah"}))
    assert decision.action == "continue" and decision.params is not None
    assert "sender" not in decision.params
    assert "dropped unknown 'sender'" in decision.reason
    open_schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    kept = embedded(request({"n": "2", "sender": "Sarah"}, open_schema))
    assert kept.params == {"n": 2, "sender": "Sarah"}


def test_embedded_repairs_nested_objects_and_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"due": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
                "additionalProperties": False,
            },
            "slots": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        },
        "required": ["filter"],
    }
    decision = embedded(request({"filter": {"due": 20240115, "junk": 1}, "slots": [{"n": "1"}]}, schema))
    assert decision.params == {"filter": {"due": "20240115", "limit": 10}, "slots": [{"n": 1}]}


def test_embedded_does_not_touch_values_that_fit() -> None:
    schema = {"type": "object", "properties": {"v": {"type": ["integer", "string"]}, "x": {"type": "integer"}}, "required": ["x"]}
    decision = embedded(request({"v": "3", "x": "1"}, schema))
    assert decision.params == {"v": "3", "x": 1}
    repaired, notes = repair_params(SCHEMA, {"days": 3})
    assert repaired == {"days": 3, "query": "", "unread": False, "attendees": None}  # only defaults
    assert all(note.startswith("filled") for note in notes)


@pytest.mark.parametrize(
    "params",
    [
        {"days": "three"},  # not a number
        {"days": "3.5"},  # not an integer
        {"days": 3, "unread": "yes"},  # only true/false become booleans
        {"days": 3, "ratio": "nan"},
        {"days": 3, "tags": {"a": 1}},  # an object is not wrapped into a list
        {"days": None},
    ],
)
def test_embedded_still_invalid_is_undecided(params: dict[str, Any]) -> None:
    with pytest.raises(Undecided, match="no obvious repair fixes them"):
        embedded(request(params))


def test_embedded_missing_required_without_default_is_undecided() -> None:
    schema = {"type": "object", "properties": {"team": {"type": "string"}}, "required": ["team"]}
    with pytest.raises(Undecided, match="'team' is a required property"):
        embedded(request({}, schema))


def test_embedded_valid_params_continue_unchanged() -> None:
    decision = embedded(request({"days": 2}))
    assert decision == Decision("continue", {"days": 2}, "the params are valid", "embedded")


# -- the embedded decider: conditions ------------------------------------------------------

CONTEXT = {"params": {"days": 2}, "steps": {"search": {"result": {"matches": [{"subject": "Q1 budget", "urgent": True}]}}}}


@pytest.mark.parametrize(
    "condition",
    [
        "steps.search.result.matches | length > 0",
        "params.days == 2",
        "{steps.search.result.matches[0].urgent}",
        "steps.search.result.matches[0].subject contains 'budget'",
        "true",
    ],
)
def test_expression_condition_true_continues(condition: str) -> None:
    decision = embedded(request({"days": 2}, condition=condition, context=CONTEXT))
    assert decision.action == "continue" and decision.params == {"days": 2}
    assert "is true" in decision.reason


@pytest.mark.parametrize(
    "condition",
    ["steps.search.result.matches | length > 5", "params.days > 2", "not steps.search.result.matches[0].urgent",
     "steps.search.result.missing"],
)
def test_expression_condition_false_skips(condition: str) -> None:
    decision = embedded(request({"days": 2}, condition=condition, context=CONTEXT))
    assert decision == Decision("skip", None, f"condition `{condition}` is false", "embedded")


def test_false_condition_skips_even_with_invalid_params() -> None:
    decision = embedded(request({"days": "many"}, condition="params.days == 3", context={"params": {"days": "many"}}))
    assert decision.action == "skip"


def test_true_condition_with_repairable_params() -> None:
    decision = embedded(request({"days": "3"}, condition="params.days == '3'", context={"params": {"days": "3"}}))
    assert decision.action == "continue" and decision.params == {"days": 3, "query": "", "unread": False, "attendees": None}
    assert "is true" in decision.reason and "repaired" in decision.reason


@pytest.mark.parametrize(
    ("condition", "why"),
    [
        ("find next available slot", "not an expression"),
        ("if any of these emails is urgent", "not an expression"),
        ("urgent", "names 'urgent'"),  # parses, but names nothing the chain knows
        ("steps.search.result.matches > 1", "cannot be evaluated"),  # a list compared with a number
    ],
)
def test_condition_the_embedded_decider_cannot_judge(condition: str, why: str) -> None:
    with pytest.raises(Undecided, match=why) as info:
        embedded(request({"days": 2}, condition=condition, context=CONTEXT))
    assert "\n" not in info.value.reason


# -- the decision type ------------------------------------------------------------------------


def test_decision_shapes() -> None:
    with pytest.raises(ValueError):
        Decision("continue", None)
    with pytest.raises(ValueError):
        Decision("skip", {})
    with pytest.raises(ValueError):
        Decision("retry", None)  # type: ignore[arg-type]
    decision = Decision("continue", {"a": 1}, "why", "model")
    assert decision.answer() == {"action": "continue", "params": {"a": 1}}
    assert Decision.from_record(decision.to_record()) == decision
    assert Decision("break", reason="r", source="fallback").answer() == {"action": "break"}
    with pytest.raises(ValueError):
        Decision.from_record({"action": "continue"})


def test_decision_schema_is_draft7_and_takes_exactly_the_three_answers() -> None:
    validator = validator_for(DECISION_SCHEMA)
    validator.check_schema(DECISION_SCHEMA)
    for good in ({"action": "continue", "params": {}}, {"action": "skip"}, {"action": "break"}):
        assert validator.is_valid(good)
    bad: list[Any] = [{"action": "continue"}, {"action": "skip", "params": {}}, {"action": "retry"}, [], "skip",
                      {"action": "continue", "params": []}, {"action": "break", "why": "x"}]
    for answer in bad:
        assert not validator.is_valid(answer)


# -- the model decider, against a local OpenAI-protocol server ----------------------------

KEY = "sk-test-5e3c7a9d1f-never-shown"
KEY_ENV = "CHAINLANG_TEST_DECIDE_KEY"
MiB = 1024 * 1024


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # choices[0].message.content; None: `body` is sent as it is
    body: str = ""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # read the request, never answer
    drop: bool = False  # read the request, close the connection without an answer
    trickle: float = 0.0  # send the body one byte every `trickle` seconds
    chunked: bool = False  # send the body in chunks, without a Content-Length
    padding: int = 0  # bytes of padding in the chat answer, around the content


@dataclass
class FakeEndpoint:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)  # client ports whose connection ended
    stop: threading.Event = field(default_factory=threading.Event)

    def reply(self, content: str | dict[str, Any] | None = None, **kwargs: Any) -> None:
        text = json.dumps(content) if isinstance(content, dict) else content
        self.replies.append(Reply(content=text, **kwargs))

    def ports(self) -> list[int]:
        return [r["port"] for r in self.requests]


@pytest.fixture()
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEndpoint]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, KEY)
    state = FakeEndpoint()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real model servers do

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle(self) -> None:
            try:
                super().handle()
            finally:
                state.closed.append(self.client_address[1])

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                   "port": self.client_address[1]})
            reply = state.replies.pop(0) if state.replies else Reply(status=500, body="no reply queued")
            if reply.hang:
                state.stop.wait(30)
                self.close_connection = True
                return
            if reply.drop:
                self.close_connection = True
                return
            if reply.delay:
                time.sleep(reply.delay)
            if reply.content is not None:
                payload = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": reply.content}}],
                                      **({"padding": "x" * reply.padding} if reply.padding else {})})
            else:
                payload = reply.body
            data = payload.encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(0, len(data), 65536):
                        chunk = data[i:i + 65536]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if reply.trickle:
                    for byte in data:
                        if state.stop.wait(reply.trickle):
                            break
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                self.wfile.write(data)
            except OSError:
                self.close_connection = True  # the client gave up (timeout tests)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()


def model(endpoint: FakeEndpoint | str, timeout: float = 5.0, api_key_env: str | None = KEY_ENV,
          **client: Any) -> ModelDecider:
    """A model decider whose retries wait 10 ms instead of 0.5 s (`client`: ModelClient options)."""
    url = endpoint if isinstance(endpoint, str) else endpoint.url
    client.setdefault("backoff", 0.01)
    decider = ModelDecider(url, "phi3", api_key_env, timeout)
    for name, value in client.items():
        setattr(decider.client, name, value)
    return decider


def ask(decider: Decider, req: DecideRequest | None = None) -> Decision:
    """One decision in its own event loop; the decider's connections are closed after it."""
    async def go() -> Decision:
        try:
            return await decider.decide(req or request({"days": "soon"}, condition="find next available slot"))
        finally:
            await close_decider(decider)

    return asyncio.run(go())


def test_model_request(endpoint: FakeEndpoint) -> None:
    endpoint.reply({"action": "skip"})
    ask(model(endpoint), request({"days": "soon"}, condition="find next available slot", context=CONTEXT))
    (sent,) = endpoint.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {KEY}"
    assert sent["headers"]["Content-Type"] == "application/json"
    body = sent["body"]
    assert body["model"] == "phi3"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": repair_schema(SCHEMA), "strict": True},
    }  # a repair: the answer's params are typed by the step's params schema
    system, user = body["messages"]
    assert system["role"] == "system" and all(w in system["content"] for w in ('"continue"', '"skip"', '"break"'))
    assert user["role"] == "user"
    for part in ("email.search", "Search the mailbox.", '"days": "soon"', "days: 'soon' is not of type 'integer'",
                 "find next available slot", '"Q1 budget"', '"additionalProperties": false'):
        assert part in user["content"]
    assert KEY not in json.dumps(body)


def test_model_without_key_variable_sends_no_authorization(endpoint: FakeEndpoint) -> None:
    endpoint.reply({"action": "break"})
    ask(model(endpoint, api_key_env=None))
    assert "Authorization" not in endpoint.requests[0]["headers"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "continue", "params": {"days": 3}}, Decision("continue", {"days": 3}, "the decide model phi3 answered continue", "model")),
        ({"action": "skip"}, Decision("skip", None, "the decide model phi3 answered skip", "model")),
        ({"action": "break"}, Decision("break", None, "the decide model phi3 answered break", "model")),
    ],
)
def test_model_answers(endpoint: FakeEndpoint, answer: dict[str, Any], expected: Decision) -> None:
    endpoint.reply(answer)
    assert ask(model(endpoint)) == expected


def test_model_answer_in_a_code_fence_is_accepted(endpoint: FakeEndpoint) -> None:
    endpoint.reply('```json\n{"action": "skip"}\n```')
    assert ask(model(endpoint)).action == "skip"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"action": "continue"}', "not a decision"),
        ('{"action": "retry"}', "not a decision"),
        ('{"action": "skip", "params": {}}', "not a decision"),
        ("sure, let's skip it", "not JSON"),
        ("", "empty"),
    ],
)
def test_model_invalid_answer_is_undecided(endpoint: FakeEndpoint, content: str, why: str) -> None:
    endpoint.reply(content)
    with pytest.raises(Undecided, match=why):
        ask(model(endpoint))
    assert len(endpoint.requests) == 1  # an answer that is wrong is not asked again


def test_model_endpoint_that_is_not_openai_compatible(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(body='{"result": "skip"}'))
    endpoint.replies.append(Reply(body="<html>hello</html>"))
    with pytest.raises(Undecided, match=r"no choices\[0\]\.message"):
        ask(model(endpoint))
    with pytest.raises(Undecided, match="endpoint's answer is not JSON"):
        ask(model(endpoint))


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_model_http_error_is_undecided_and_not_retried(endpoint: FakeEndpoint, status: int) -> None:
    endpoint.replies.append(Reply(status=status, body='{"error": "model not loaded"}'))
    with pytest.raises(Undecided, match=f"answered HTTP {status} .*model not loaded") as info:
        ask(model(endpoint))
    assert "\n" not in info.value.reason and "tries" not in info.value.reason
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_model_busy_is_retried(endpoint: FakeEndpoint, status: int) -> None:
    endpoint.replies.append(Reply(status=status, body="busy"))
    endpoint.replies.append(Reply(status=status, body="busy"))
    endpoint.reply({"action": "skip"})
    assert ask(model(endpoint)).action == "skip"
    assert len(endpoint.requests) == 3


def test_model_retries_are_bounded(endpoint: FakeEndpoint) -> None:
    for _ in range(5):
        endpoint.replies.append(Reply(status=503, body='{"error": "overloaded"}'))
    with pytest.raises(Undecided, match=r"answered HTTP 503 Service Unavailable: .*overloaded.* \(3 tries\)"):
        ask(model(endpoint))
    assert len(endpoint.requests) == 3  # two retries by default
    with pytest.raises(Undecided, match=r"HTTP 503 Service Unavailable: .*overloaded.*\"}$"):
        ask(model(endpoint, retries=0))
    assert len(endpoint.requests) == 4


def test_model_retry_waits_as_the_server_says_within_limits(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(status=429, body="slow down", headers={"Retry-After": "0.3"}))
    endpoint.reply({"action": "skip"})
    started = time.monotonic()
    assert ask(model(endpoint)).action == "skip"
    assert time.monotonic() - started >= 0.3
    # a wait longer than the limit (or than the timeout): the error, at once
    endpoint.replies.append(Reply(status=429, body="come back tomorrow", headers={"Retry-After": "86400"}))
    started = time.monotonic()
    with pytest.raises(Undecided, match="HTTP 429 Too Many Requests: come back tomorrow$"):
        ask(model(endpoint))
    assert time.monotonic() - started < 60  # not the day the server asked for (any load stays far below it)
    assert len(endpoint.requests) == 3


def test_model_connection_dropped_is_retried(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(drop=True))
    endpoint.reply({"action": "break"})
    assert ask(model(endpoint)).action == "break"
    assert len(endpoint.requests) == 2


def test_model_connections_are_kept_alive(endpoint: FakeEndpoint) -> None:
    """One decider asks several times over one connection, and closes it at the end."""
    decider = model(endpoint)
    for _ in range(3):
        endpoint.reply({"action": "skip"})

    async def three() -> list[str]:
        try:
            return [(await decider.decide(NATURAL)).action for _ in range(3)]
        finally:
            await close_decider(decider)

    assert asyncio.run(three()) == ["skip", "skip", "skip"]
    ports = endpoint.ports()
    assert len(ports) == 3 and len(set(ports)) == 1
    _wait_for(lambda: ports[0] in endpoint.closed)


def _wait_for(condition: Any, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_model_redirect_is_refused(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(status=302, body="", headers={"Location": "http://127.0.0.1:9/steal"}))
    with pytest.raises(Undecided, match="HTTP 302"):
        ask(model(endpoint))
    assert len(endpoint.requests) == 1


def test_model_timeout_is_undecided(endpoint: FakeEndpoint) -> None:
    endpoint.reply({"action": "skip"}, delay=5)
    with pytest.raises(Undecided, match=r"did not answer within 0\.3s"):
        ask(model(endpoint, timeout=0.3))
    # the server answers after 5 s: raising (not deciding `skip`) shows it gave up before that;
    # one try (on a busy machine the 0.3 s may even end before the request is sent: the
    # connection is then all the server sees, and it records it when its thread gets to run)
    _wait_for(lambda: _attempts(endpoint), 30)
    assert len(_attempts(endpoint)) == 1


def test_model_that_never_answers_times_out(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(hang=True))
    started = time.monotonic()
    with pytest.raises(Undecided, match=r"^the decide model at http://127\.0\.0\.1:\d+/v1/chat/completions did not "
                                        r"answer within 0\.5s$"):
        ask(model(endpoint, timeout=0.5))
    assert time.monotonic() - started < 15  # the server would wait 30 s: half of it, whatever the load
    _wait_for(lambda: _attempts(endpoint), 30)  # recorded when the server's thread gets to run
    assert len(_attempts(endpoint)) == 1  # a timeout is not retried


def _attempts(endpoint: FakeEndpoint) -> set[int]:
    """The connections a client opened to `endpoint` (by client port): with a request, or
    closed before a whole request arrived."""
    return {r["port"] for r in endpoint.requests} | set(endpoint.closed)


def test_model_that_trickles_bytes_times_out(endpoint: FakeEndpoint) -> None:
    """A byte every 50 ms never trips a read timeout: the total deadline ends the exchange."""
    endpoint.reply({"action": "skip"}, padding=200, trickle=0.05)
    started = time.monotonic()
    with pytest.raises(Undecided, match=r"did not answer within 0\.5s"):
        ask(model(endpoint, timeout=0.5))
    assert time.monotonic() - started < 10  # the whole answer would take some 20 s: half of it, whatever the load


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_model_answer_too_large(endpoint: FakeEndpoint, chunked: bool) -> None:
    endpoint.reply({"action": "skip"}, padding=MiB, chunked=chunked)
    with pytest.raises(Undecided, match=r"the decide model's answer is larger than 1 MiB; it was not read further"):
        ask(model(endpoint))
    endpoint.reply({"action": "skip"}, padding=MiB - 1000, chunked=chunked)
    assert ask(model(endpoint)).action == "skip"  # just under the limit
    assert len(endpoint.requests) == 2


def test_model_unreachable_is_undecided() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as server:
        port = server.server_address[1]  # bound, then closed: nothing listens there
    with pytest.raises(Undecided, match=r"cannot reach the decide model at .*\(3 tries\)"):
        ask(model(f"http://127.0.0.1:{port}/v1", 2.0, None))


def test_model_missing_key_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAINLANG_TEST_UNSET_KEY", raising=False)
    with pytest.raises(DeciderConfigError, match="CHAINLANG_TEST_UNSET_KEY.*not set"):
        ask(ModelDecider("http://127.0.0.1:9/v1", "phi3", "CHAINLANG_TEST_UNSET_KEY", 1.0))


def test_model_config_is_checked() -> None:
    with pytest.raises(DeciderConfigError, match="http:// or https://"):
        ModelDecider("file:///etc/passwd", "phi3")
    with pytest.raises(DeciderConfigError, match="model name"):
        ModelDecider("http://localhost:11434/v1", "")
    with pytest.raises(DeciderConfigError, match="timeout must be more than 0 seconds"):
        ModelDecider("http://localhost:11434/v1", "phi3", None, 0)


def test_a_shared_client_stays_open(endpoint: FakeEndpoint) -> None:
    """A decider over a client shared with other model-backed events does not close it."""
    endpoint.reply({"action": "skip"})
    endpoint.reply({"action": "break"})
    client = ModelClient(endpoint.url, KEY_ENV, timeouts=Timeouts(total=5), label="the decide model")
    decider = ModelDecider.over(client, "phi3")
    assert decider.url == f"{endpoint.url}/chat/completions" and decider.timeout == 5

    async def twice() -> list[str]:
        async with client:
            first = await decider.decide(NATURAL)
            await close_decider(decider)  # the shared client is not the decider's to close
            return [first.action, (await decider.decide(NATURAL)).action]

    assert asyncio.run(twice()) == ["skip", "break"]
    assert len(set(endpoint.ports())) == 1


def test_the_api_key_never_shows(endpoint: FakeEndpoint) -> None:
    """Servers that echo the key back, in an error body or in the answer: it is redacted everywhere."""
    texts: list[str] = []
    endpoint.replies.append(Reply(status=401, body=f'{{"error": "bad key Bearer {KEY}"}}'))
    endpoint.reply(f"not json {KEY}")
    endpoint.reply({"action": "continue", "params": {"days": 3}, "echo": KEY})
    endpoint.replies.append(Reply(body=f"<html>{KEY}</html>"))
    endpoint.replies += [Reply(status=503, body=f"busy {KEY}")] * 3
    endpoint.reply("", headers={"X-Echo": KEY}, trickle=0.2)
    endpoint.reply({"action": "skip"})
    decider = model(endpoint, timeout=0.5)
    for _ in range(6):
        with pytest.raises(Undecided) as info:
            ask(decider)
        texts += [str(info.value), repr(info.value), info.value.reason]
    decision = ask(decider)
    texts += [repr(decision), json.dumps(decision.to_record()), repr(decider), repr(decider.client)]
    chained = ChainedDecider(EmbeddedDecider(), decider, "fail")
    endpoint.replies.append(Reply(status=403, body=KEY))
    with pytest.raises(DecisionNeeded) as needed:
        ask(chained)
    texts += [str(needed.value), repr(needed.value), *needed.value.reasons, repr(chained)]
    assert len(texts) > 20 and all(KEY not in text for text in texts)
    assert sum("***" in text for text in texts) >= 12


def test_httpx_is_imported_only_when_a_model_is_asked(tmp_path: Path) -> None:
    """`check`, `--help` and making a run's decider do not import httpx; the first request does."""
    code = """
import sys
from chainlang.cli import main
from chainlang.config.model import DecideConfig
from chainlang.runtime.decide import decider_from_config
for args in (["--help"], ["check", sys.argv[1]]):
    try:
        main(args)
    except SystemExit:
        pass
decider = decider_from_config(DecideConfig(base_url="http://127.0.0.1:9/v1", model="phi3"))
print("httpx" in sys.modules)
"""
    (tmp_path / "a.chain.yaml").write_text("steps:\n  - tools.now: {}\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


# -- the chain and its fallbacks ------------------------------------------------------------

NATURAL = request({"days": 2}, condition="find next available slot")


def test_chain_embedded_decides_first(endpoint: FakeEndpoint) -> None:
    chained = ChainedDecider(EmbeddedDecider(), model(endpoint), "fail")
    decision = ask(chained, request({"days": "3"}))
    assert decision.source == "embedded" and decision.params is not None and decision.params["days"] == 3
    assert endpoint.requests == []


def test_chain_asks_the_model_when_embedded_cannot(endpoint: FakeEndpoint) -> None:
    endpoint.reply({"action": "continue", "params": {"days": 2, "title": "Budget"}})
    decision = ask(ChainedDecider(EmbeddedDecider(), model(endpoint), "fail"), NATURAL)
    # a condition on valid params: the model judges it, the params stay as given (§13)
    assert decision.source == "model" and decision.params == {"days": 2}
    assert "its params were ignored" in decision.reason


def test_fallback_fail_says_how_to_configure_a_model() -> None:
    with pytest.raises(DecisionNeeded) as info:
        asyncio.run(ChainedDecider(EmbeddedDecider()).decide(NATURAL))
    message = str(info.value)
    assert message.startswith("email.search: a decide model is needed")
    assert "find next available slot" in message
    for part in ("chainlang.toml", "[decide]", "base_url =", "model =", "api_key_env =", 'fallback = "skip"'):
        assert part in message
    assert "\n" not in message
    assert info.value.event == "email.search" and len(info.value.reasons) == 1


def test_fallback_fail_after_the_model_failed(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(status=500, body="boom"))
    with pytest.raises(DecisionNeeded, match=r"neither the embedded decider nor the decide model.*HTTP 500.*\[decide\]"):
        ask(ChainedDecider(EmbeddedDecider(), model(endpoint), "fail"), NATURAL)


@pytest.mark.parametrize("fallback", ["skip", "break"])
def test_fallback_skip_and_break(fallback: Any) -> None:
    decision = asyncio.run(ChainedDecider(EmbeddedDecider(), None, fallback).decide(NATURAL))
    assert decision.action == fallback and decision.params is None and decision.source == "fallback"
    assert decision.reason.startswith(f"fallback {fallback}: the condition `find next available slot` is not an expression")


def test_fallback_does_not_hide_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAINLANG_TEST_UNSET_KEY", raising=False)
    chained = ChainedDecider(EmbeddedDecider(), ModelDecider("http://127.0.0.1:9/v1", "m", "CHAINLANG_TEST_UNSET_KEY"), "skip")
    with pytest.raises(DeciderConfigError):
        ask(chained, NATURAL)


# -- building the chain from chainlang.toml ----------------------------------------------------


def test_decider_from_config(tmp_path: Path) -> None:
    plain = decider_from_config(None)
    assert isinstance(plain.first, EmbeddedDecider) and plain.then is None and plain.fallback == "fail"

    toml = tmp_path / "chainlang.toml"
    toml.write_text('[decide]\nbase_url = "http://localhost:11434/v1/"\nmodel = "phi3"\n'
                    'api_key_env = "OPENAI_API_KEY"\nfallback = "break"\ntimeout = "1m30s"\n')
    chained = decider_from_config(load_config(toml))
    # [decide] is the light tier's older name: the light tier decides
    assert isinstance(chained.then, TierDecider) and chained.fallback == "break"
    light = chained.then.tiers.resolve("light")
    assert light.name == "light" and light.model == "phi3" and light.timeout == 90.0
    client = light.provider.client  # type: ignore[attr-defined]
    assert client.url("chat/completions") == "http://localhost:11434/v1/chat/completions"
    assert client.timeouts.total == 90.0 and client.api_key_env == "OPENAI_API_KEY"
    assert chained.tiers is chained.then.tiers  # the run's other model calls use the same tiers

    only_fallback = decider_from_config(DecideConfig(fallback="skip"))
    assert only_fallback.then is None and only_fallback.fallback == "skip"
    assert decider_from_config(DecideConfig()).then is None
    assert DecideConfig().timeout == "60s"


def test_decide_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has model but no base_url"):
        decider_from_config(DecideConfig(model="phi3"))
    with pytest.raises(ConfigError, match="api_key_env but no base_url"):
        decider_from_config(DecideConfig(api_key_env="KEY"))
    with pytest.raises(ConfigError, match="base_url must be an http"):
        decider_from_config(DecideConfig(base_url="ftp://x", model="m"))
    toml = tmp_path / "chainlang.toml"
    for text, match in [
        ('[decide]\nfallback = "retry"\n', "decide.fallback"),
        ("[decide]\ntimeout = 30\n", r"decide.timeout: .*duration in quotes"),
        ('[decide]\ntimeout = "30 seconds"\n', "not a duration"),
        ('[decide]\ntimeout = "1h"\n', "at most 10m"),
        ('[decide]\nfalback = "skip"\n', "did you mean 'fallback'"),
    ]:
        toml.write_text(text)
        with pytest.raises(ConfigError, match=match):
            load_config(toml)


# -- the model decider in a real run ----------------------------------------------------------------


RUN_TOOLS = str(Path(__file__).parent / "run" / "run_tools.py")


def test_a_run_asks_the_configured_model_records_it_and_resume_reuses_it(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    import chainlang

    (tmp_path / "chainlang.toml").write_text(
        f'[decide]\nbase_url = "{endpoint.url}"\nmodel = "phi3"\napi_key_env = "{KEY_ENV}"\n')
    chain = tmp_path / "t.chain.yaml"
    chain.write_text("""
steps:
  - test.echo: {value: "mail from {inputs.who}"}
  - test.send: {to: "{inputs.who}"}
    decide: "only when the message looks urgent"
  - test.echo: {value: after}
inputs:
  who: {type: string}
outputs: {sent: "{test.send.status}", last: "{test.echo.result}"}
""")
    endpoint.reply({"action": "skip"})
    transcript = tmp_path / "run.jsonl"
    result = chainlang.run(chain, {"who": KEY[:3] + "x"}, tools=[RUN_TOOLS], transcript=transcript)
    assert result.status == "ok", result.error
    assert result.outputs == {"sent": None, "last": "after"}
    # what the model was asked: the condition, the params, the response format
    body = endpoint.requests[0]["body"]
    assert body["model"] == "phi3" and body["response_format"]["type"] == "json_schema"
    assert "only when the message looks urgent" in json.dumps(body)
    records = _records(transcript)
    decide = [r for r in records if r["type"] == "decide"]
    assert len(decide) == 1
    assert decide[0]["action"] == "skip" and decide[0]["source"] == "model"
    assert decide[0]["asked"]["condition"] == "only when the message looks urgent"
    assert KEY not in transcript.read_text()  # the API key never reaches the transcript

    # cut the run just after the decision and resume: the model is not asked again
    cut_after(transcript, lambda r: r["type"] == "decide")
    resumed = chainlang.resume(transcript, tools=[RUN_TOOLS])
    assert resumed.status == "ok" and resumed.outputs == result.outputs
    assert len(endpoint.requests) == 1


def test_a_model_answer_that_is_not_a_decision_fails_the_step(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    import chainlang

    (tmp_path / "chainlang.toml").write_text(
        f'[decide]\nbase_url = "{endpoint.url}"\nmodel = "phi3"\napi_key_env = "{KEY_ENV}"\n')
    chain = tmp_path / "t.chain.yaml"
    chain.write_text("steps:\n  - test.echo: {value: 1}\n    decide: \"when the sky is blue\"\n")
    endpoint.reply({"action": "maybe"})
    result = chainlang.run(chain, tools=[RUN_TOOLS], transcript=tmp_path / "run.jsonl")
    assert result.status == "failed"
    assert result.error is not None and result.error["type"] == "decide"


def test_a_run_asks_over_one_connection_and_closes_it(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    import chainlang

    (tmp_path / "chainlang.toml").write_text(
        f'[decide]\nbase_url = "{endpoint.url}"\nmodel = "phi3"\napi_key_env = "{KEY_ENV}"\n')
    chain = tmp_path / "t.chain.yaml"
    chain.write_text("""
steps:
  - test.echo: {value: 1}
    decide: "only on a sunny day"
  - test.echo: {value: 2}
    decide: "only on a rainy day"
  - test.echo: {value: 3}
    decide: "only when it snows"
outputs: {last: "{test.echo.result}"}
""")
    endpoint.reply({"action": "continue", "params": {"value": 1}})
    endpoint.reply({"action": "skip"})
    endpoint.reply({"action": "continue", "params": {"value": 3}})
    result = chainlang.run(chain, tools=[RUN_TOOLS], transcript=tmp_path / "run.jsonl")
    assert result.status == "ok", result.error
    assert result.outputs == {"last": 3}
    ports = endpoint.ports()
    assert len(ports) == 3 and len(set(ports)) == 1  # kept alive between the steps
    _wait_for(lambda: ports[0] in endpoint.closed)  # and closed when the run ended


def test_a_model_that_never_answers_fails_the_step_within_the_timeout(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    import chainlang

    (tmp_path / "chainlang.toml").write_text(
        f'[decide]\nbase_url = "{endpoint.url}"\nmodel = "phi3"\napi_key_env = "{KEY_ENV}"\ntimeout = "500ms"\n')
    chain = tmp_path / "t.chain.yaml"
    chain.write_text("steps:\n  - test.echo: {value: 1}\n    decide: \"when the sky is blue\"\n")
    endpoint.replies.append(Reply(hang=True))
    transcript = tmp_path / "run.jsonl"
    result = chainlang.run(chain, tools=[RUN_TOOLS], transcript=transcript)
    # the step, not the whole call (imports and checks stretch on a busy machine), ended well
    # before the 30 s the server would hold it
    [step] = [r for r in _records(transcript) if r["type"] == "step_finished"]
    assert step["duration_ms"] < 15_000, step
    assert result.status == "failed" and result.error is not None
    message = result.error["message"]
    assert result.error["type"] == "decide", result.error
    assert "the decide model at http://127.0.0.1:" in message and "did not answer within 0.5s" in message
    assert KEY not in transcript.read_text() and KEY not in json.dumps(result.error)
