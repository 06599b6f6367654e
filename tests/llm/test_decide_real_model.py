"""The decide model ([decide] in chainlang.toml, LANGUAGE.md §5) against a real model:
SmolLM2-135M-Instruct served by llama.cpp on loopback (conftest.py), through the CLI.

The model is far too small to decide well, so these tests assert the plumbing, not the
answers: what the embedded decider cannot decide reaches the model; every answer the server
gives is a decision (it honours the decision's JSON Schema as response_format) or the
run says why not; the run ends with an outcome that is one of the documented ones, never a
traceback; resume reuses the recorded decision without asking again; a timeout and an
endpoint that is down end in the fallback, with a message that says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from llm_util import Proxy, cli, closed_port, records, run, the_decision, write_project

BOOK_SCHEMA = {"type": "object", "properties": {"room": {"type": "string"}, "people": {"type": "integer"}},
               "required": ["room", "people"]}


def setup(project: Path, decide: dict[str, str], chain: str) -> Path:
    """A project with the tools of llm_util, chainlang.toml's [decide] table, and the chain."""
    table = "".join(f'{key} = "{value}"\n' for key, value in decide.items())
    return write_project(project, f"[decide]\n{table}", chain)


def decide_table(model: Proxy, **extra: str) -> dict[str, str]:
    return {"base_url": model.url, "model": "smollm2-135m-instruct", **extra}


def assert_documented_outcome(proc: subprocess.CompletedProcess[str], recs: list[dict[str, Any]], step: str,
                              schema: dict[str, Any]) -> dict[str, Any]:
    """The run did what docs/reference/decide.md says its decision makes it do; returns the
    decision. continue: the event ran with params valid against `schema`, or the step failed
    with the schema errors; skip: the step is skipped and the chain went on; break: the run is
    broken (exit 0); fail (nothing could decide): the step failed with a `decide` error.
    `step` is the step's position ("1"), as transcripts name steps."""
    decision = the_decision(recs, step)
    finished = [r for r in recs if r["type"] == "step_finished" and r["step"] == step]
    end = recs[-1]
    assert end["type"] == "run_finished", end
    action = decision["action"]
    assert action in ("continue", "skip", "break", "fail"), decision
    assert decision["source"] in ("model", "fallback"), decision  # never the embedded decider here
    if action == "continue":
        assert decision["source"] == "model" and isinstance(decision["params"], dict)
        if finished[-1]["status"] == "ok":
            jsonschema.validate(decision["params"], schema)
        else:
            error = finished[-1]["error"]
            assert finished[-1]["status"] == "failed" and error["type"] == "params", finished[-1]
            assert "the params are invalid after the decision" in error["message"]
    elif action == "skip":
        assert finished[-1]["status"] == "skipped"
    elif action == "break":
        assert end["status"] == "broken" and proc.returncode == 0
    else:
        assert decision["source"] == "fallback"
        assert finished[-1]["status"] == "failed" and finished[-1]["error"]["type"] == "decide"
        assert "the decide model" in finished[-1]["error"]["message"]
    # a failed step fails the run unless its on_error says otherwise; the exit status says which
    assert end["status"] in ("ok", "failed", "broken")
    assert proc.returncode == (0 if end["status"] in ("ok", "broken") else 1), proc.stderr
    return decision


def assert_answers_are_decisions(model: Proxy, decision: dict[str, Any]) -> None:
    """The server constrained each answer to the schema it was sent (response_format: the
    action alone for a condition on valid params, params typed by the event's schema for a
    repair); an answer cut at the token limit is the only other kind, and then the run fell back."""
    for call in model.chat_calls(model.test):
        assert call.status == 200, call.answer
        assert call.request["response_format"]["type"] == "json_schema"
        finish = call.answer["choices"][0]["finish_reason"]
        if finish == "length":
            assert decision["source"] == "fallback", decision
            continue
        answer = json.loads(call.content)
        jsonschema.validate(answer, call.request["response_format"]["json_schema"]["schema"])
        assert decision["source"] == "model" and decision["action"] == answer["action"], (decision, answer)


# -- (a) params the embedded decider cannot repair ------------------------------------------------


def test_params_the_embedded_decider_cannot_repair_go_to_the_model(model: Proxy, project: Path) -> None:
    setup(project, decide_table(model), """
inputs:
  room: {type: [string, "null"], default: null, description: the room, when the user named one}
steps:
  - room.book: {room: "{inputs.room}", people: 4}
outputs: {booked: "{room.book}"}
""")
    proc, recs, seconds = run(project)
    calls = model.chat_calls(model.test)
    assert len(calls) == 1  # the embedded decider could not fill a required text: the model was asked
    asked = json.dumps(calls[0].request)
    assert "room: None is not of type 'string'" in asked and "Book a meeting room" in asked
    decision = assert_documented_outcome(proc, recs, "1", BOOK_SCHEMA)
    assert decision["asked"]["errors"] == ["room: None is not of type 'string'"]
    assert_answers_are_decisions(model, decision)
    print(f"\n[run] {model.test}: {decision['action']} from {decision['source']}; run {seconds:.2f}s")


