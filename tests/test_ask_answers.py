"""Scripted answers to user.ask (LANGUAGE.md §15): `chainlang run|resume --answer ID=VALUE`.

The answer goes through the project's store as `chainlang emit user.answered` would: checked
against the question's choices or schema, delivered, recorded as the wait's wait_finished
(by = "--answer"), so that a resume replays it. Ids are checked before the run starts.
Through the CLI, in a project of its own under tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import cli, cli_here

ASK = """\
chain: mail.confirm
steps:
  - user.ask: {question: "Send the summary to the team?", choices: [yes, no], timeout: 1d}
    id: confirm
  - if: "confirm.result.answer == 'yes'"
    then:
      - user.notify: {message: "sending"}
outputs:
  answer: "{confirm.result.answer}"
  by: "{confirm.result.by}"
"""

# the choices are known only when it asks (an input): checked then, before it waits
CHOICES_FROM_INPUT = """\
chain: pick.colour
inputs:
  options: {type: array, default: [red, green]}
steps:
  - user.ask: {question: "Which colour?", choices: "{inputs.options}", timeout: 1h}
    id: colour
outputs:
  colour: "{colour.result.answer}"
"""

# an answer, then a wait for an event: a resume after the wait replays the answer
THEN_WAIT = """\
chain: ask.then.wait
events:
  go.on:
    payload: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
steps:
  - user.ask: {question: "How many?", schema: {type: integer, minimum: 1}, timeout: 1d}
    id: count
  - wait: {event: go.on, timeout: 1h}
    id: later
outputs:
  count: "{count.result.answer}"
  by: "{count.result.by}"
  n: "{later.result.n}"
"""

NO_ASK = """\
chain: notes.quiet
steps:
  - user.notify: {message: "nothing to ask"}
