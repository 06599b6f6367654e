"""What a decision may change (LANGUAGE.md §5, §13 "Answers are constrained"), end to end
through the CLI with the light tier on a fake OpenAI-compatible endpoint on loopback:

- a condition on params that are valid is asked for the action only (the response format
  has no params) and the step keeps its params, whatever params the model wrote;
- a repair (params that failed validation) is asked with the answer's params typed by the
  step's params schema, and the answer replaces only the params in error;
- agent.decide, a decision as a step of its own, does the same.

The finding: a real small model answered `continue` (right) to a plain-language condition
on valid params, with params copied from the schema, and the step failed "the params are
invalid after the decision"."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chainlang.runtime.decide import CONDITION_SCHEMA, DecideRequest, ModelDecider, validate_params
from chainlang.runtime.decide.keep import params_after
from tests.test_agents import KEY_ENV, WITH_KEY, Endpoint, endpoint, finished, of_type, records, run, write

__all__ = ["endpoint"]  # the fixture, imported

BOOK_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "room": {"type": "string", "minLength": 1, "description": "the room's name"},
        "people": {"type": "integer", "minimum": 1, "description": "how many people"},
        "note": {"type": "string", "description": "a note for the booking"},
    },
    "required": ["room", "people"],
    "additionalProperties": False,
}

TOOLS = f'''\
from chainlang import event

BOOK_PARAMS = {BOOK_PARAMS!r}


@event("t.book", description="Book a meeting room", params=BOOK_PARAMS, idempotent=True)
def book(room: str, people: int, note: str = "") -> dict:
    return {{"room": room, "people": people, "note": note}}
'''

# what SmolLM2 wrote for a condition it judged right: params copied from the schema
COPIED_FROM_THE_SCHEMA = {"room": {"type": "string"}, "people": {"type": "integer"}, "note": "the note"}


@pytest.fixture()
def project(tmp_path: Path, endpoint: Endpoint) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tt.py"]\n' + endpoint.toml("light"), encoding="utf-8")
    return tmp_path


def response_schema(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a recorded request asked its answer to match."""
    schema = request["body"]["response_format"]["json_schema"]["schema"]
    assert isinstance(schema, dict)
    return schema


def continue_branch(schema: dict[str, Any]) -> dict[str, Any]:
    (branch,) = [b for b in schema["anyOf"] if b["properties"]["action"].get("const") == "continue"]
    return branch  # type: ignore[no-any-return]


def decide_record(project: Path, step: str = "1") -> dict[str, Any]:
    (record,) = [r for r in of_type(records(project), "decide") if r["step"] == step]
    return record


# -- (a) a condition on valid params --------------------------------------------------------------


def test_a_continue_on_a_condition_keeps_valid_params_whatever_params_the_model_wrote(project: Path,
                                                                                   endpoint: Endpoint) -> None:
    endpoint.reply({"action": "continue", "params": COPIED_FROM_THE_SCHEMA})
    chain = write(project, "a.chain.yaml", """\
        steps:
          - t.book: {room: Blue, people: 4}
            decide: "only when the room is free this afternoon"
        outputs:
          booked: "{t.book.result}"
        """)
    proc = run(project, chain, env=WITH_KEY)
    assert json.loads(proc.stdout) == {"booked": {"room": "Blue", "people": 4, "note": ""}}
    record = decide_record(project)
    assert record["action"] == "continue" and record["source"] == "model"
    assert record["params"] == {"room": "Blue", "people": 4}
    assert "its params were ignored: the params were valid, only the condition was asked" in record["reason"]
    # the request asked for the action only: no params in the answer's schema
    (asked,) = endpoint.requests
    schema = response_schema(asked)
    assert schema == CONDITION_SCHEMA
    assert set(schema["properties"]) == {"action", "reason"} and schema["required"] == ["action"]
    system, user = asked["body"]["messages"]
    assert "Judge a step's condition" in system["content"] and '"params"' not in system["content"]
    assert user["content"].startswith("Task: judge the condition")
    assert "Params schema" not in user["content"] and "only when the room is free" in user["content"]


