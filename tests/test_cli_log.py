"""`chainlang log`: the store's event log read from the command line (issue 28), oldest first,
filtered by moment, kind and subject, as text or JSON lines, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

from chainlang.tasks.stored import project_store
from tests.helpers import cli, show


def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text('[secrets]\ntoken = {env = "LOG_TOKEN"}\n', encoding="utf-8")
    return tmp_path


def test_log_lists_filters_and_masks(tmp_path: Path) -> None:
    root = project(tmp_path)
    with project_store(root) as store:
        store.add_task("schedule", {"type": "once", "at": "2026-12-01T09:00:00+00:00"}, id="remind",
                       next_run="2026-12-01T09:00:00+00:00")
        store.create_thread("t-1", summary="hello")
        store.log("note", "remind", {"said": "the token is s3cr3t-t0ken-value"})
    env_token = {"LOG_TOKEN": "s3cr3t-t0ken-value"}
    from tests.helpers import clean_env

    done = cli(root, "log", env=clean_env(**env_token))
    assert done.returncode == 0, show(done)
    lines = done.stdout.splitlines()
    assert [line.split()[2] for line in lines] == ["task_added", "thread_created", "note"], lines
    assert lines[0].split()[1].endswith("Z") and len(lines[0].split()[1]) == len("2026-11-28T15:00:00Z")
    assert "s3cr3t" not in done.stdout and "***" in lines[2], lines[2]

    kinds = cli(root, "log", "--kind", "note", "--kind", "thread_created", "--json", env=clean_env(**env_token))
    rows = [json.loads(line) for line in kinds.stdout.splitlines()]
    assert [(r["kind"], r["subject"]) for r in rows] == [("thread_created", "t-1"), ("note", "remind")]
    assert rows[0]["at"].endswith("Z") and len(rows[0]["at"]) == len("2026-11-28T15:00:00.000Z")
    assert [r["kind"] for r in map(json.loads, cli(root, "log", "--task", "remind", "--json").stdout.splitlines())] \
        == ["task_added", "note"]
    assert cli(root, "log", "--limit", "1").stdout.split()[2] == "note"
    assert cli(root, "log", "--since", "1d").stdout.count("\n") == 3
    assert cli(root, "log", "--since", "2999-01-01").stdout == "no events matching\n"


def test_log_refuses_a_bad_since_and_needs_no_store(tmp_path: Path) -> None:
    root = project(tmp_path)
    bad = cli(root, "log", "--since", "yesterday")
    assert bad.returncode == 2 and "--since 'yesterday': give a moment" in bad.stderr, show(bad)
    both = cli(root, "log", "--task", "a", "--subject", "b")
    assert both.returncode == 2 and "give one" in both.stderr
    empty = cli(root, "log")
    assert empty.returncode == 0 and empty.stdout == "no events\n", show(empty)
    assert not (root / ".chainlang" / "store.db").exists()  # reading the log creates no store
