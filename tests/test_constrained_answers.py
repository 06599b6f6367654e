"""Constrained answers and prompts that fit (LANGUAGE.md §13, issue 25): the JSON Schema sent
with agent.chain's request enumerates exactly the events the caller may call, each with its
params beside it, parallel groups bounded and one level deep, as many steps as the plan has
(plus one); an answer in the seed's `{"event", "params"}` form runs (and the older `{NAME:
params}` form still does); agent.think's next event is one the allow lists let it plan with;
agent.chain adds the closing agent.think when the plan asks for an answer in a conversation,
and not when the calling chain thinks itself; a plain project's chain prompt fits a small
context. Through the CLI, with a fake OpenAI-compatible endpoint on loopback (the request
bodies it received are what is asserted) or the scripted provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.test_agents import (  # noqa: F401 (endpoint: the fixture)
    WITH_KEY, Endpoint, endpoint, finished, of_type, records, run, write)

TOOLS = '''\
from chainlang import event


@event("t.echo", description="Return the value", idempotent=True)
def echo(value: object = None) -> dict:
    return {"value": value}


@event("t.secret", description="A note that holds a password", idempotent=True)
def secret() -> dict:
    return {"note": "hidden"}


@event("calendar.check", description="Check the calendar for a day: its meetings", idempotent=True)
def check(date: str, query: str = "") -> dict:
    return {"date": date, "meetings": ["09:00 Standup"]}
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def configure(project: Path, endpoint: Endpoint) -> None:
    (project / "chainlang.toml").write_text('tools = ["tt.py"]\n' + endpoint.toml("fast"), encoding="utf-8")


def sent_schema(request: dict[str, Any]) -> dict[str, Any]:
    response_format = request["body"]["response_format"]
    assert response_format["type"] == "json_schema"
    return dict(response_format["json_schema"]["schema"])


def step_events(schema: dict[str, Any]) -> list[str]:
    steps = schema["definitions"]["step"]
    return [option["properties"]["event"]["const"] for option in steps.get("oneOf", [steps])]


# -- agent.chain's schema -----------------------------------------------------------------------

WRITTEN = """\
allow: ["tools.*", "t.echo", "calendar.*", "agent.chain"]
steps:
  - agent.chain: {plan: "1. Read the clock\\n2. Check the calendar for that day"}
outputs:
  chain: "{agent.chain.chain}"
  result: "{agent.chain.result.result}"
  appended: "{agent.chain.appended}"