"""


def project(tmp_path: Path, **chains: str) -> Path:
    root = tmp_path / "p"
    root.mkdir(parents=True)
    (root / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    for name, text in chains.items():
        (root / f"{name}.chain.yaml").write_text(text, encoding="utf-8")
    return root


def records(transcript: Path, kind: str) -> list[dict[str, Any]]:
    lines = transcript.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


def transcripts(root: Path) -> list[Path]:
    runs = root / ".chainlang" / "runs"
    return sorted(runs.glob("*.jsonl")) if runs.is_dir() else []


def waits(root: Path) -> list[Any]:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        return store.list_waits(status=None)


def test_an_answer_on_the_command_line_is_delivered_and_recorded_as_any_answer(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK)
    ran = cli_here(root, "run", "ask.chain.yaml", "--answer", "confirm=yes", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"answer": "yes", "by": "--answer"}
    assert "sending" in ran.stderr  # the branch the answer chose ran
    [transcript] = transcripts(root)
    [started] = records(transcript, "wait_started")
    assert started["question"]["question"] == "Send the summary to the team?"
    [finished] = records(transcript, "wait_finished")
    assert finished["status"] == "ok"
    assert finished["payload"] == {"question_id": started["question"]["id"], "answer": "yes", "by": "--answer"}
    # in the store as an answer delivered by an emit: settled, and the run went on past it
    [row] = waits(root)
    assert (row.status, row.finished_at is not None, row.payload["answer"]) == ("delivered", True, "yes")


def test_an_answer_names_its_step_by_id_or_path_and_is_json_when_it_parses(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK, count=THEN_WAIT)
    by_path = cli_here(root, "run", "ask.chain.yaml", "--answer", "1=no", "--json")
    assert by_path.returncode == 0, by_path.stderr
    assert json.loads(by_path.stdout)["answer"] == "no"
    assert "sending" not in by_path.stderr
    # 3 is JSON: the integer the schema wants (the text "3" would be refused)
    counted = cli_here(root, "run", "count.chain.yaml", "--answer", "count=3", "--detach")
    assert counted.returncode == 4, counted.stderr  # then it waits for go.on
    [row] = [w for w in waits(root) if w.step == "1" and w.event == "user.answered" and w.payload
             and w.payload["answer"] == 3]
    assert row.status == "delivered"


def test_an_answer_outside_the_choices_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK)
    ran = cli_here(root, "run", "ask.chain.yaml", "--answer", "confirm=maybe")
    assert ran.returncode == 2
    assert 'not one of the choices of the user.ask confirm (line 3): "yes", "no"' in ran.stderr, ran.stderr
    assert transcripts(root) == []  # nothing ran, nothing written
    schema = project(tmp_path / "s", count=THEN_WAIT)
    # a schema is checked when it asks (like an emitted answer): the step fails before waiting
    refused = cli_here(schema, "run", "count.chain.yaml", "--answer", "count=0")
    assert refused.returncode == 1, refused.stderr
    assert "--answer count=0: the answer does not match the schema of question" in refused.stderr, refused.stderr


def test_an_answer_outside_choices_known_when_it_asks_fails_the_step_before_it_waits(tmp_path: Path) -> None:
    root = project(tmp_path, pick=CHOICES_FROM_INPUT)
    # without the check the run would wait an hour for another answer: cli_here() fails the test long before
    ran = cli_here(root, "run", "pick.chain.yaml", "--answer", "colour=blue")
    assert ran.returncode == 1
    assert "--answer colour=\"blue\": answer 'blue' is not one of the choices of question q-" in ran.stderr, ran.stderr
    [transcript] = transcripts(root)
    assert records(transcript, "wait_started") == []  # it never waited
    [failed] = records(transcript, "run_finished")
    assert (failed["status"], failed["error"]["type"]) == ("failed", "params")
    [row] = waits(root)
    assert (row.status, row.finished_at is not None) == ("cancelled", True)  # nothing left waiting in the store
    chosen = cli_here(root, "run", "pick.chain.yaml", "--answer", "colour=green", "--json")
    assert chosen.returncode == 0 and json.loads(chosen.stdout) == {"colour": "green"}, chosen.stderr


def test_an_answer_naming_no_user_ask_step_is_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK, quiet=NO_ASK)
    unknown = cli_here(root, "run", "ask.chain.yaml", "--answer", "confrim=yes")
    assert unknown.returncode == 2
    assert ("--answer confrim: no user.ask step with that id or path in chain mail.confirm (and the chains it "
            "calls); its user.ask steps: confirm") in unknown.stderr, unknown.stderr
    none = cli_here(root, "run", "quiet.chain.yaml", "--answer", "confirm=yes")
    assert none.returncode == 2 and "(it asks nothing)" in none.stderr, none.stderr
    shapeless = cli_here(root, "run", "ask.chain.yaml", "--answer", "yes")
    assert shapeless.returncode == 2 and "--answer 'yes': expected ID=VALUE" in shapeless.stderr, shapeless.stderr
    twice = cli_here(root, "run", "ask.chain.yaml", "--answer", "confirm=yes", "--answer", "confirm=no")
    assert twice.returncode == 2 and "--answer confirm is given twice" in twice.stderr, twice.stderr
    assert transcripts(root) == []


def test_a_resume_replays_the_recorded_answer_and_resume_answers_too(tmp_path: Path) -> None:
    root = project(tmp_path, count=THEN_WAIT)
    first = cli_here(root, "run", "count.chain.yaml", "--answer", "count=2", "--detach")
    assert first.returncode == 4, first.stderr
    assert "waits at step 2 for go.on" in first.stderr
    [transcript] = transcripts(root)
    emitted = cli_here(root, "emit", "go.on", "--data", '{"n": 7}')
    assert emitted.returncode == 0, emitted.stderr
    resumed = cli_here(root, "resume", str(transcript), "--json")  # no --answer: the transcript has it
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"count": 2, "by": "--answer", "n": 7}
    assert len(records(transcript, "wait_finished")) == 2  # the answer was not asked for again

    # a run that stopped at the question is answered by resume --answer
    second = project(tmp_path / "again", count=THEN_WAIT)
    asked = cli_here(second, "run", "count.chain.yaml", "--detach")
    assert asked.returncode == 4 and "question q-" in asked.stderr, asked.stderr
    [waiting] = transcripts(second)
    wrong = cli_here(second, "resume", str(waiting), "--answer", "later=1")
    assert wrong.returncode == 2 and "its user.ask steps: count" in wrong.stderr, wrong.stderr
    answered = cli_here(second, "resume", str(waiting), "--answer", "count=5", "--detach")
    assert answered.returncode == 4, answered.stderr  # answered; now it waits for go.on
    [asked_row] = [w for w in waits(second) if w.event == "user.answered"]
    assert (asked_row.status, asked_row.payload["answer"], asked_row.payload["by"]) == ("delivered", 5, "--answer")


PARENT = """\
chain: mail.send
steps:
  - mail.confirm: {}
    id: asked
outputs:
  answer: "{asked.result.answer}"
"""


def test_a_question_in_a_called_chain_is_answered_and_detaches_as_waiting(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK, parent=PARENT)
    # the id is looked for in the chains it calls too
    answered = cli_here(root, "run", "parent.chain.yaml", "--answer", "confirm=no", "--json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"answer": "no"}
    # unanswered, --detach ends the run as waiting at the sub-chain's step (it failed the calling step before)
    detached = cli_here(root, "run", "parent.chain.yaml", "--detach")
    assert detached.returncode == 4, detached.stderr
    assert "waits at step 1/1 for user.answered" in detached.stderr, detached.stderr
    waiting = [t for t in transcripts(root) if records(t, "run_finished")[-1]["status"] == "waiting"]
    resumed = cli_here(root, "resume", str(waiting[0]), "--answer", "confirm=yes", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"answer": "yes"}


def test_answer_is_refused_on_temporal_before_anything_runs(tmp_path: Path) -> None:
    root = project(tmp_path, ask=ASK)
    (root / "chainlang.toml").write_text('chains = ["."]\n[engine]\nkind = "temporal"\n', encoding="utf-8")
    ran = cli(root, "run", "ask.chain.yaml", "--answer", "confirm=yes")
    assert ran.returncode == 2
    assert "--answer works on the embedded engine" in ran.stderr, ran.stderr
    assert transcripts(root) == []
