"""task.schedule (LANGUAGE.md §12) end to end through the CLI, on a real store file: the
times read against the run's clock (`--now` pins it), what is stored and shown
(`task.list`, `chainlang tasks`), what fails the step and stores nothing, a resumed step
that stores its task once, and `[store] url`. The scheduler that fires the tasks is tested
in tests/test_scheduler.py (fake clock) and tests/test_serve.py (serve)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, cli_here

NOW = "2026-11-23T10:00:00+00:00"  # a Monday

HOOKS = """\
events:
  email.received:
    description: A message arrived.
    payload:
      type: object
      properties: {sender: {type: string}, subject: {type: string}}
      required: [sender]
hooks:
  - id: mail-note
    trigger: post:email.received
    action:
      - user.notify: {message: "mail from {sender}"}
"""

# kills the run right after task.schedule committed its task, before the step's end is recorded
CRASH_TOOLS = '''\
import os
import signal
from pathlib import Path

import chainlang.stdlib.task as _task
from chainlang import event

_stored = _task._add


def _add(store, *args, **kwargs):
    _stored(store, *args, **kwargs)
    marker = Path(".chainlang") / "crash-after-store"
    if marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)


_task._add = _add


@event("crash.noop", description="Nothing", idempotent=True)
def noop() -> dict:
    return {}
'''


def run(project: Path, steps: str, *, outputs: str = "", now: str = NOW, name: str = "s.chain.yaml",
        ok: bool = True, killed: bool = False) -> subprocess.CompletedProcess[str]:
    """Write a chain of these steps (and outputs) and run it with the clock pinned: in this
    process, but for a run a tool kills (`killed`)."""
    text = "steps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")
    if outputs:
        text += "outputs:\n" + textwrap.indent(textwrap.dedent(outputs), "  ")
    (project / name).write_text(text, encoding="utf-8")
    proc = (cli if killed else cli_here)(project, "run", name, "--now", now, "--json")
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def out(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


def listed(project: Path, *args: str) -> list[dict[str, Any]]:
    proc = cli_here(project, "tasks", "list", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout)["tasks"])


def stored(project: Path) -> list[Any]:
    """The project's tasks, read in this process (no store: none; reading creates none)."""
    from chainlang.tasks.stored import project_store, store_exists

    if not store_exists(project):
        return []
    with project_store(project) as store:
        return store.list_tasks()


def definition(project: Path, task_id: str) -> dict[str, Any]:
    (task,) = [t for t in stored(project) if t.id == task_id]
    return dict(task.definition)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    return tmp_path


NOTIFY = "[user.notify: {message: hi}]"


def test_each_type_returns_its_task_id_and_next_run_read_on_the_runs_clock(project: Path) -> None:
    ran = run(project, f"""\
        - {{event: task.schedule, id: once_t, params: {{type: once, at: "tomorrow 08:00", action: {NOTIFY}}}}}
        - {{event: task.schedule, id: iso_t, params: {{type: once, at: "2026-11-23 17:00", action: {NOTIFY}}}}}
        - {{event: task.schedule, id: fri_t, params: {{type: once, at: "friday 9am", action: {NOTIFY}}}}}
        - {{event: task.schedule, id: delay_t, params: {{type: delay, interval: 30m, action: {NOTIFY}}}}}
        - {{event: task.schedule, id: daily_t, params: {{type: repeat, interval: 1 day, action: {NOTIFY}}}}}
        - event: task.schedule
          id: eight_t
          params: {{type: repeat, interval: 1 day, at: "today 08:00", action: {NOTIFY}}}
        - event: task.schedule
          id: cron_t
          params: {{type: repeat, cron: "0 8 * * 1-5", misfire: all, action: {NOTIFY}, description: Weekday mornings}}
        - task.list
        """, outputs="""\
        once: "{once_t}"
        iso: "{iso_t}"
        fri: "{fri_t}"
        delay: "{delay_t}"
        daily: "{daily_t}"
        eight: "{eight_t}"
        cron: "{cron_t}"
        listed: "{task.list.tasks}"
        """)
    got = out(ran)
    listing = got.pop("listed")
    assert {name: value["next_run"] for name, value in got.items()} == {
        "once": "2026-11-24T08:00:00+00:00",
        "iso": "2026-11-23T17:00:00+00:00",
        "fri": "2026-11-27T09:00:00+00:00",  # the Friday of this week
        "delay": "2026-11-23T10:30:00+00:00",
        "daily": "2026-11-24T10:00:00+00:00",
        "eight": "2026-11-24T08:00:00+00:00",  # today's 08:00 is past: the series starts tomorrow
        "cron": "2026-11-24T08:00:00+00:00",
    }
    ids = {name: value["task_id"] for name, value in got.items()}
    assert len(set(ids.values())) == 7 and all(i.startswith("task-") for i in ids.values())
    tasks = {t["task_id"]: t for t in listing}  # task.list, in the same run
    assert set(tasks) == set(ids.values())
    shown = {name: tasks[i] for name, i in ids.items()}
    assert {n: (t["type"], t["status"], t.get("at"), t.get("interval"), t.get("cron")) for n, t in shown.items()} == {
        "once": ("once", "pending", "tomorrow 08:00", None, None),
        "iso": ("once", "pending", "2026-11-23 17:00", None, None),
        "fri": ("once", "pending", "friday 9am", None, None),
        "delay": ("delay", "pending", None, "30m", None),
        "daily": ("repeat", "pending", None, "1 day", None),
        "eight": ("repeat", "pending", "today 08:00", "1 day", None),
        "cron": ("repeat", "pending", None, None, "0 8 * * 1-5"),
    }
    # due: when it runs next, in the zone of the run's clock as next_run was
    assert {n: t["due"] for n, t in shown.items()} == {n: v["next_run"] for n, v in got.items()}
    assert shown["once"]["action"] == [{"user.notify": {"message": "hi"}}] and shown["once"]["failures"] == 0
    assert shown["once"]["origin"].endswith("/1") and shown["cron"]["origin"].endswith("/7")  # run id/step
    assert shown["cron"]["description"] == "Weekday mornings" and "description" not in shown["once"]
    assert definition(project, ids["cron"])["misfire"] == "all"
    assert definition(project, ids["once"])["misfire"] == "once"  # the default