def test_skip_and_break_on_a_condition_are_unchanged(project: Path, endpoint: Endpoint) -> None:
    endpoint.reply({"action": "skip", "reason": "the room is taken"})
    endpoint.reply({"action": "break"})
    chain = write(project, "s.chain.yaml", """\
        steps:
          - t.book: {room: Blue, people: 4}
            decide: "only when the room is free"
          - t.book: {room: Red, people: 2}
            decide: "only when nobody booked yet"
          - t.book: {room: Green, people: 2}
        """)
    run(project, chain, env=WITH_KEY)
    done = finished(records(project))
    assert done["1"]["status"] == "skipped" and done["2"]["status"] == "skipped" and "3" not in done
    assert decide_record(project, "1")["reason"] == "the light model answered skip: the room is taken"
    assert of_type(records(project), "run_finished")[-1]["status"] == "broken"


# -- (b, c) a repair ------------------------------------------------------------------------------


def test_a_repair_is_asked_with_the_step_s_params_schema_and_replaces_only_what_was_invalid(
        project: Path, endpoint: Endpoint) -> None:
    # people is not a number the embedded decider can read: the model repairs it, and also
    # "repairs" room and note, which were valid: those stay as the step gave them
    endpoint.reply({"action": "continue", "params": {"room": "Red", "people": 6, "note": "changed"}})
    chain = write(project, "r.chain.yaml", """\
        inputs:
          people: {description: how many people, as the user wrote it}
        steps:
          - t.book: {room: Blue, people: "{inputs.people}", note: window seat}
        outputs:
          booked: "{t.book.result}"
        """)
    proc = run(project, chain, "--input", "people=six", env=WITH_KEY)
    assert json.loads(proc.stdout) == {"booked": {"room": "Blue", "people": 6, "note": "window seat"}}
    record = decide_record(project)
    assert record["params"] == {"room": "Blue", "people": 6, "note": "window seat"}
    assert "took people from the answer; kept room, note; ignored the answer's note, room" in record["reason"]
    (asked,) = endpoint.requests
    schema = response_schema(asked)
    assert continue_branch(schema)["properties"]["params"] == BOOK_PARAMS  # typed: constrained decoding
    assert continue_branch(schema)["required"] == ["action", "params"]
    assert sorted(b["properties"]["action"]["const"] for b in schema["anyOf"]) == ["break", "continue", "skip"]
    system, user = asked["body"]["messages"]
    assert "Repair a step's params" in system["content"]
    assert user["content"].startswith("Task: repair the params")
    assert "people: 'six' is not of type 'integer'" in user["content"]


def test_a_repair_fills_a_missing_param(project: Path, endpoint: Endpoint) -> None:
    endpoint.reply({"action": "continue", "params": {"room": "Red", "people": 3}})
    chain = write(project, "m.chain.yaml", """\
        steps:
          - t.book: {room: Blue}
            decide: "only on a weekday"
        outputs:
          booked: "{t.book.result}"
        """)
    proc = run(project, chain, env=WITH_KEY)
    assert json.loads(proc.stdout) == {"booked": {"room": "Blue", "people": 3, "note": ""}}
    record = decide_record(project)
    assert record["params"] == {"room": "Blue", "people": 3}
    # invalid params with a condition: a repair (the condition is in the prompt to judge too)
    (asked,) = endpoint.requests
    assert continue_branch(response_schema(asked))["properties"]["params"] == BOOK_PARAMS
    assert "only on a weekday" in asked["body"]["messages"][1]["content"]


def test_a_repair_that_is_still_invalid_fails_the_step_with_the_schema_errors(project: Path,
                                                                              endpoint: Endpoint) -> None:
    endpoint.reply({"action": "continue", "params": {"room": "Blue", "people": 0}})
    chain = write(project, "i.chain.yaml", "steps:\n  - t.book: {room: Blue}\n")
    run(project, chain, code=1, env=WITH_KEY)
    error = finished(records(project))["1"]["error"]
    assert error["type"] == "params"
    assert error["message"] == ("t.book: the params are invalid after the decision: "
                                "people: 0 is less than the minimum of 1")