"""


def test_the_chain_schema_lists_exactly_the_allowed_events_and_a_seed_form_answer_runs(
        project: Path, endpoint: Endpoint) -> None:
    configure(project, endpoint)
    endpoint.reply({"chain": [{"event": "tools.now", "params": {}},
                              {"event": "calendar.check", "params": {"date": "{tools.now.date}"}}]})
    proc = run(project, write(project, "w.chain.yaml", WRITTEN), env=WITH_KEY)
    # the seed's form, written as the chain file's own forms, ran
    assert json.loads(proc.stdout) == {
        "chain": ["tools.now", {"calendar.check": {"date": "{tools.now.date}"}}],
        "result": {"date": "2026-11-23", "meetings": ["09:00 Standup"]}, "appended": False}
    (request,) = endpoint.requests
    schema = sent_schema(request)
    allowed = {"tools.now", "tools.date_calc", "t.echo", "calendar.check"}
    # t.secret, user.notify, agent.think: not allowed; agent.chain: allowed, not offered to the translator
    assert sorted(step_events(schema)) == sorted(allowed)
    # the events the plan is about come first (a small model takes the first one listed)
    assert step_events(schema)[:2] == ["tools.now", "calendar.check"]
    chain = schema["properties"]["chain"]
    assert chain["minItems"] == 1 and chain["maxItems"] == 2  # the plan's two steps
    one, group = chain["items"]["anyOf"]
    assert one == {"$ref": "#/definitions/step"}
    assert group["type"] == "array" and group["maxItems"] <= 4 and group["items"] == {"$ref": "#/definitions/step"}
    check = next(s for s in schema["definitions"]["step"]["oneOf"]
                 if s["properties"]["event"]["const"] == "calendar.check")
    assert check["required"] == ["event", "params"]
    assert check["properties"]["params"]["required"] == ["date"]
    assert check["properties"]["params"]["additionalProperties"] is False
    # the schema is standard draft-7 and says what it should of answers
    validator = jsonschema.Draft7Validator(schema)
    validator.check_schema(schema)
    good = {"chain": [{"event": "tools.now"}, [{"event": "t.echo", "params": {"value": 1}},
                                                {"event": "calendar.check", "params": {"date": "{tools.now.date}"}}]]}
    assert not list(validator.iter_errors(good))
    refused = [
        {"chain": [{"event": "t.secret"}]},  # not allowed
        {"chain": [{"event": "calendar.check", "params": {}}]},  # its required param missing
        {"chain": [{"event": "calendar.check", "params": {"day": "2026-11-23", "date": "x"}}]},  # not its param
        {"chain": [[{"event": "tools.now"}, [{"event": "tools.now"}, {"event": "tools.now"}]]]},  # nested deeper
        {"chain": [{"event": "tools.now"}] * 4},  # more steps than the plan has, plus one
        {"chain": [[{"event": "tools.now"}] * 5]},  # a parallel group too wide
    ]
    for answer in refused:
        assert list(validator.iter_errors(answer)), answer
    # the prompt lists the same events as signatures, not JSON Schemas
    system = request["body"]["messages"][0]["content"]
    assert "- calendar.check(date: string, query?: string) - Check the calendar for a day: its meetings" in system
    assert "t.secret" not in system and "user.notify" not in system and '"properties"' not in system


def test_a_param_may_be_a_reference_and_an_answer_in_the_older_form_still_runs(project: Path,
                                                                                endpoint: Endpoint) -> None:
    configure(project, endpoint)
    endpoint.reply({"chain": ["tools.now", {"tools.date_calc": {"from": "{tools.now.result}", "add": "1 day",
                                                                "format": "date"}}]})
    proc = run(project, write(project, "w.chain.yaml", WRITTEN.replace("Check the calendar for that day",
                                                                        "Add one day")), env=WITH_KEY)
    assert json.loads(proc.stdout)["result"] == "2026-11-24"
    validator = jsonschema.Draft7Validator(sent_schema(endpoint.requests[0]))
    # an enum param (format) may be a reference instead; a free string may hold one anyway
    assert not list(validator.iter_errors({"chain": [{"event": "tools.date_calc", "params": {
        "from": "{tools.now.result}", "format": "{t.echo.value}"}}]}))
    assert list(validator.iter_errors({"chain": [{"event": "tools.date_calc", "params": {
        "from": "x", "format": "fortnight"}}]}))


# -- agent.think's schema -----------------------------------------------------------------------

THINKING = """\
allow: [ALLOW]
steps:
  - thread.match: {message: "what time is it"}
  - agent.think: {thread_id: "{thread.match.thread_id}"}
"""


@pytest.mark.parametrize("allow, next_events", [
    ('"tools.*", "thread.*", "agent.*"', ["agent.reply", "agent.chain"]),
    ('"tools.*", "thread.*", "agent.think"', ["agent.reply"]),
])
def test_agent_think_may_answer_only_with_what_it_may_plan_with(project: Path, endpoint: Endpoint, allow: str,
                                                                next_events: list[str]) -> None:
    configure(project, endpoint)
    endpoint.reply({"event": "agent.reply", "params": {"message": "It is ten."}})
    run(project, write(project, "t.chain.yaml", THINKING.replace("ALLOW", allow)), env=WITH_KEY)
    schema = sent_schema(endpoint.requests[0])
    assert [s["properties"]["event"]["const"] for s in schema["oneOf"]] == next_events
    for shape in schema["oneOf"]:
        params = shape["properties"]["params"]
        assert list(params["properties"].values()) == [{"type": "string"}] and params["additionalProperties"] is False
    system = endpoint.requests[0]["body"]["messages"][0]["content"]
    assert ('"agent.chain"' in system) == ("agent.chain" in next_events)


def test_a_plan_agent_think_may_not_make_is_refused(project: Path, endpoint: Endpoint) -> None:
    configure(project, endpoint)
    endpoint.reply({"event": "agent.chain", "params": {"plan": "1. Read the clock"}})
    chain = THINKING.replace("ALLOW", '"tools.*", "thread.*", "agent.think"') + "    on_error: continue\n"
    run(project, write(project, "t.chain.yaml", chain), env=WITH_KEY)
    error = finished(records(project))["2"]["error"]["message"]
    assert "answer does not match the schema it was given" in error, error


# -- the closing agent.think --------------------------------------------------------------------

RULES = """\
rules:
  - task: think
    when: '"weekday": "Monday"'
    answer: {event: agent.reply, params: {message: "It is Monday 23 November."}}
  - task: think
    answer: {event: agent.chain, params: {plan: "PLAN"}}
  - task: chain
    answer: {chain: [{event: tools.now}]}