def test_times_are_read_in_the_zone_of_the_runs_clock(project: Path) -> None:
    ran = run(project, f"""\
        - task.schedule: {{type: once, at: "tomorrow 08:00", action: {NOTIFY}}}
        """, outputs='next: "{task.schedule.next_run}"\n', now="2026-11-23T23:30:00+01:00")
    assert out(ran) == {"next": "2026-11-24T08:00:00+01:00"}
    (task,) = stored(project)
    assert task.next_run == "2026-11-24T07:00:00.000000+00:00"  # the store keeps UTC


def test_the_seeds_reminder_after_work(project: Path) -> None:
    """The seed's chain: a reminder at 17:00 of the day the chain runs, its action using a
    value of the run (captured when the task is stored)."""
    ran = run(project, """\
        - tools.now
        - task.schedule:
            type: once
            at: "{tools.now.date} 17:00"
            action:
              - user.notify: {message: "Time to buy groceries (you asked at {tools.now.iso})"}
        """, outputs='next: "{task.schedule.next_run}"\nid: "{task.schedule.task_id}"\n')
    got = out(ran)
    assert got["next"] == "2026-11-23T17:00:00+00:00"
    (task,) = stored(project)
    assert task.id == got["id"] and task.origin.endswith("/2") and task.status == "pending"  # not fired yet
    assert task.definition["captured"] == {"tools.now.iso": NOW}
    assert task.definition["schedule"] == {"type": "once", "at": "2026-11-23 17:00"}  # as rendered
    assert task.definition["action"] == [{"user.notify": {"message": "Time to buy groceries (you asked at "
                                                                    "{tools.now.iso})"}}]


@pytest.mark.parametrize(("at", "message"), [
    ("2026-11-23 09:00", "at '2026-11-23 09:00' is 2026-11-23T09:00:00+00:00, which is not in the future "
                         "(now: 2026-11-23T10:00:00+00:00)"),
    ("yesterday", "at 'yesterday' reads as 2026-11-22T10:00:00+00:00, which is not in the future"),
    ("after work", "at 'after work': not a time chainlang can read"),
    ("in 99999999999 days", "at 'in 99999999999 days'"),
])
def test_a_time_in_the_past_or_unreadable_fails_the_step_and_stores_nothing(project: Path, at: str,
                                                                             message: str) -> None:
    ran = run(project, f"""\
        - task.schedule: {{type: once, at: "{at}", action: {NOTIFY}}}
        - user.notify: {{message: never}}
        """, ok=False)
    assert ran.returncode == 1
    assert "✗ 1 task.schedule failed: the task was not scheduled: " + message in ran.stderr, ran.stderr
    assert "never" not in ran.stderr
    assert stored(project) == []


