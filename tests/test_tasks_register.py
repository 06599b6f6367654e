"""task.register, task.list, task.cancel and `chainlang tasks`: hooks stored by a chain are
in force for every later run and emit of the project (LANGUAGE.md §12), end to end
through the CLI, on a real store file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here

INBOX = """\
events:
  email.received:
    description: A message arrived.
    payload:
      type: object
      properties: {sender: {type: string}, subject: {type: string}, body: {type: string}}
      required: [sender, subject]
      additionalProperties: false
"""

AUTOMATE = """\
steps:
  - tools.now
  - task.register:
      trigger: post:email.received
      condition: "sender contains 'Sarah' AND (subject contains 'budget' OR body contains 'budget')"
      action:
        - user.notify: {message: "Budget mail from {sender} (watching since {tools.now.date})"}
  - user.notify: {message: "I will tell you when Sarah writes about the budget."}
"""


def listed(cwd: Path) -> list[dict[str, Any]]:
    proc = cli_here(cwd, "tasks", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout)["tasks"])


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "inbox.hooks.yaml").write_text(INBOX, encoding="utf-8")
    (tmp_path / "automate.chain.yaml").write_text(AUTOMATE, encoding="utf-8")
    return tmp_path


SARAH = '{"sender": "Sarah Lee", "subject": "Q1 budget"}'


def test_a_registered_hook_fires_on_a_later_emit_with_what_it_captured(project: Path) -> None:
    assert cli_here(project, "tasks", "list").stdout.strip() == "no stored tasks"  # and no store is created for that
    assert not (project / ".chainlang" / "store.db").exists()
    ran = cli_here(project, "run", "automate.chain.yaml", "--now", "2026-11-20T09:00:00+01:00")
    assert ran.returncode == 0, ran.stderr
    tasks = listed(project)
    assert [(t["type"], t["status"], t["trigger"]) for t in tasks] == [("hook", "active", "post:email.received")]
    fired = cli_here(project, "emit", "email.received", "--data", SARAH)
    assert fired.returncode == 0, fired.stderr
    assert f"✓ {tasks[0]['task_id']} ok" in fired.stdout
    # the action read the registering run's clock (captured when task.register ran), not today's
    assert "Budget mail from Sarah Lee (watching since 2026-11-20)" in fired.stderr
    quiet = cli_here(project, "emit", "email.received", "--data", '{"sender": "Tom", "subject": "lunch"}')
    assert quiet.returncode == 0 and "no hook fired" in quiet.stdout


def test_cancelling_stops_the_hook(project: Path) -> None:
    assert cli_here(project, "run", "automate.chain.yaml").returncode == 0
    (task,) = listed(project)
    (project / "stop.chain.yaml").write_text(
        f"steps:\n  - task.cancel: {{task_id: {task['task_id']}}}\n  - task.list: {{status: archived}}\n"
        "outputs:\n  archived: \"{task.list.tasks | length}\"\n", encoding="utf-8")
    stopped = cli_here(project, "run", "stop.chain.yaml", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"archived": 1}
    assert "no hook fired" in cli_here(project, "emit", "email.received", "--data", SARAH).stdout
    again = cli_here(project, "run", "stop.chain.yaml")  # cancelling an archived task changes nothing
    assert again.returncode == 0, again.stderr


def test_a_hook_that_does_not_check_in_the_project_is_not_stored(project: Path) -> None:
    # the chain declares the event itself: fine for the chain, but a stored hook outlives it,
    # and in the project (its hooks files) the event is unknown
    (project / "own.chain.yaml").write_text(
        "events:\n  chat.message:\n    description: x\n    payload: {type: object, properties: {text: {type: string}}}\n"
        "steps:\n  - task.register:\n      trigger: post:chat.message\n      action:\n"
        "        - user.notify: {message: \"{text}\"}\n", encoding="utf-8")
    ran = cli_here(project, "run", "own.chain.yaml")
    assert ran.returncode == 1
    assert "the hook does not check, so it was not stored" in ran.stderr and "chat.message" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert listed(project) == []


def test_an_id_in_use_fails_the_step(project: Path) -> None:
    (project / "named.chain.yaml").write_text(
        "steps:\n  - task.register:\n      id: sarah-budget\n      trigger: post:email.received\n      action:\n"
        "        - user.notify: {message: \"{subject}\"}\n", encoding="utf-8")
    assert cli_here(project, "run", "named.chain.yaml").returncode == 0
    second = cli_here(project, "run", "named.chain.yaml")
    assert second.returncode == 1 and "a task with id 'sarah-budget' exists already" in second.stderr
    assert [t["task_id"] for t in listed(project)] == ["sarah-budget"]


def test_register_again_for_the_same_step_attempt_stores_one_hook(project: Path) -> None:
    """What a resumed run does when task.register started before a crash: the same step
    attempt (same idempotency key) finds the hook it stored."""
    from chainlang.pipeline import default_registry
    from chainlang.runtime.context import FixedClock, RunContext
    from chainlang.stdlib.task import register

    ctx = RunContext(run_id="r1", chain=None, step="2", event="task.register", attempt=1, idempotency_key="k" * 32,
                     clock=FixedClock(None), state_dir=project / ".chainlang" / "state", project=project,
                     registry=default_registry([], project), captured={})
    params: dict[str, Any] = {"trigger": "post:email.received", "action": [{"user.notify": {"message": "{subject}"}}]}
    first = register(ctx, **params)
    assert register(ctx, **params) == first
    assert [t["task_id"] for t in listed(project)] == [first["task_id"]]


def test_stored_hooks_are_in_force_for_runs_and_checked_with_them(project: Path) -> None:
    (project / "send.chain.yaml").write_text("steps:\n  - user.notify: {message: plain}\n", encoding="utf-8")
    (project / "tag.chain.yaml").write_text(
        "steps:\n  - task.register:\n      trigger: pre:user.notify\n      condition: message == 'plain'\n"
        "      max_depth: 1\n      action:\n        - user.notify: {message: \"tagged {message}\"}\n", encoding="utf-8")
    assert cli_here(project, "run", "tag.chain.yaml").returncode == 0
    ran = cli_here(project, "run", "send.chain.yaml")
    assert ran.returncode == 0, ran.stderr
    assert "tagged plain" in ran.stderr and "hook:" in ran.stderr
    assert cli_here(project, "check", "send.chain.yaml").returncode == 0


def test_tasks_command_errors(project: Path) -> None:
    assert cli_here(project, "run", "automate.chain.yaml").returncode == 0
    (task,) = listed(project)
    shown = cli_here(project, "tasks", "show", task["task_id"], "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["definition"]["hook"]["trigger"] == "post:email.received"
    for args, message in ((("show", "nope"), "no task 'nope'"), (("retry", task["task_id"]), "only a dead task"),
                          (("cancel",), "needs a TASK_ID")):
        proc = cli_here(project, "tasks", *args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert cli_here(project, "tasks", "cancel", task["task_id"]).stdout.strip() == f"{task['task_id']}: archived"
    assert listed(project)[0]["status"] == "archived"
    assert cli_here(project, "tasks", "list", "--status", "active").stdout.strip() == "no stored tasks with status active"


def test_seed_case_6_a_chain_registers_the_hook_and_the_meeting_is_booked_once(tmp_path: Path) -> None:
    """The seed's scenario 6 with the example project's stand-in calendar: a chain registers
    the hook; the mail arrives (emitted twice with one --id, as a webhook may deliver it);
    calendar.create books one meeting."""
    import shutil

    examples = Path(__file__).resolve().parent.parent / "examples"
    shutil.copyfile(examples / "assistant_tools.py", tmp_path / "assistant_tools.py")
    (tmp_path / "chainlang.toml").write_text('tools = ["assistant_tools.py"]\n', encoding="utf-8")
    (tmp_path / "inbox.hooks.yaml").write_text(INBOX, encoding="utf-8")
    (tmp_path / "automate.chain.yaml").write_text("""\
steps:
  - task.register:
      id: sarah-budget
      trigger: post:email.received
      condition: "sender contains 'Sarah' AND (subject contains 'budget' OR body contains 'budget')"
      action:
        - calendar.create: {type: meeting, attendees: [Sarah], duration: 30m, title: Budget Discussion}
        - user.notify: {message: "Scheduled budget meeting with Sarah at {calendar.create.start}"}
""", encoding="utf-8")
    assert cli_here(tmp_path, "run", "automate.chain.yaml").returncode == 0
    for _ in range(2):
        fired = cli_here(tmp_path, "emit", "email.received", "--id", "msg-42", "--now", "2026-11-20T16:50:00+01:00",
                    "--data", '{"sender": "Sarah Lee", "subject": "Q1 budget review"}')
        assert fired.returncode == 0, fired.stderr
    assert "already processed" in fired.stderr
    calendar = json.loads((tmp_path / ".chainlang" / "state" / "calendar.json").read_text(encoding="utf-8"))
    assert [(e["title"], e["start"]) for e in calendar] == [("Budget Discussion", "2026-11-23T09:00+01:00")]
