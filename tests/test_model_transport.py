"""The transport side of model requests (issue 25): an answer cut at a length limit is reported
as cut (finish_reason: length), recorded and budgeted; a request that would not fit a tier's
`context` is refused before it is sent; `structured` chooses what is asked of the endpoint;
a schema the endpoints' grammar converters refuse is simplified and the simplification
recorded. Through the CLI against a fake OpenAI-compatible server on loopback, and through
the run's model service (chainlang.runtime.models) where the CLI has no path to a schema."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import clean_env, cli

NOW = "2026-11-23T10:00:00+00:00"
TOOLS = textwrap.dedent("""\
    from chainlang import event


    @event("t.echo")
    def echo(value: object = None) -> dict:
        return {"value": value}
""")


@dataclass
class Reply:
    content: str = ""
    finish_reason: str | None = "stop"
    usage: dict[str, int] | None = None


@dataclass
class Endpoint:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def toml(self, tier: str = "fast", **extra: Any) -> str:
        lines = [f"[models.{tier}]", f'base_url = "{self.url}"', 'model = "m"', 'timeout = "20s"']
        lines += [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in extra.items()]
        return "\n".join(lines) + "\n"


@pytest.fixture()
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            state.requests.append(body)
            reply = state.replies.pop(0) if state.replies else Reply('{"error": "no reply queued"}')
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": reply.content}}
            if reply.finish_reason is not None:
                choice["finish_reason"] = reply.finish_reason
            payload: dict[str, Any] = {"id": "x", "object": "chat.completion", "choices": [choice]}
            if reply.usage is not None:
                payload["usage"] = reply.usage
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def project(tmp_path: Path, toml: str, chain: str) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tt.py"]\n' + toml, encoding="utf-8")
    (tmp_path / "c.chain.yaml").write_text(textwrap.dedent(chain), encoding="utf-8")
    return tmp_path


def run(path: Path, code: int) -> str:
    proc = cli(path, "run", "c.chain.yaml", "--now", NOW, "--json", "--progress", "quiet", "--transcript",
               "run.jsonl", env=clean_env())
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = (path / "run.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


def step_error(path: Path, step: str) -> str:
    done = {r["step"]: r for r in records(path, "step_finished")}
    return str(done[step]["error"]["message"])


CHAIN_STEP = """\
steps:
  - agent.chain: {plan: "1. Echo the word hello (t.echo)."}