@pytest.mark.parametrize(("params", "message"), [
    ('type: repeat, cron: "61 * * * *"', "cron '61 * * * *': Bad minute"),
    ("type: repeat, interval: 1 month", "months have no fixed length"),
    ("type: delay, interval: 99999999 weeks", "99999999 weeks is out of range"),
])
def test_an_unusable_interval_or_cron_fails_the_step_and_stores_nothing(project: Path, params: str,
                                                                        message: str) -> None:
    ran = run(project, f"- task.schedule: {{{params}, action: {NOTIFY}}}\n", ok=False)
    assert ran.returncode == 1 and "the task was not scheduled: " in ran.stderr and message in ran.stderr, ran.stderr
    assert stored(project) == []


def test_an_action_that_does_not_check_in_the_project_fails_the_step_and_stores_nothing(project: Path) -> None:
    # the chain checks on its own; in the project, the action's hook id is a hooks file's
    (project / "inbox.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    ran = run(project, f"- task.schedule: {{id: mail-note, type: once, at: tomorrow 08:00, action: {NOTIFY}}}\n",
              ok=False)
    assert ran.returncode == 1
    assert "the action does not check, so it was not stored" in ran.stderr
    assert "hook id 'mail-note' is also used by" in ran.stderr and "inbox.hooks.yaml" in ran.stderr
    assert stored(project) == []


def test_an_action_with_an_unknown_event_or_reference_is_refused_before_the_run(project: Path) -> None:
    ran = run(project, """\
        - tools.now
        - task.schedule: {type: once, at: tomorrow 08:00, action: [nosuch.event: {x: 1}]}
        - task.schedule: {type: once, at: tomorrow 08:00, action: [user.notify: {message: "{tools.nope.iso}"}]}
        """, ok=False)
    assert ran.returncode == 1
    assert "unknown event 'nosuch.event'" in ran.stderr and "'tools' names nothing here" in ran.stderr
    assert "it was not started" in ran.stderr
    assert stored(project) == []


def ctx(project: Path, key: str = "k" * 32, run_id: str = "r1", step: str = "2",
        captured: dict[str, Any] | None = None) -> Any:
    from datetime import datetime

    from chainlang.pipeline import default_registry
    from chainlang.runtime.context import FixedClock, RunContext

    return RunContext(run_id=run_id, chain=None, step=step, event="task.schedule", attempt=1, idempotency_key=key,
                      clock=FixedClock(datetime.fromisoformat(NOW)), state_dir=project / ".chainlang" / "state",
                      project=project, registry=default_registry([], project), captured=dict(captured or {}))


def test_the_action_is_checked_again_when_the_step_runs(project: Path) -> None:
    """What the step itself refuses (a chain check that ran elsewhere, or values that
    changed): an unknown event, a reference the captured values do not have."""
    from chainlang.stdlib.task import schedule

    with pytest.raises(ValueError, match=r"the action does not check, so it was not stored: .*unknown event "
                                         r"'nosuch\.event'"):
        schedule(ctx(project), type="once", at="tomorrow 08:00", action=[{"nosuch.event": {}}])
    with pytest.raises(ValueError, match="the action does not check, so it was not stored: .*tools.now does not "
                                         "run in this chain before this point"):
        schedule(ctx(project), type="once", at="tomorrow 08:00",
                 action=[{"user.notify": {"message": "{tools.now.iso}"}}])
    assert stored(project) == []
    done = schedule(ctx(project, captured={"tools.now.iso": NOW}), type="once", at="tomorrow 08:00",
                    action=[{"user.notify": {"message": "since {tools.now.iso}"}}])
    assert done["next_run"] == "2026-11-24T08:00:00+00:00"


def test_the_same_step_attempt_stores_one_task(project: Path) -> None:
    from chainlang.stdlib.task import schedule

    params: dict[str, Any] = {"type": "repeat", "interval": "1 hour", "action": [{"user.notify": {"message": "x"}}]}
    first = schedule(ctx(project), **params)
    assert schedule(ctx(project), **params) == first
    other = schedule(ctx(project, key="j" * 32, step="3"), **params)
    assert other["task_id"] != first["task_id"]
    assert sorted(t.id for t in stored(project)) == sorted([first["task_id"], other["task_id"]])


def test_the_same_step_finds_its_task_whatever_became_of_it(project: Path) -> None:
    """Resumed after its task already fired (or was cancelled): still its own task, not
    'exists already'."""
    from chainlang.stdlib.task import schedule
    from chainlang.store import open_store

    params: dict[str, Any] = {"type": "delay", "interval": "1s", "action": [{"user.notify": {"message": "x"}}]}
    first = schedule(ctx(project), **params)
    due = first["next_run"]
    with open_store(project) as store:  # serve fired it meanwhile: completed
        assert store.claim(first["task_id"], "w", due, 30) is not None
        store.start_run(first["task_id"], "w", "run-1", "runs/run-1.jsonl", due, due)
        assert store.finish_run(first["task_id"], "w", due, "ok", due, next_run=None).status == "completed"
    assert schedule(ctx(project), **params) == first