def test_text_where_a_number_is_wanted_goes_to_the_model(model: Proxy, project: Path) -> None:
    setup(project, decide_table(model), """
inputs:
  how_many: {type: string, description: how many people, as the user typed it}
steps:
  - room.book: {room: Blue, people: "{inputs.how_many}"}
outputs: {booked: "{room.book}"}
""")
    proc, recs, seconds = run(project, "--input", "how_many=a dozen")
    assert len(model.chat_calls(model.test)) == 1  # "a dozen" is no number the embedded decider can read
    decision = assert_documented_outcome(proc, recs, "1", BOOK_SCHEMA)
    assert decision["asked"]["params"] == {"room": "Blue", "people": "a dozen"}
    assert_answers_are_decisions(model, decision)
    print(f"\n[run] {model.test}: {decision['action']} from {decision['source']}; run {seconds:.2f}s")


# -- (b) a condition in plain language ------------------------------------------------------


CONDITION_CHAIN = """
inputs:
  message: {type: string}
steps:
  - id: judged
    event: note.keep
    params: {text: "{inputs.message}"}
    decide: only if the message is about money
    on_error: continue
  - wait.pause: {ms: PAUSE}
outputs: {kept: "{judged}", waited: "{wait.pause}"}
"""
NOTE_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def test_a_condition_in_plain_language_goes_to_the_model(model: Proxy, project: Path) -> None:
    setup(project, decide_table(model), CONDITION_CHAIN.replace("PAUSE", "1"))
    proc, recs, seconds = run(project, "--input", "message=Sarah asks about the Q1 budget")
    calls = model.chat_calls(model.test)
    assert len(calls) == 1
    assert "only if the message is about money" in json.dumps(calls[0].request)
    decision = assert_documented_outcome(proc, recs, "1", NOTE_SCHEMA)
    assert decision["asked"]["condition"] == "only if the message is about money"
    assert_answers_are_decisions(model, decision)
    if decision["action"] in ("continue", "skip"):  # the chain went on to the next step
        assert json.loads(proc.stdout)["waited"] == 1
    print(f"\n[run] {model.test}: {decision['action']} from {decision['source']}; run {seconds:.2f}s")


# -- (c) resume reuses the recorded decision ------------------------------------------------


