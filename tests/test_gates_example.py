"""examples/gates: seed 003's review gate with timeout escalation, written in chainlang.

It checks clean; the review of its task (not another's) passes the gate; a review that does
not come within the gate's timeout escalates and the gate waits again. The escalation runs
on a copy whose durations are shortened (2d and 1d become 1s): waiting for a deadline that
passed is a condition the test waits for, never a sleep-then-look.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import cli_here

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gates"
TASK = "TASK-2026-11-28-001"


def copy(tmp_path: Path, shorten: bool = False) -> Path:
    root = tmp_path / "gates"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".chainlang", "__pycache__"))
    if shorten:
        chain = root / "review.chain.yaml"
        text = chain.read_text(encoding="utf-8")
        assert text.count("timeout: 2d") == 1 and text.count("timeout: 1d") == 1
        chain.write_text(text.replace("timeout: 2d", "timeout: 1s").replace("timeout: 1d", "timeout: 1s"),
                         encoding="utf-8")
    return root


def waiting_deadline(root: Path) -> str:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        [row] = store.list_waits()
    assert row.deadline is not None
    return row.deadline


def until_passed(deadline: str, within: float = 30.0) -> None:
    from chainlang.runtime.waiting import seconds_left

    limit = time.monotonic() + within
    while (seconds_left(deadline) or 0) > 0:
        assert time.monotonic() < limit, f"the deadline {deadline} did not pass"
        time.sleep(0.05)


def test_the_gate_example_checks_clean() -> None:
    checked = cli_here(EXAMPLE, "check", ".", "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout) == []  # no warning either: every wait has its timeout


def test_the_review_of_its_task_passes_the_gate(tmp_path: Path) -> None:
    root = copy(tmp_path)
    waiting = cli_here(root, "run", "review.chain.yaml", "--input", f"task_id={TASK}", "--detach",
                  "--transcript", ".chainlang/runs/gate.jsonl")
    assert waiting.returncode == 4, waiting.stderr
    assert "waits at step 2 for review.approved" in waiting.stderr
    other = cli_here(root, "emit", "review.approved", "--data", '{"task_id": "TASK-2026-11-28-002", "approved": true}')
    assert other.returncode == 0, other.stderr  # another task's review: not this gate's
    mine = cli_here(root, "emit", "review.approved", "--data",
               json.dumps({"task_id": TASK, "approved": False, "reviewer": "maria"}))
    assert mine.returncode == 0, mine.stderr
    done = cli_here(root, "resume", ".chainlang/runs/gate.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"task_id": TASK, "approved": False, "reviewer": "maria", "escalated": False}
    assert "changes requested, the task goes back to in_progress" in done.stderr


@pytest.mark.slow  # several CLI processes and two deadlines
def test_a_late_review_escalates_and_the_gate_waits_again(tmp_path: Path) -> None:
    root = copy(tmp_path, shorten=True)
    first = cli_here(root, "run", "review.chain.yaml", "--input", f"task_id={TASK}", "--detach",
                "--transcript", ".chainlang/runs/gate.jsonl")
    assert first.returncode == 4, first.stderr
    until_passed(waiting_deadline(root))
    # the first wait timed out: escalation, then the second wait
    escalated = cli_here(root, "resume", ".chainlang/runs/gate.jsonl", "--detach")
    assert escalated.returncode == 4, escalated.stderr
    assert f"[warning] Review gate late: {TASK} has waited 2 days for review; the team lead" in escalated.stderr, \
        escalated.stderr
    assert "waits at step 3.then.2 for review.approved" in escalated.stderr
    approved = cli_here(root, "emit", "review.approved", "--data",
                   json.dumps({"task_id": TASK, "approved": True, "reviewer": "lead"}))
    assert approved.returncode == 0, approved.stderr
    done = cli_here(root, "resume", ".chainlang/runs/gate.jsonl", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"task_id": TASK, "approved": True, "reviewer": "lead", "escalated": True}
    records = [json.loads(line) for line in (root / ".chainlang" / "runs" / "gate.jsonl").read_text().splitlines()]
    assert [(r["step"], r["status"]) for r in records if r["type"] == "wait_finished"] == [
        ("2", "timed_out"), ("3.then.2", "ok")]