"""


# -- finish_reason: length ---------------------------------------------------------------------


def test_an_answer_cut_at_max_tokens_is_reported_as_cut_recorded_and_counted(tmp_path: Path,
                                                                              endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(max_tokens=256), CHAIN_STEP)
    cut = '{"chain": [{"t.echo": {"value": "hel'
    endpoint.replies.append(Reply(cut, "length", {"prompt_tokens": 700, "completion_tokens": 256}))
    out = run(path, 1)
    message = step_error(path, "1")
    assert "the fast model's answer was cut at max_tokens = 256 (finish_reason: length); raise max_tokens in " \
           "[models.fast] or shorten the prompt" in message, message
    assert "not JSON" not in message and "not JSON" not in out
    [call] = records(path, "model_call")
    assert call["finish_reason"] == "length"
    assert call["answer"] == cut
    assert call["usage"] == {"prompt_tokens": 700, "completion_tokens": 256}


def test_a_cut_answer_s_tokens_count_against_the_budget(tmp_path: Path, endpoint: Endpoint) -> None:
    chain = """\
    limits: {max_tokens: 20000}
    steps:
      - agent.chain: {plan: "1. Echo the word hello (t.echo)."}
        on_error: continue
      - agent.chain: {plan: "1. Echo the word hello (t.echo)."}
    """
    path = project(tmp_path, endpoint.toml(max_tokens=100), chain)
    endpoint.replies.append(Reply('{"chain": [', "length", {"prompt_tokens": 20000, "completion_tokens": 100}))
    out = run(path, 3)  # whatever the prompt's size, the second call does not fit
    assert "with 20100 used" in out, out
    assert len(endpoint.requests) == 1
    assert "cut at max_tokens = 100" in step_error(path, "1")


def test_a_cut_answer_stopped_short_of_max_tokens_names_the_context(tmp_path: Path, endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(max_tokens=1024), CHAIN_STEP)
    endpoint.replies.append(Reply('{"chain": [', "length", {"prompt_tokens": 3900, "completion_tokens": 196}))
    run(path, 1)
    message = step_error(path, "1")
    assert "cut after 196 tokens, before max_tokens = 1,024: the endpoint's context was the limit (the prompt " \
           "took 3,900 tokens)" in message, message
    assert "set [models.fast] context" in message


def test_a_cut_answer_whose_json_is_whole_is_used(tmp_path: Path, endpoint: Endpoint) -> None:
    # a model that pads a finished answer with whitespace until max_tokens
    path = project(tmp_path, endpoint.toml(max_tokens=64), CHAIN_STEP)
    endpoint.replies.append(Reply('{"chain": [{"t.echo": {"value": "hello"}}]}' + "\n" * 40, "length",
                                  {"prompt_tokens": 500, "completion_tokens": 64}))
    run(path, 0)
    assert [r["status"] for r in records(path, "step_finished") if r["step"] == "1"] == ["ok"]
    assert records(path, "model_call")[0]["finish_reason"] == "length"


def test_an_answer_that_ended_says_stop_and_a_silent_endpoint_records_nothing(tmp_path: Path,
                                                                                endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(), CHAIN_STEP)
    endpoint.replies.append(Reply('{"chain": [{"t.echo": {"value": "a"}}]}', "stop"))
    run(path, 0)
    assert records(path, "model_call")[0]["finish_reason"] == "stop"
    (path / "run.jsonl").unlink()
    endpoint.replies.append(Reply('{"chain": [{"t.echo": {"value": "a"}}]}', None))
    run(path, 0)
    assert "finish_reason" not in records(path, "model_call")[0]


# -- context ----------------------------------------------------------------------------------


def test_a_request_that_would_not_fit_the_context_is_refused_before_it_is_sent(tmp_path: Path,
                                                                                endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(max_tokens=256, context=512), CHAIN_STEP)
    run(path, 1)
    message = step_error(path, "1")
    assert message.startswith("agent.chain: the chain request is about "), message
    assert "tokens and max_tokens is 256: more than [models.fast] context = 512; it was not sent" in message
    assert endpoint.requests == []  # the server saw nothing
    assert records(path, "model_call") == []  # nothing recorded, nothing charged


def test_a_request_that_fits_the_context_is_sent(tmp_path: Path, endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(max_tokens=256, context=8192), CHAIN_STEP)
    endpoint.replies.append(Reply('{"chain": [{"t.echo": {"value": "a"}}]}'))
    run(path, 0)
    assert len(endpoint.requests) == 1


def test_max_tokens_must_leave_room_in_the_context(tmp_path: Path, endpoint: Endpoint) -> None:
    path = project(tmp_path, endpoint.toml(max_tokens=4096, context=4096), CHAIN_STEP)
    out = run(path, 2)
    assert "max_tokens = 4096 leaves no room for the prompt in context = 4096" in out, out


def test_the_prompt_estimate_is_close_to_a_bpe_tokenizer_s_count() -> None:
    from chainlang.llm.tiers import ModelRequest, estimate_prompt_tokens

    # counts by SmolLM2's tokenizer (llama.cpp's /tokenize), the chat template's markers aside
    prose = "Summarize yesterday's team meeting and send the notes to Alice, then book a room. "
    data = json.dumps({"meetings": [{"title": "Standup", "at": "2026-11-27T09:00:00Z", "people": ["ann", "bob"]}]})
    for text, real in ((prose, 18), (data, 39)):
        estimate = estimate_prompt_tokens(ModelRequest("t", [{"role": "user", "content": text}])) - 7
        assert 0.8 * real <= estimate <= 1.2 * real, (text, estimate, real)


# -- structured modes and schemas ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "none"])
def test_structured_chooses_what_is_asked_of_the_endpoint(tmp_path: Path, endpoint: Endpoint, mode: str) -> None:
    path = project(tmp_path, endpoint.toml(structured=mode), CHAIN_STEP)
    endpoint.replies.append(Reply('{"chain": [{"t.echo": {"value": "a"}}]}'))
    run(path, 0)
    [body] = endpoint.requests
    if mode == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "chain"
        assert body["response_format"]["json_schema"]["schema"]["required"] == ["chain"]
    elif mode == "json_object":
        assert body["response_format"] == {"type": "json_object"}
    else:
        assert "response_format" not in body


class _Run:
    """What the model service needs of a run: a replay (none) and where records go."""

    def __init__(self, replay: Any = None) -> None:
        self.replay = replay
        self.records: list[Any] = []

    def record(self, rec: Any) -> None:
        self.records.append(rec)


def _service(endpoint: Endpoint, run: _Run, **table: Any) -> Any:
    from chainlang.config.model import ModelTierConfig
    from chainlang.llm.client import HttpPool
    from chainlang.llm.tiers import ModelTiers, _tier
    from chainlang.runtime.models import Budget, ModelService

    config = ModelTierConfig(base_url=endpoint.url, model="m", **table)
    tiers = ModelTiers({"fast": _tier("fast", config, Path("."), HttpPool(), "the fast model")})
    return ModelService(run, tiers, Budget())  # type: ignore[arg-type]


SCHEMA = {"type": "object", "properties": {
    "to": {"type": "string", "format": "email"},
    "at": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
    "required": ["to"], "additionalProperties": False}


def test_a_schema_the_grammar_converters_refuse_is_simplified_and_the_record_says_so(endpoint: Endpoint) -> None:
    from chainlang.llm.tiers import ModelRequest

    run = _Run()
    service = _service(endpoint, run)
    endpoint.replies.append(Reply('{"to": "a@b.c"}'))
    request = ModelRequest("ask", [{"role": "user", "content": "who?"}], SCHEMA, "answer")
    answer = asyncio.run(service.ask("1", "model.ask", "fast", request))
    assert answer.text == '{"to": "a@b.c"}'
    sent = endpoint.requests[0]["response_format"]["json_schema"]["schema"]
    assert sent["properties"]["to"] == {"type": "string"}
    assert sent["properties"]["at"] == {"type": "string", "format": "date-time"}  # a format grammars know
    assert sent["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert SCHEMA["properties"]["to"]["format"] == "email"  # type: ignore[index]  # the caller's is untouched
    [call] = run.records
    assert call.request["schema_simplified"] == ["dropped format: email at /properties/to",
                                                 "dropped uniqueItems at /properties/tags"]


def test_simplify_keeps_what_endpoints_take_and_bounds_the_size() -> None:
    from chainlang.llm.schema_fit import MAX_SCHEMA_CHARS, simplify

    plain = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                                              "b": {"oneOf": [{"const": 1}, {"const": 2}]},
                                              "c": {"$ref": "#/$defs/c"}},
             "$defs": {"c": {"type": "integer", "minimum": 0}}, "required": ["a"]}
    assert simplify(plain) == (plain, [])
    odd = {"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^(?!x).*$"},
        "r": {"$ref": "https://example.com/s.json"},
        "e": {"enum": [f"v{i}" for i in range(1000)]}},
        "patternProperties": {"^x-": {"type": "string"}}, "if": {"required": ["p"]}, "then": {"required": ["r"]}}
    fitted, notes = simplify(odd)
    assert fitted == {"type": "object", "properties": {"p": {"type": "string"}, "r": {}, "e": {"type": "string"}}}
    assert notes == ["dropped a pattern with look-around or a back-reference at /properties/p",
                     "sent a remote $ref (https://example.com/s.json) as any value at /properties/r",
                     "sent an enum of 1,000 values as string at /properties/e",
                     "dropped patternProperties at /", "dropped if at /", "dropped then at /"]
    big = {"type": "object", "properties": {f"p{i}": {"type": "object", "description": "x" * 200, "properties": {
        "q": {"type": "object", "properties": {"r": {"type": "string", "description": "y" * 100}}}}}
        for i in range(600)}}
    fitted, notes = simplify(big)
    assert len(json.dumps(fitted, separators=(",", ":"))) <= MAX_SCHEMA_CHARS
    assert notes[0].startswith("dropped titles and descriptions (the schema is over 32,000 characters)")
    assert any("as any value" in n for n in notes[1:])


def test_a_recorded_cut_answer_fails_the_same_way_on_resume(endpoint: Endpoint) -> None:
    from chainlang.journal.records import ModelCall
    from chainlang.llm.tiers import ModelRequest
    from chainlang.runtime.models import ModelAnswerCut
    from chainlang.runtime.replay import Replay

    replay = Replay()
    replay.add_model_call(ModelCall("1", "fast", "m", "ask", {}, '{"to": "a@', {"prompt_tokens": 10,
                                                                               "completion_tokens": 50},
                                    1.0, finish_reason="length"))
    service = _service(endpoint, _Run(replay), max_tokens=50)
    request = ModelRequest("ask", [{"role": "user", "content": "who?"}], SCHEMA, "answer")
    with pytest.raises(ModelAnswerCut, match=r"cut at max_tokens = 50 \(finish_reason: length\)"):
        asyncio.run(service.ask("1", "model.ask", "fast", request))
    assert endpoint.requests == []  # given back, not asked again


def test_a_cut_decision_fails_the_step_saying_it_was_cut(tmp_path: Path, endpoint: Endpoint) -> None:
    chain = """\
    steps:
      - t.echo: {value: 1}
        decide: "only when the user asked politely"
    """
    path = project(tmp_path, endpoint.toml("light", max_tokens=32), chain)
    endpoint.replies.append(Reply('{"action": "contin', "length", {"prompt_tokens": 300, "completion_tokens": 32}))
    run(path, 1)
    message = step_error(path, "1")
    assert "the light model's answer was cut at max_tokens = 32 (finish_reason: length)" in message, message
    assert "not JSON" not in message
    [call] = records(path, "model_call")
    assert call["task"] == "decide" and call["finish_reason"] == "length"


def test_chat_which_needs_a_whole_answer_refuses_a_cut_one(endpoint: Endpoint) -> None:
    from chainlang.llm.client import ModelAnswerCut, ModelClient

    endpoint.replies.append(Reply('{"action": "sk', "length"))
    client = ModelClient(endpoint.url, label="the decide model")
    with pytest.raises(ModelAnswerCut, match=r"^the decide model's answer was cut by max_tokens = 8 or the "
                                             r"endpoint's length limit \(finish_reason: length\)$"):
        asyncio.run(client.chat({"model": "m", "messages": [], "max_tokens": 8}))
    endpoint.replies.append(Reply("", "length"))  # cut before it wrote anything: still a cut, not "empty"
    done = asyncio.run(client.complete({"model": "m", "messages": []}))
    assert (done.content, done.finish_reason) == ("", "length")
