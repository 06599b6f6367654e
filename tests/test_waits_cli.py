"""Waiting inside a run (LANGUAGE.md §15) through the CLI, on the embedded engine: `run
--detach` ending as waiting (exit 4), `chainlang waits list|show|cancel`, `emit` delivering
to the waiting runs, `resume` going on, a foreground run going on when another process
emits, user.ask's answers, timeouts, and the limits a wait does not spend."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.helpers import Spawned, cli, clean_env, records, show

APPROVE = """\
chain: mail.approve
inputs:
  draft: {type: string}
events:
  approval.given:
    payload:
      type: object
      properties:
        draft_id: {type: string}
        approved: {type: boolean}
      required: [draft_id, approved]
steps:
  - tools.now
  - wait:
      event: approval.given
      where: "draft_id == inputs.draft"
      timeout: 1d
    id: approval
  - tools.now
outputs:
  approved: "{approval.result.approved}"
"""

ASK = """\
chain: mail.ask
steps:
  - user.ask: {question: "Send the summary to the team?", choices: ["yes", "no"], timeout: 1d}
    id: send
  - tools.now
outputs:
  answer: "{send.result.answer}"
  by: "{send.result.by}"
  at: "{send.result.at}"
"""

TIMES_OUT = """\
chain: mail.late
events:
  approval.given:
    payload: {type: object, properties: {draft_id: {type: string}}}
steps:
  - wait: {event: approval.given, timeout: 1s, on_timeout: %s}
    id: approval
  - tools.now
outputs:
  got: "{approval.result}"
"""

# as many steps as max_steps allows, and a wait: waiting spends none
LIMITED = """\
chain: mail.limited
limits: {max_steps: 2%s}
events:
  approval.given:
    payload: {type: object, properties: {draft_id: {type: string}}, required: [draft_id]}
steps:
  - tools.now
  - wait: {event: approval.given, where: "draft_id == 'd-1'", timeout: 1h}
  - tools.now