def test_resume_reuses_the_recorded_decision_and_asks_nothing(model: Proxy, project: Path) -> None:
    """SIGKILL while the step after the decision runs, then `chainlang resume`: the model is not
    asked again, and the resumed run takes the recorded decision's path."""
    setup(project, decide_table(model), CONDITION_CHAIN.replace("PAUSE", "4000"))
    transcript = project / "run.jsonl"
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.Popen([sys.executable, "-m", "chainlang.cli", "run", "t.chain.yaml", "--transcript", "run.jsonl",
                             "--input", "message=Invoice 42 is overdue: please pay 300 EUR", "--progress", "quiet"],
                            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            recs = records(transcript) if transcript.exists() else []
            if any(r["type"] == "step_started" and r["event"] == "wait.pause" for r in recs):
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    recs = records(transcript)
    decision = the_decision(recs, "1")
    if decision["action"] == "break":
        # the run ended at the decision before the pause: nothing to kill; a crash right after
        # the decision is then made by cutting the transcript there, as the other resume tests do
        from tests.journal_util import cut_after

        cut_after(transcript, lambda r: r["type"] == "decide")
    else:
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
        assert recs[-1]["type"] != "run_finished"
    asked = len(model.chat_calls(model.test))
    assert asked == 1

    resumed = cli(project, "resume", "run.jsonl", "--json", "--progress", "plain")
    assert len(model.chat_calls(model.test)) == asked  # the recorded decision, no new request
    after = records(transcript)
    assert after[-1]["type"] == "run_finished", after[-1]
    assert [r for r in after if r["type"] == "decide"] == [decision]  # not decided again
    if decision["action"] == "break":
        assert after[-1]["status"] == "broken" and resumed.returncode == 0
    else:
        assert after[-1]["status"] == "ok" and resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["waited"] == 4000
    print(f"\n[run] {model.test}: {decision['action']} from {decision['source']}, resumed without asking")


# -- (d) a timeout, and the fallback ----------------------------------------------------------


def test_a_model_slower_than_the_timeout_gives_the_fallback(model: Proxy, project: Path) -> None:
    setup(project, decide_table(model, timeout="50ms", fallback="skip"), CONDITION_CHAIN.replace("PAUSE", "1"))
    proc, recs, seconds = run(project, "--input", "message=Sarah asks about the Q1 budget")
    assert proc.returncode == 0, proc.stderr
    decision = the_decision(recs, "1")
    assert decision["action"] == "skip" and decision["source"] == "fallback", decision
    assert "did not answer within 0.05s" in decision["reason"], decision["reason"]
    assert recs[-1]["status"] == "ok" and json.loads(proc.stdout) == {"kept": None, "waited": 1}
    assert seconds < 15  # the model's answer (a second or more) was not waited for
    model.wait_idle()  # the server finishes the abandoned answer before the next test
    print(f"\n[run] {model.test}: skip from the fallback after 50ms; run {seconds:.2f}s")


def test_a_model_slower_than_the_timeout_fails_the_step_by_default(model: Proxy, project: Path) -> None:
    setup(project, decide_table(model, timeout="50ms"), """
steps:
  - note.keep: {text: hello}
    decide: only if the message is about money
""")
    proc, recs, _ = run(project)
    assert proc.returncode == 1
    error = recs[-1]["error"]
    assert error["type"] == "decide" and "did not answer within 0.05s" in error["message"], error
    assert "run failed: note.keep: neither the embedded decider nor the decide model could decide" in proc.stderr


# -- (e) an endpoint that is down ------------------------------------------------------------


def test_an_endpoint_that_is_down_is_a_clear_error(project: Path) -> None:
    port = closed_port()
    setup(project, {"base_url": f"http://127.0.0.1:{port}/v1", "model": "smollm2-135m-instruct"}, """
steps:
  - note.keep: {text: hello}
    decide: only if the message is about money
""")
    proc, recs, seconds = run(project)
    assert proc.returncode == 1
    error = recs[-1]["error"]
    assert error["type"] == "decide"
    assert f"cannot reach the decide model at http://127.0.0.1:{port}/v1/chat/completions" in error["message"]
    assert "(3 tries)" in error["message"]  # refused connections are retried, twice
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run failed: note.keep: neither the embedded decider nor the decide model could decide")
    assert seconds < 15


def test_an_endpoint_that_is_down_with_fallback_break(project: Path) -> None:
    setup(project, {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "model": "m", "fallback": "break"}, """
steps:
  - note.keep: {text: hello}
    decide: only if the message is about money
  - note.keep: {text: never}
""")
    proc, recs, _ = run(project)
    assert proc.returncode == 0 and recs[-1]["status"] == "broken"
    decision = the_decision(recs, "1")
    assert decision["action"] == "break" and decision["source"] == "fallback"
    assert "cannot reach the decide model" in decision["reason"]
    assert not [r for r in recs if r["type"] == "step_started" and r["step"] == "2"]


# -- each of the three answers, end to end ------------------------------------------------------


ANSWERS = {
    "continue": '{"action": "continue", "params": {"room": "Blue", "people": 12}}',
    "skip": '{"action": "skip"}',
    "break": '{"action": "break"}',
}


@pytest.mark.parametrize("action", list(ANSWERS))
def test_each_answer_of_the_model_takes_effect(model: Proxy, project: Path, action: str) -> None:
    """The project's prompts (prompts/decide.*.j2 replace chainlang's) have the model copy a
    known decision (greedy decoding copies a short text exactly with the repeat penalty off),
    so that each documented path is taken through the real server every time: continue runs
    the event with the model's params, skip skips the step, break stops the chain."""
    (project / "prompts").mkdir()
    (project / "prompts" / "decide.system.j2").write_text("Answer with JSON only.\n", encoding="utf-8")
    (project / "prompts" / "decide.user.j2").write_text(f"Say exactly: {ANSWERS[action]}\n", encoding="utf-8")
    model.sampling = {"repeat_penalty": 1.0}
    setup(project, decide_table(model), """
inputs:
  how_many: {type: string, description: how many people, as the user typed it}
steps:
  - room.book: {room: Blue, people: "{inputs.how_many}"}
  - note.keep: {text: after}
outputs: {booked: "{room.book}", after: "{note.keep}"}
""")
    proc, recs, seconds = run(project, "--input", "how_many=a dozen")
    assert [json.loads(c.content) for c in model.chat_calls(model.test)] == [json.loads(ANSWERS[action])]
    decision = assert_documented_outcome(proc, recs, "1", BOOK_SCHEMA)
    assert (decision["action"], decision["source"]) == (action, "model")
    outputs = json.loads(proc.stdout)
    if action == "continue":
        assert outputs == {"booked": {"room": "Blue", "people": 12}, "after": {"kept": "after"}}
    elif action == "skip":
        assert outputs == {"booked": None, "after": {"kept": "after"}} and recs[-1]["status"] == "ok"
    else:
        assert recs[-1]["status"] == "broken" and proc.returncode == 0
        assert not [r for r in recs if r["type"] == "step_started" and r["step"] == "2"]
    print(f"\n[run] {model.test}: {action} as told; run {seconds:.2f}s")