"""

CONVERSATION = """\
steps:
  - thread.match: {message: "which day is it?"}
  - agent.think: {thread_id: "{thread.match.thread_id}"}
  - agent.chain: {plan: "{agent.think.result.params.plan}"}
outputs:
  chain: "{agent.chain.chain}"
  result: "{agent.chain.result.result}"
  appended: "{agent.chain.appended}"
"""

# a turn that thinks again itself after the chain (examples/assistant/turn.chain.yaml)
THINKS_ITSELF = CONVERSATION.replace("outputs:", """\
  - id: answer
    agent.think: {thread_id: "{thread.match.thread_id}"}
outputs:
  answer: "{answer.result.params.message}\"""")

ALONE = """\
steps:
  - agent.chain: {plan: "PLAN"}
outputs:
  chain: "{agent.chain.chain}"
  appended: "{agent.chain.appended}"
"""

CLOSING = {"agent.think": {"thread_id": "{run.thread}"}}
REPLY = {"event": "agent.reply", "params": {"message": "It is Monday 23 November."}}


def scripted(project: Path, plan: str) -> None:
    (project / "chainlang.toml").write_text('tools = ["tt.py"]\n\n[models.heavy]\nprovider = "scripted"\n'
                                            'rules = "answers.yaml"\n', encoding="utf-8")
    write(project, "answers.yaml", RULES.replace("PLAN", plan))


def test_a_conversation_s_chain_ends_with_the_closing_agent_think_when_the_plan_asks_for_an_answer(
        project: Path) -> None:
    scripted(project, "1. Read the clock\\n2. Tell the user the day")
    proc = run(project, write(project, "c.chain.yaml", CONVERSATION))
    assert json.loads(proc.stdout) == {"chain": ["tools.now", CLOSING], "result": REPLY, "appended": True}
    recs = records(project)
    assert [(c["step"], c["task"]) for c in of_type(recs, "model_call")] == [
        ("2", "think"), ("3", "chain"), ("3/2", "think")]
    done = finished(recs)
    assert done["3/2"]["event"] == "agent.think" and done["3/2"]["status"] == "ok"
    (asked,) = [c for c in of_type(recs, "model_call") if c["step"] == "3/2"]
    assert f'Thread {done["1"]["result"]["thread_id"]}.' in asked["request"]["messages"][1]["content"]


@pytest.mark.parametrize("chain, plan, calls", [
    # the calling chain thinks itself after its agent.chain step: not twice
    (THINKS_ITSELF, "1. Read the clock\\n2. Tell the user the day", ["think", "chain", "think"]),
    # the plan does not ask for an answer
    (CONVERSATION, "1. Read the clock\\n2. Add one day", ["think", "chain"]),
    # no conversation: the run is attached to no thread
    (ALONE, "1. Read the clock\\n2. Tell the user the day", ["chain"]),
])
def test_no_closing_agent_think_is_added_otherwise(project: Path, chain: str, plan: str, calls: list[str]) -> None:
    scripted(project, plan)
    proc = run(project, write(project, "c.chain.yaml", chain))
    out = json.loads(proc.stdout)
    assert out["chain"] == ["tools.now"] and out["appended"] is False
    assert [c["task"] for c in of_type(records(project), "model_call")] == calls