def test_a_step_run_again_after_a_crash_finds_the_task_it_stored(project: Path) -> None:
    """SIGKILL right after the task was committed, before the step's end was recorded:
    `chainlang resume` runs the step again, which finds its task (same id) and stores no
    second one."""
    (project / "crash_tools.py").write_text(CRASH_TOOLS, encoding="utf-8")
    (project / "chainlang.toml").write_text('tools = ["crash_tools.py"]\n', encoding="utf-8")
    (project / ".chainlang").mkdir()
    (project / ".chainlang" / "crash-after-store").write_text("", encoding="utf-8")
    crashed = run(project, """\
        - tools.now
        - task.schedule: {type: once, at: "tomorrow 08:00", action: [user.notify: {message: "since {tools.now.iso}"}]}
        """, outputs='id: "{task.schedule.task_id}"\nnext: "{task.schedule.next_run}"\n', ok=False, killed=True)
    assert crashed.returncode == -9, crashed.stderr
    (task,) = stored(project)
    (transcript,) = (project / ".chainlang" / "runs").glob("*.jsonl")
    # in a process of its own as well: crash_tools.py patches chainlang.stdlib.task where it is loaded
    resumed = cli(project, "resume", str(transcript), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert "✓ 2 task.schedule" in resumed.stderr
    assert json.loads(resumed.stdout) == {"id": task.id, "next": "2026-11-24T08:00:00+00:00"}
    assert [t.id for t in stored(project)] == [task.id]


def test_an_id_given_twice_fails_the_second_time(project: Path) -> None:
    steps = f"- task.schedule: {{id: standup, type: repeat, cron: '0 9 * * 1-5', action: {NOTIFY}}}\n"
    first = run(project, steps, outputs='id: "{task.schedule.task_id}"\n')
    assert out(first) == {"id": "standup"}
    second = run(project, steps, ok=False)
    assert second.returncode == 1
    assert "a task with id 'standup' exists already (pending, registered by " in second.stderr
    assert "chainlang tasks cancel standup" in second.stderr
    assert [t.id for t in stored(project)] == ["standup"]


def test_an_archived_task_keeps_its_id(project: Path) -> None:
    from chainlang.stdlib.task import cancel, schedule

    schedule(ctx(project), id="standup", type="once", at="tomorrow 09:00", action=[{"user.notify": {"message": "x"}}])
    assert cancel(ctx(project), task_id="standup") == {"task_id": "standup", "status": "archived"}
    again = run(project, f"- task.schedule: {{id: standup, type: once, at: tomorrow 09:00, action: {NOTIFY}}}\n",
                ok=False)
    assert again.returncode == 1 and "the task id 'standup' was used before (archived" in again.stderr
    assert "ids are never reused" in again.stderr


def setup_tasks(project: Path) -> None:
    """Four schedules, stored as four task.schedule steps of one run would store them."""
    from chainlang.stdlib.task import schedule

    notify = [{"user.notify": {"message": "hi"}}]
    for n, (id, params) in enumerate([("today-a", {"type": "once", "at": "today 17:00"}),
                                      ("today-b", {"type": "delay", "interval": "2h"}),
                                      ("later", {"type": "once", "at": "2026-11-25 09:00"}),
                                      ("daily", {"type": "repeat", "interval": "1 day"})]):
        schedule(ctx(project, key=f"{n}" * 32, step=str(n + 1)), id=id, action=notify, **params)


def test_task_list_filters_by_field_and_by_the_day_due(project: Path) -> None:
    setup_tasks(project)
    listing = run(project, """\
        - tools.now
        - {event: task.list, id: all, params: {}}
        - {event: task.list, id: repeats, params: {filter: {type: repeat}}}
        - {event: task.list, id: today, params: {filter: {due: "{tools.now.date}"}}}
        - {event: task.list, id: exact, params: {filter: {due: "2026-11-25T09:00:00+00:00"}}}
        - {event: task.list, id: active, params: {status: active}}
        - {event: task.list, id: pending, params: {status: pending}}
        - {event: task.list, id: dead, params: {status: dead}}
        """, outputs="""\
        all: "{all.tasks}"
        repeats: "{repeats.tasks}"
        today: "{today.tasks}"
        exact: "{exact.tasks}"
        active: "{active.tasks | length}"
        pending: "{pending.tasks | length}"
        dead: "{dead.tasks | length}"
        """, name="list.chain.yaml")
    got = out(listing)
    every = {t["task_id"]: t for t in got["all"]}
    assert set(every) == {"today-a", "today-b", "later", "daily"}
    assert every["today-a"]["due"] == "2026-11-23T17:00:00+00:00"  # on the run's clock, as next_run was
    assert [t["task_id"] for t in got["repeats"]] == ["daily"]
    assert sorted(t["task_id"] for t in got["today"]) == ["today-a", "today-b"]  # the seed's morning filter
    assert [t["task_id"] for t in got["exact"]] == ["later"]
    assert (got["active"], got["dead"]) == (0, 0)  # none has fired yet: all four are pending
    assert got["pending"] == 4


def test_task_cancel_in_a_chain(project: Path) -> None:
    setup_tasks(project)
    gone = run(project, """\
        - task.cancel: {task_id: daily}
        - {event: task.cancel, id: again, params: {task_id: daily}}
        - {event: task.cancel, id: missing, params: {task_id: nope}}
        """, outputs='status: "{task.cancel.result.status}"\n', name="cancel.chain.yaml", ok=False)
    assert gone.returncode == 1 and "no task with id 'nope'" in gone.stderr
    assert "✓ 1 task.cancel" in gone.stderr and "✓ 2 task.cancel" in gone.stderr  # archived already: fine
    assert {t.id: t.status for t in stored(project)}["daily"] == "archived"


def test_the_tasks_command_lists_shows_and_cancels_schedules(project: Path) -> None:
    setup_tasks(project)
    text = cli_here(project, "tasks", "list")
    assert text.returncode == 0
    rows = {line.split()[0]: line.split()[1:] for line in text.stdout.splitlines()}
    assert set(rows) == {"today-a", "today-b", "later", "daily"}, text.stdout
    assert rows["daily"][:3] == ["repeat", "pending", "2026-11-24T10:00:00Z"]  # in UTC, to the second
    assert rows["today-b"][:2] == ["delay", "pending"]
    shown = cli_here(project, "tasks", "show", "daily", "--json")
    detail = json.loads(shown.stdout)
    assert (detail["type"], detail["interval"], detail["status"], detail["runs"]) == ("repeat", "1 day", "pending", [])
    assert detail["definition"]["timing"] == {"kind": "repeat", "first": "2026-11-24T10:00:00+00:00",
                                              "every_seconds": 86400.0}
    cancelled = cli_here(project, "tasks", "cancel", "later", "--json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["status"] == "archived"
    assert [t.id for t in stored(project) if t.status == "archived"] == ["later"]


def test_store_url_puts_the_store_elsewhere(project: Path) -> None:
    (project / "chainlang.toml").write_text('[store]\nurl = "sqlite:///state/other.db"\n', encoding="utf-8")
    (project / "state").mkdir()
    ran = run(project, f"- task.schedule: {{type: once, at: tomorrow 08:00, action: {NOTIFY}}}\n",
              outputs='id: "{task.schedule.task_id}"\n')
    assert (project / "state" / "other.db").is_file()
    assert not (project / ".chainlang" / "store.db").exists()
    assert [t["task_id"] for t in listed(project)] == [out(ran)["id"]]  # chainlang tasks reads it there


def test_store_url_whose_directory_is_missing_fails_the_step_clearly(project: Path) -> None:
    (project / "chainlang.toml").write_text('[store]\nurl = "sqlite:///state/other.db"\n', encoding="utf-8")
    ran = run(project, f"- task.schedule: {{type: once, at: tomorrow 08:00, action: {NOTIFY}}}\n", ok=False)
    assert ran.returncode == 1
    assert "the project's store cannot be opened" in ran.stderr and "other.db" in ran.stderr
    assert "its directory is missing" in ran.stderr


def test_an_action_may_use_the_chains_inputs(project: Path) -> None:
    (project / "in.chain.yaml").write_text(
        "inputs:\n  what: {type: string, default: groceries}\nsteps:\n  - task.schedule:\n"
        "      {type: once, at: tomorrow 08:00, action: [user.notify: {message: \"buy {inputs.what}\"}]}\n",
        encoding="utf-8")
    ran = cli_here(project, "run", "in.chain.yaml", "--now", NOW)
    assert ran.returncode == 0, ran.stderr
    (task,) = stored(project)
    assert task.definition["captured"] == {"inputs.what": "groceries"}
