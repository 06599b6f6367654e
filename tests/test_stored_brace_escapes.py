"""A literal brace escape in a stored action (issue 21): `"a {{b:c}} d"` in the action of
task.register or task.schedule is the text `a {b:c} d` when the action runs, as it is in a
plain step; `check` passes it and the registering step stores it.

Before the fix the registering chain handed the action on with its escapes already undone
(`a {b:c} d`), and the stored action, parsed again, read `{b:c}` as an expression: the
step failed ("the hook does not check, so it was not stored: unexpected character ':'"),
and `{{inputs.n}}` would even have become the registering chain's input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, show
from tests.hooks_util import assert_clean
from tests.serve_util import Servers, wait_until

HOOKS = """\
events:
  shop.order:
    description: An order came in.
    payload: {type: object}
"""

REGISTER = """\
inputs:
  n: {type: integer, default: 7}
steps:
  - task.register:
      id: braces
      trigger: post:shop.order
      action:
        - user.notify: {message: "a {{b:c}} d"}
        - user.notify: {message: "kept {{inputs.n}} as written, not {inputs.n}"}
"""

PLAIN = """\
steps:
  - user.notify: {message: "a {{b:c}} d"}
"""

SCHEDULE = """\
steps:
  - task.schedule:
      id: later
      type: delay
      interval: 1s
      action:
        - user.notify: {message: "x {{b:c}} y"}
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "shop.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    (tmp_path / "register.chain.yaml").write_text(REGISTER, encoding="utf-8")
    (tmp_path / "plain.chain.yaml").write_text(PLAIN, encoding="utf-8")
    (tmp_path / "schedule.chain.yaml").write_text(SCHEDULE, encoding="utf-8")
    return tmp_path


def _notified(project: Path) -> list[str]:
    """The message of every user.notify step of every run of the project, from the transcripts."""
    messages = []
    for transcript in sorted((project / ".chainlang" / "runs").glob("*.jsonl")):
        for line in transcript.read_text(encoding="utf-8").splitlines():
            record: dict[str, Any] = json.loads(line)
            if record["type"] == "step_started" and record["event"] == "user.notify":
                messages.append(record["params"]["message"])
    return messages


def test_check_and_a_plain_step_take_the_escape(tmp_path: Path) -> None:
    project = _project(tmp_path)
    checked = cli(project, "check", "register.chain.yaml", "schedule.chain.yaml", "plain.chain.yaml")
    assert checked.returncode == 0, show(checked)
    ran = cli(project, "run", "plain.chain.yaml")
    assert ran.returncode == 0 and "a {b:c} d" in ran.stdout + ran.stderr, show(ran)


def test_a_registered_action_with_a_brace_escape_is_stored_and_runs_it_as_text(tmp_path: Path) -> None:
    project = _project(tmp_path)
    ran = cli(project, "run", "register.chain.yaml")
    assert ran.returncode == 0, show(ran)  # before: "the hook does not check ... unexpected character ':'"
    shown = cli(project, "tasks", "show", "braces", "--json")
    assert shown.returncode == 0, show(shown)
    action = json.loads(shown.stdout)["action"]
    assert action[0] == {"user.notify": {"message": "a {{b:c}} d"}}  # stored as written
    fired = cli(project, "emit", "shop.order", "--data", "{}")
    assert fired.returncode == 0 and "1 hook fired" in fired.stdout + fired.stderr, show(fired)
    assert_clean(fired)
    assert _notified(project)[-2:] == ["a {b:c} d", "kept {inputs.n} as written, not 7"]


@pytest.mark.slow
def test_a_scheduled_action_with_a_brace_escape_runs_it_as_text_when_serve_fires_it(tmp_path: Path) -> None:
    project = _project(tmp_path)
    ran = cli(project, "run", "schedule.chain.yaml")
    assert ran.returncode == 0, show(ran)  # before: "the action does not check, so it was not stored"
    with Servers() as started:
        server = started.start(project)
        wait_until("the task fired", lambda: "x {b:c} y" in _notified(project), within=20, server=server)
        wait_until("the task completed", lambda: json.loads(
            cli(project, "tasks", "show", "later", "--json").stdout)["status"] == "completed", server=server)
        assert "Traceback" not in server.stderr, server.describe()