def test_a_chain_that_ends_with_agent_think_already_gets_no_other(project: Path) -> None:
    scripted(project, "1. Read the clock\\n2. Answer the user with the day")
    rules = (project / "answers.yaml").read_text(encoding="utf-8").replace(
        "{chain: [{event: tools.now}]}",
        '{chain: [{event: tools.now}, {event: agent.think, params: {thread_id: "{run.thread}"}}]}')
    (project / "answers.yaml").write_text(rules, encoding="utf-8")
    proc = run(project, write(project, "c.chain.yaml", CONVERSATION))
    assert json.loads(proc.stdout) == {"chain": ["tools.now", CLOSING], "result": REPLY, "appended": False}


# -- prompts that fit ---------------------------------------------------------------------------

PLAIN_TOOLS = '''\
from chainlang import event


@event("calendar.check", description="Check the calendar for a day", idempotent=True)
def check(date: str, query: str = "") -> dict:
    return {}


@event("email.search", description="Search the mailbox", idempotent=True)
def search(sender: str = "", subject: str = "", days: int = 7) -> dict:
    return {}


@event("notes.write", description="Write a note")
def write(title: str, text: str) -> dict:
    return {}
'''


def test_a_plain_project_s_chain_prompt_fits_a_small_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chainlang.llm.tiers import estimate_tokens
    from chainlang.registry.build import build_registry
    from chainlang.runtime.agent_chain import allowed_events, chain_request

    (tmp_path / "tools.py").write_text(PLAIN_TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    registry = build_registry(start_dir=tmp_path)
    allowed = allowed_events(registry, ())
    plan = "1. Get today's date\n2. Check the calendar for today\n3. Answer the user with the meetings"
    messages, schema = chain_request(registry, allowed, plan, tmp_path)
    tokens = estimate_tokens("\n".join(m["content"] for m in messages))
    assert tokens < 1_500, tokens
    # every event the chain may call is listed (a plain project has fewer than the bound), but
    # agent.chain: a translator is not offered to write a chain that writes a chain
    offered = sorted(set(allowed) - {"agent.chain"})
    assert "agent.chain" in allowed and sorted(step_events(schema)) == offered
    assert all(f"- {name}(" in messages[0]["content"] for name in offered)


def test_many_tools_are_bounded_and_the_ones_the_plan_names_stay(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from chainlang.llm.constrain import MAX_LISTED
    from chainlang.registry.build import build_registry
    from chainlang.runtime.agent_chain import allowed_events, chain_request

    tools = "from chainlang import event\n" + "".join(
        f'\n\n@event("zz.tool{n:02d}", description="Tool number {n}")\ndef tool{n}(x: int) -> dict:\n    return {{}}\n'
        for n in range(60))
    (tmp_path / "many.py").write_text(tools, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["many.py"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    registry = build_registry(start_dir=tmp_path)
    messages, schema = chain_request(registry, allowed_events(registry, ()), "1. Run zz.tool59 with x = 3", tmp_path)
    listed = step_events(schema)
    assert len(listed) == MAX_LISTED and listed[0] == "zz.tool59"
    assert messages[0]["content"].count("\n- ") == MAX_LISTED


def test_the_answer_s_steps_in_the_chain_file_s_forms() -> None:
    from chainlang.llm.constrain import from_answer

    assert from_answer([{"event": "tools.now"}, {"event": "tools.now", "params": {}},
                        {"event": "t.echo", "params": {"value": 1}},
                        [{"event": "tools.now"}, {"event": "t.echo", "params": {"value": 2}}],
                        {"event": "t.echo", "params": {"value": 3}, "id": "third"},
                        {"t.echo": {"value": 4}}, "tools.now"]) == [
        "tools.now", "tools.now", {"t.echo": {"value": 1}}, ["tools.now", {"t.echo": {"value": 2}}],
        {"event": "t.echo", "params": {"value": 3}, "id": "third"}, {"t.echo": {"value": 4}}, "tools.now"]