"""

DEADLINE = 90  # seconds a condition of these tests may take to come true on a loaded machine


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    (tmp_path / "ask.chain.yaml").write_text(ASK, encoding="utf-8")
    return tmp_path


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Poll `condition` until it is true (its value), failing the test after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def waits(project: Path, *args: str) -> Any:
    """`chainlang waits ARGS --json`, decoded (it must end 0)."""
    proc = cli(project, "waits", *args, "--json")
    assert proc.returncode == 0, show(proc)
    return json.loads(proc.stdout)


def waiting_runs(project: Path) -> list[dict[str, Any]]:
    return list(waits(project, "list")["waits"])


def emit(project: Path, event: str, data: dict[str, Any], code: int = 0) -> Any:
    proc = cli(project, "emit", event, "--data", json.dumps(data))
    assert proc.returncode == code, show(proc)
    return proc


def detached(project: Path, chain: str, transcript: str, *inputs: str) -> list[dict[str, Any]]:
    """Run `chain` with --detach: it ends at its wait (exit 4, status waiting); its records."""
    args = [a for name in inputs for a in ("--input", name)]
    proc = cli(project, "run", chain, "--detach", "--transcript", transcript, *args)
    assert proc.returncode == 4, show(proc)
    recs = records(project / transcript)
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "waiting", recs[-1]
    return recs


def finished(project: Path, transcript: str) -> dict[str, Any]:
    return records(project / transcript)[-1]


def test_a_detached_run_is_listed_delivered_by_the_matching_event_and_resumed(project: Path) -> None:
    recs = detached(project, "approve.chain.yaml", "run.jsonl", "draft=d-42")
    run_id = recs[0]["run_id"]
    started = [r for r in recs if r["type"] == "wait_started"]
    assert [(r["step"], r["event"], r["values"]) for r in started] == [
        ("2", "approval.given", {"inputs.draft": "d-42"})]

    listed = waiting_runs(project)
    assert [(w["run_id"], w["step"], w["event"], w["where"], w["values"], w["status"]) for w in listed] == [
        (run_id, "2", "approval.given", "draft_id == inputs.draft", {"inputs.draft": "d-42"}, "waiting")]
    assert listed[0]["deadline"] == started[0]["deadline"] and listed[0]["chain"] == "mail.approve"
    text = cli(project, "waits")
    assert text.returncode == 0 and "waits for approval.given" in text.stdout, show(text)
    assert 'inputs.draft = "d-42"' in text.stdout and "draft_id == inputs.draft" in text.stdout

    other = emit(project, "approval.given", {"draft_id": "d-other", "approved": True})  # its where is false
    assert "delivered" not in other.stdout
    assert [w["status"] for w in waits(project, "list", "--status", "all")["waits"]] == ["waiting"]

    matching = emit(project, "approval.given", {"draft_id": "d-42", "approved": True})
    assert f"delivered to run {run_id} waiting at step 2" in matching.stdout, show(matching)
    shown = waits(project, "show", run_id)
    assert shown["status"] == "delivered" and shown["payload"] == {"draft_id": "d-42", "approved": True}
    assert shown["emit_id"] and shown["finished_at"] is None, shown  # the run has not recorded it yet
    assert waiting_runs(project) == []

    resumed = cli(project, "resume", "run.jsonl", "--json")
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"approved": True}
    recs = records(project / "run.jsonl")
    assert [r["status"] for r in recs if r["type"] == "wait_finished"] == ["ok"]
    assert [r["emit_id"] for r in recs if r["type"] == "wait_finished"] == [shown["emit_id"]]
    assert [r["step"] for r in recs if r["type"] == "step_finished"] == ["1", "3"]  # the step after the wait: once
    assert recs[-1]["status"] == "ok"
    assert waits(project, "show", "run.jsonl")["finished_at"] is not None  # RUN may be the transcript


def test_an_event_emitted_before_the_wait_began_does_not_count(project: Path) -> None:
    emit(project, "approval.given", {"draft_id": "d-early", "approved": True})
    recs = detached(project, "approve.chain.yaml", "run.jsonl", "draft=d-early")
    assert [(w["run_id"], w["status"]) for w in waiting_runs(project)] == [(recs[0]["run_id"], "waiting")]


def test_a_foreground_run_goes_on_when_another_process_emits(project: Path, spawned: Spawned) -> None:
    proc = spawned.start(project, "run", "approve.chain.yaml", "--input", "draft=d-7", "--transcript", "run.jsonl",
                         "--progress", "plain")
    wait_until(lambda: waiting_runs(project), "the run waits")
    emit(project, "approval.given", {"draft_id": "d-7", "approved": False})
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, show(proc, out, err)
    assert out == "approved: false\n"
    # the progress said what the run waited for, and how the wait ended
    assert "⧖ 2 waits for approval.given where draft_id == inputs.draft (inputs.draft = \"d-7\") until " in err, err
    assert "✓ 2 approval.given delivered by emit " in err, err
    recs = records(project / "run.jsonl")
    assert [r["step"] for r in recs if r["type"] == "step_finished"] == ["1", "3"]
    assert [r["type"] for r in recs].count("run_started") == 1  # the same process went on


def test_a_cancelled_wait_fails_its_step_with_type_cancelled(project: Path) -> None:
    recs = detached(project, "approve.chain.yaml", "run.jsonl", "draft=d-1")
    run_id = recs[0]["run_id"]
    cancelled = cli(project, "waits", "cancel", run_id)
    assert cancelled.returncode == 0, show(cancelled)
    assert f"cancelled the wait for approval.given of run {run_id} at step 2" in cancelled.stdout

    again = cli(project, "waits", "cancel", run_id, "2")  # settled: says how, exit 1
    assert again.returncode == 1, show(again)
    assert "is not waiting: cancelled at " in again.stderr and "nothing was cancelled" in again.stderr

    emit(project, "approval.given", {"draft_id": "d-1", "approved": True})  # too late: nothing to deliver to
    assert waits(project, "show", run_id)["status"] == "cancelled"

    resumed = cli(project, "resume", "run.jsonl")
    assert resumed.returncode == 1, show(resumed)
    end = finished(project, "run.jsonl")
    assert end["status"] == "failed" and end["error"]["type"] == "cancelled", end
    assert "⊘ 2 wait cancelled" in resumed.stderr, resumed.stderr
    assert [r["step"] for r in records(project / "run.jsonl") if r["type"] == "step_finished"] == ["1"]

    shown = cli(project, "waits", "show", run_id)
    assert shown.returncode == 0 and "[cancelled]" in shown.stdout and "the run has recorded it" in shown.stdout


@pytest.mark.parametrize(("args", "code", "message"), [
    (["show", "20990101T000000Z-0000000000"], 1, "run 20990101T000000Z-0000000000 has no wait"),
    (["cancel", "20990101T000000Z-0000000000", "7"], 1, "has no wait at step 7"),
    (["show"], 2, "chainlang waits show needs a RUN"),
    (["list", "some-run"], 2, "chainlang waits list takes no RUN"),
    (["cancel", "some-run", "--status", "all"], 2, "--status goes with list"),
    (["undo"], 2, "'undo' is not one of"),
])
def test_what_is_not_a_wait_is_said(project: Path, args: list[str], code: int, message: str) -> None:
    detached(project, "approve.chain.yaml", "run.jsonl", "draft=d-1")  # the project has a store
    proc = cli(project, "waits", *args)
    assert proc.returncode == code and message in proc.stderr, show(proc)
    assert proc.stdout == ""


def test_a_project_that_never_waited_has_no_waits(project: Path) -> None:
    listed = cli(project, "waits")
    assert listed.returncode == 0 and listed.stdout == "no run waits\n", show(listed)
    assert waits(project, "list") == {"waits": []}
    assert not (project / ".chainlang").exists()  # reading made no store
    shown = cli(project, "waits", "show", "some-run")
    assert shown.returncode == 1 and "run some-run has no wait" in shown.stderr, show(shown)


def test_a_question_refuses_an_answer_outside_its_choices_and_takes_a_valid_one(project: Path) -> None:
    detached(project, "ask.chain.yaml", "ask.jsonl")
    [wait] = waiting_runs(project)
    question = wait["question"]
    assert question["question"] == "Send the summary to the team?" and question["choices"] == ["yes", "no"]
    listed = cli(project, "waits")
    assert (f"answer: chainlang emit user.answered --data '{{\"question_id\": \"{question['id']}\", "
            "\"answer\": \"yes\"}'") in listed.stdout, show(listed)

    refused = emit(project, "user.answered", {"question_id": question["id"], "answer": "maybe"}, code=1)
    assert "not one of the choices" in refused.stderr
    assert [w["status"] for w in waiting_runs(project)] == ["waiting"]  # it keeps waiting

    emit(project, "user.answered", {"question_id": question["id"], "answer": "yes", "by": "ann"})
    resumed = cli(project, "resume", "ask.jsonl", "--json")
    assert resumed.returncode == 0, show(resumed)
    outputs = json.loads(resumed.stdout)
    assert outputs["answer"] == "yes" and outputs["by"] == "ann" and outputs["at"].endswith("Z"), outputs
    assert "✓ 1 wait delivered by emit " in resumed.stderr, resumed.stderr  # the answer, delivered while detached


@pytest.mark.parametrize(("on_timeout", "code", "status"), [("fail", 1, "failed"), ("continue", 0, "ok"),
                                                           ("break", 0, "broken")])
def test_a_wait_that_times_out_fails_continues_or_breaks(tmp_path: Path, on_timeout: str, code: int,
                                                         status: str) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "late.chain.yaml").write_text(TIMES_OUT % on_timeout, encoding="utf-8")
    proc = cli(tmp_path, "run", "late.chain.yaml", "--transcript", "run.jsonl", "--json")  # waits out its 1 s
    assert proc.returncode == code, show(proc)
    recs = records(tmp_path / "run.jsonl")
    assert [r["status"] for r in recs if r["type"] == "wait_finished"] == ["timed_out"]
    assert recs[-1]["status"] == status, recs[-1]
    ran_after = [r["step"] for r in recs if r["type"] == "step_finished"]
    if on_timeout == "fail":
        assert recs[-1]["error"]["type"] == "timeout" and ran_after == []
    elif on_timeout == "continue":
        assert json.loads(proc.stdout) == {"got": None} and ran_after == ["2"]
    else:
        assert ran_after == []
    assert "✗ 1 approval.given timed out" in proc.stderr, proc.stderr


def test_resuming_a_waiting_run_waits_in_the_foreground(project: Path, spawned: Spawned) -> None:
    detached(project, "approve.chain.yaml", "run.jsonl", "draft=d-9")
    again = cli(project, "resume", "run.jsonl", "--detach")  # still waiting: ends as waiting again
    assert again.returncode == 4, show(again)
    assert finished(project, "run.jsonl")["status"] == "waiting"
    assert "resumed at step" not in again.stderr  # the detached resume does not stay to wait

    proc = spawned.start(project, "resume", "run.jsonl", "--progress", "plain")

    def resumed_and_waiting() -> bool:  # the third run_started is this resume's
        text = (project / "run.jsonl").read_text(encoding="utf-8")
        return text.count('"type":"run_started"') == 3
    wait_until(resumed_and_waiting, "the resume began")
    emit(project, "approval.given", {"draft_id": "d-9", "approved": True})
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, show(proc, out, err)  # it waited for the event rather than ending as waiting
    assert "resumed at step 2, which waits for approval.given where draft_id == inputs.draft until " in err, err
    recs = records(project / "run.jsonl")
    assert recs[-1]["status"] == "ok"
    assert [r["step"] for r in recs if r["type"] == "step_finished"] == ["1", "3"]


def test_waiting_spends_no_step_of_max_steps(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "limited.chain.yaml").write_text(LIMITED % "", encoding="utf-8")
    detached(tmp_path, "limited.chain.yaml", "run.jsonl")
    emit(tmp_path, "approval.given", {"draft_id": "d-1"})
    resumed = cli(tmp_path, "resume", "run.jsonl")
    assert resumed.returncode == 0, show(resumed)
    assert finished(tmp_path, "run.jsonl")["status"] == "ok"


@pytest.mark.slow
def test_the_time_waited_does_not_count_against_limits_timeout(tmp_path: Path, spawned: Spawned) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "limited.chain.yaml").write_text(LIMITED % ", timeout: 2s", encoding="utf-8")
    proc = spawned.start(tmp_path, "run", "limited.chain.yaml", "--transcript", "run.jsonl")
    wait_until(lambda: waiting_runs(tmp_path), "the run waits")
    time.sleep(3.0)  # the point of the test: 3 s pass while it waits, more than its limits.timeout
    emit(tmp_path, "approval.given", {"draft_id": "d-1"})
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, show(proc, out, err)
    recs = records(tmp_path / "run.jsonl")
    assert recs[-1]["status"] == "ok", recs[-1]
    waited = [r for r in recs if r["type"] in ("wait_started", "wait_finished")]
    assert len(waited) == 2


def test_secret_looking_values_are_matched_whole_and_masked_when_shown(project: Path) -> None:
    """A frozen value that looks like a secret (an `sk-` key, a long random token such as a
    uuid's hex) must still match the event that names it: the store keeps it as it is (only
    the project's declared secrets are masked there), and `waits` masks it when showing it."""
    for n, token in enumerate(["sk-live0123456789abcdefXYZ", "d1f0a8c9e2b34f5a9c0d1e2f3a4b5c6d"]):
        detached(project, "approve.chain.yaml", f"run{n}.jsonl", f"draft={token}")
        emit(project, "approval.given", {"draft_id": token, "approved": True})
        resumed = cli(project, "resume", f"run{n}.jsonl", "--json", "--detach")  # delivered: it does not wait
        assert resumed.returncode == 0 and json.loads(resumed.stdout) == {"approved": True}, show(resumed)
    detached(project, "approve.chain.yaml", "run.jsonl", "draft=sk-live0123456789abcdefXYZ")
    for text in (cli(project, "waits").stdout, cli(project, "waits", "list", "--json").stdout):
        assert "sk-live" not in text and "***" in text, text
    delivered = waits(project, "list", "--status", "delivered")["waits"]
    assert [w["payload"]["draft_id"] for w in delivered] == ["***", "***"]


def test_a_declared_secret_never_shows(project: Path) -> None:
    (project / "chainlang.toml").write_text('chains = ["."]\n[secrets]\ncrm = {env = "CRM_TOKEN"}\n',
                                            encoding="utf-8")
    secret = "crm-secret-value-4711"
    env = clean_env(CRM_TOKEN=secret)
    ran = cli(project, "run", "approve.chain.yaml", "--detach", "--input", f"draft={secret}", env=env)
    assert ran.returncode == 4, show(ran)
    for args in (["waits"], ["waits", "--json"]):
        proc = cli(project, *args, env=env)
        assert proc.returncode == 0 and secret not in proc.stdout and "***" in proc.stdout, show(proc)