# -- (d) agent.decide -----------------------------------------------------------------------------


def test_agent_decide_keeps_valid_params_on_a_condition_and_repairs_only_what_was_invalid(
        project: Path, endpoint: Endpoint) -> None:
    endpoint.reply({"action": "continue", "params": COPIED_FROM_THE_SCHEMA})
    endpoint.reply({"action": "continue", "params": {"room": "Red", "people": 5}})
    chain = write(project, "d.chain.yaml", """\
        inputs:
          people: {description: how many people, as the user wrote it}
        steps:
          - agent.decide: {event: t.book, params: {room: Blue, people: 4}, condition: "only if it is free"}
          - agent.decide:
              {event: t.book, params: {room: Blue, people: "{inputs.people}"}, condition: "only if it is free"}
        outputs:
          kept: "{agent.decide[0].result}"
          repaired: "{agent.decide[1].result}"
        """)
    proc = run(project, chain, "--input", "people=five", env=WITH_KEY)
    assert json.loads(proc.stdout) == {
        "kept": {"action": "continue", "params": {"room": "Blue", "people": 4}},
        "repaired": {"action": "continue", "params": {"room": "Blue", "people": 5}},
    }
    condition, repair = endpoint.requests
    assert response_schema(condition) == CONDITION_SCHEMA
    assert continue_branch(response_schema(repair))["properties"]["params"] == BOOK_PARAMS
    assert "people: 'five' is not of type 'integer'" in repair["body"]["messages"][1]["content"]


# -- the rules, and the model decider asked directly ----------------------------------------------


def request(params: dict[str, Any], condition: str | None = None,
            schema: dict[str, Any] = BOOK_PARAMS) -> DecideRequest:
    return DecideRequest("t.book", "Book a meeting room", schema, params, validate_params(schema, params), condition)


@pytest.mark.parametrize(("params", "answered", "expected"), [
    ({"room": "Blue", "people": 2}, {"room": "x", "people": 9}, {"room": "Blue", "people": 2}),  # a condition
    ({"room": "", "people": 2}, {"room": "Red", "people": 9}, {"room": "Red", "people": 2}),
    ({"room": "Blue", "people": 2, "size": "L"}, {"room": "Blue", "people": 2}, {"room": "Blue", "people": 2}),
    ({"people": 2}, {"people": 3}, {"people": 2}),  # the answer does not give room: still invalid
    ({"room": "Blue", "people": [2]}, {"room": "Red", "people": 2, "note": "n"}, {"room": "Blue", "people": 2}),
])
def test_params_after_a_continue(params: dict[str, Any], answered: dict[str, Any],
                                 expected: dict[str, Any]) -> None:
    assert params_after(request(params, "if free"), answered)[0] == expected


def test_an_error_about_the_params_as_a_whole_takes_the_answer_s_params() -> None:
    either = {"type": "object", "anyOf": [{"required": ["room"]}, {"required": ["desk"]}]}
    params, note = params_after(request({"floor": 2}, schema=either), {"desk": "D1"})
    assert params == {"desk": "D1"} and note == ""


def test_the_model_decider_asks_a_condition_for_the_action_only() -> None:
    decider = ModelDecider("http://127.0.0.1:9/v1", "m", KEY_ENV)
    condition = decider.request_body(request({"room": "Blue", "people": 2}, "if it is free"))
    assert condition["response_format"]["json_schema"]["schema"] == CONDITION_SCHEMA
    assert "Params schema" not in condition["messages"][1]["content"]
    repair = decider.request_body(request({"room": "Blue"}, "if it is free"))
    schema = repair["response_format"]["json_schema"]["schema"]
    assert continue_branch(schema)["properties"]["params"] == BOOK_PARAMS
    assert textwrap.dedent("""\
        Validation errors:
        - 'people' is a required property""") in repair["messages"][1]["content"]
