"""`agent.reply {message}` (LANGUAGE.md §13), end to end through the CLI: the answer a turn
gives the user is shown by `chainlang run` (in every progress mode), added to the run's
thread, and the output `reply` of a chain that ends with it and declares no outputs (also
when that chain is called as an event); a run on no thread replies all the same; the
message goes to the user, so a secret in it needs `expose:` (§16) and is masked when
exposed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here, show

NOW = "2026-11-23T10:00:00+00:00"
TOML = """\
chains = ["lib"]

[secrets]
crm_token = {env = "CRM_TOKEN"}

[models.heavy]
provider = "scripted"
rules = "answers.yaml"
"""
RULES = """\
rules:
  - task: think
    when: "what is on today"
    answer: {event: agent.reply, params: {message: "You have two meetings today.\\n\\nThe first is at 10:00."}}
"""
TURN = """\
inputs:
  thread_id: {type: string}
steps:
  - agent.think: {thread_id: "{inputs.thread_id}", prompt: "what is on today"}
  - agent.reply: {message: "{agent.think.result.params.message}"}
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "answers.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "lib").mkdir()
    made = cli_here(tmp_path, "threads", "create", "day-1", "--summary", "Planning the day")
    assert made.returncode == 0, show(made)
    return tmp_path


def write(project: Path, name: str, text: str) -> str:
    (project / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def thread_events(project: Path, thread: str) -> list[dict[str, Any]]:
    shown = cli_here(project, "threads", "show", thread, "--json")
    assert shown.returncode == 0, show(shown)
    return list(json.loads(shown.stdout)["events"])


def test_a_reply_is_shown_kept_on_the_thread_and_is_the_output(project: Path) -> None:
    name = write(project, "turn.chain.yaml", TURN)
    assert cli_here(project, "check", name).returncode == 0
    proc = cli_here(project, "run", name, "--input", "thread_id=day-1", "--json", "--progress", "plain", "--now", NOW)
    assert proc.returncode == 0, show(proc)
    message = "You have two meetings today.\n\nThe first is at 10:00."
    assert json.loads(proc.stdout) == {"reply": message}
    # shown under the step's line, one line per line of the message
    lines = proc.stderr.splitlines()
    at = lines.index("reply: You have two meetings today.")
    assert lines[at + 1:at + 3] == ["", "       The first is at 10:00."]
    assert lines[at + 3].startswith("✓ 2 agent.reply "), lines
    # kept on the thread the run is attached to, after the think step
    events = [(e["event"], e["result"]) for e in thread_events(project, "day-1")]
    assert events[-1] == ("agent.reply", {"message": message})
    assert events[-2][0] == "agent.think"


def test_a_run_on_no_thread_replies_all_the_same_even_when_quiet(project: Path) -> None:
    name = write(project, "hello.chain.yaml", """\
        steps:
          - tools.now: {}
          - agent.reply: {message: "It is {tools.now.weekday}."}
        """)
    proc = cli_here(project, "run", name, "--progress", "quiet", "--now", NOW)
    assert proc.returncode == 0, show(proc)
    assert 'reply: "It is Monday."' in proc.stdout.splitlines()  # the run's outputs
    assert "reply: It is Monday." in proc.stderr.splitlines()  # shown, even with no progress
    assert thread_events(project, "day-1") == []  # on no thread: kept nowhere


def test_only_a_chain_that_ends_with_a_reply_and_declares_no_outputs_gets_one(project: Path) -> None:
    write(project, "lib/answer.chain.yaml", """\
        chain: my.answer
        inputs:
          topic: {type: string}
        steps:
          - agent.reply: {message: "About {inputs.topic}: done."}
        """)
    caller = write(project, "caller.chain.yaml", """\
        steps:
          - my.answer: {topic: taxes}
          - agent.reply: {message: "ok"}
            if: "false"
          - id: after
            tools.now: {}
        outputs:
          called: "{my.answer.reply}"
        """)
    declared = write(project, "declared.chain.yaml", """\
        steps:
          - agent.reply: {message: "hi"}
        outputs: {}
        """)
    not_last = write(project, "not-last.chain.yaml", """\
        - agent.reply: {message: "hi"}
        - tools.now: {}
        """)
    skipped = write(project, "skipped.chain.yaml", """\
        - tools.now: {}
        - agent.reply: {message: "never"}
          if: "tools.now.year < 2000"
        """)
    checked = cli_here(project, "check", caller, declared, not_last, skipped)
    assert checked.returncode == 0, show(checked)
    outputs = {}
    for name in (caller, declared, not_last, skipped):
        proc = cli_here(project, "run", name, "--json", "--progress", "quiet", "--now", NOW)
        assert proc.returncode == 0, show(proc)
        outputs[name] = json.loads(proc.stdout)
    assert outputs == {caller: {"called": "About taxes: done."}, declared: {}, not_last: {}, skipped: {"reply": None}}
    # the chain called as an event: its result is its outputs, {reply}
    wrong = write(project, "wrong.chain.yaml", """\
        steps:
          - my.answer: {topic: taxes}
        outputs:
          x: "{my.answer.replied}"
        """)
    found = json.loads(cli_here(project, "check", "--format", "json", wrong).stdout)
    assert [d["rule"] for d in found] == ["CL026"], found  # ref-field: no such field
    assert "reply" in found[0]["message"] + (found[0].get("hint") or ""), found


def test_a_secret_in_a_reply_needs_expose_and_is_masked(project: Path) -> None:
    leak = write(project, "leak.chain.yaml", """\
        steps:
          - agent.reply: {message: "the token is {secrets.crm_token}"}
        """)
    proc = cli_here(project, "check", "--format", "json", leak)
    assert proc.returncode == 1, show(proc)
    found = [d for d in json.loads(proc.stdout) if d["rule"] == "CL066"]
    assert len(found) == 1, found
    assert found[0]["message"] == ("secrets.crm_token reaches the user (agent.reply): secrets.crm_token → "
                                   "agent.reply's message")
    assert "expose: [crm_token]" in found[0]["hint"]
    exposed = write(project, "exposed.chain.yaml", """\
        steps:
          - agent.reply: {message: "the token is {secrets.crm_token}"}
            expose: [crm_token]
        """)
    assert cli_here(project, "check", exposed).returncode == 0
    proc = cli_here(project, "run", exposed, "--json", "--thread", "day-1", "--progress", "plain",
               env={"CRM_TOKEN": "tok-5f9c2e81d7"})
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"reply": "the token is ***"}
    assert "reply: the token is ***" in proc.stderr.splitlines()
    assert "tok-5f9c2e81d7" not in proc.stdout + proc.stderr
    assert thread_events(project, "day-1")[-1]["result"] == {"message": "the token is ***"}


def test_a_reply_without_a_message_is_refused_by_the_checker(project: Path) -> None:
    name = write(project, "empty.chain.yaml", """\
        steps:
          - agent.reply: {message: ""}
          - agent.reply: {text: "hi"}
        """)
    proc = cli_here(project, "check", "--format", "json", name)
    assert proc.returncode == 1, show(proc)
    found = {(d["line"], d["rule"], d["message"]) for d in json.loads(proc.stdout)}
    assert (2, "CL015", "param 'message' of agent.reply: '' should be non-empty") in found, found
    assert (3, "CL015", "agent.reply has no param 'text'") in found, found
