"""The moments `chainlang tasks`, `threads` and `waits` show: to the second in the text people
read, to the millisecond in --json (never the store's microseconds); and `tasks show` of a dead
task says why each of its firings failed (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

from chainlang.cli.moments import moment, moments
from chainlang.tasks.stored import project_store
from tests.helpers import cli, show

DEFINITION = {"type": "repeat", "interval": "1h", "action": [{"user.notify": {"message": "hi"}}],
              "schedule": {"type": "repeat", "interval": "1h"}}


def test_moment_forms() -> None:
    assert moment("2026-11-19T17:00:00.123456+00:00") == "2026-11-19T17:00:00Z"
    assert moment("2026-11-19T17:00:00.123456+00:00", precise=True) == "2026-11-19T17:00:00.123Z"
    assert moment("2026-11-19T18:00:00+01:00") == "2026-11-19T17:00:00Z"  # in UTC
    for kept in ("tomorrow 9:00", "2026-11-19T17:00:00", None, 3):  # not a moment of the store: as it is
        assert moment(kept) == kept
    # only a row's own moments (and its runs'): an action's params are the user's values
    row = {"due": "2026-11-19T17:00:00.000000+00:00", "action": [{"memory.search": {"since": "2026-11-01T00:00:00+00:00"}}],
           "runs": [{"due_at": "2026-11-19T17:00:00.000000+00:00"}]}
    assert moments(row) == {"due": "2026-11-19T17:00:00Z", "action": row["action"],
                            "runs": [{"due_at": "2026-11-19T17:00:00Z"}]}


def test_tasks_list_and_show_the_times_and_why_a_dead_task_failed(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    with project_store(tmp_path) as store:
        store.add_task("schedule", DEFINITION, id="flaky", next_run="2026-11-19T17:00:00.250000+00:00")
        for i in range(3):
            due = f"2026-11-19T{17 + i}:00:00.250000+00:00"
            assert store.claim("flaky", "w", due, 60) is not None
            store.start_run("flaky", "w", f"run-{i}", f"runs/run-{i}.jsonl", due, due)
            store.finish_run("flaky", "w", due, "failed", f"2026-11-19T{17 + i}:00:05+00:00",
                             next_run=f"2026-11-19T{18 + i}:00:00.250000+00:00",
                             error={"type": "tool_error", "message": f"the calendar said no ({i})"})
    listed = cli(tmp_path, "tasks", "list")
    assert listed.returncode == 0, show(listed)
    assert listed.stdout == "flaky  repeat dead      2026-11-19T20:00:00Z\n", listed.stdout
    as_json = json.loads(cli(tmp_path, "tasks", "list", "--json").stdout)["tasks"][0]
    assert as_json["due"] == "2026-11-19T20:00:00.250Z" and as_json["last_run"] == "2026-11-19T19:00:00.250Z"

    shown = cli(tmp_path, "tasks", "show", "flaky")
    assert shown.returncode == 0, show(shown)
    body = json.loads(shown.stdout)
    assert body["status"] == "dead" and body["due"] == "2026-11-19T20:00:00Z"
    assert [(r["due_at"], r["status"], r["error"]["message"]) for r in body["runs"]] == [
        ("2026-11-19T17:00:00Z", "failed", "the calendar said no (0)"),
        ("2026-11-19T18:00:00Z", "failed", "the calendar said no (1)"),
        ("2026-11-19T19:00:00Z", "failed", "the calendar said no (2)")]
    precise = json.loads(cli(tmp_path, "tasks", "show", "flaky", "--json").stdout)
    assert precise["runs"][0]["due_at"] == "2026-11-19T17:00:00.250Z" and "T" in precise["created_at"]
    assert precise["created_at"].endswith("Z") and len(precise["created_at"]) == len("2026-11-19T17:00:00.250Z")


def test_threads_create_and_archive_take_the_runs_clock(tmp_path: Path) -> None:
    """A run pinned with --now writes its thread on that clock; `threads create/archive --now`
    pin theirs the same way, so a thread's times come from one clock (issue 28)."""
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    assert cli(tmp_path, "threads", "create", "t-1", "--now", "2026-12-01T09:00:00Z").returncode == 0
    shown = json.loads(cli(tmp_path, "threads", "show", "t-1", "--json").stdout)
    assert (shown["created_at"], shown["updated_at"]) == ("2026-12-01T09:00:00.000000+00:00",) * 2, shown
    assert cli(tmp_path, "threads", "archive", "t-1", "--now", "2026-12-02T10:00:00+01:00").returncode == 0
    text = cli(tmp_path, "threads", "show", "t-1").stdout
    assert "created: 2026-12-01T09:00:00Z  updated: 2026-12-02T09:00:00Z" in text, text
    wrong = cli(tmp_path, "threads", "list", "--now", "2026-12-01")
    assert wrong.returncode == 2 and "--now goes with create and archive" in wrong.stderr, show(wrong)
