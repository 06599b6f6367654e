"""The model tier of the thread events ([models] memory = TIER, LANGUAGE.md §13): thread.match
chooses among the ranked threads and thread.summarize writes the summary with a model, here
the scripted provider; their answers are checked, recorded and replayed like any model call."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here

NOW = "2026-11-23T10:00:00+00:00"


def project(tmp_path: Path, rules: list[dict[str, Any]], memory: str = "fast") -> Path:
    (tmp_path / "chainlang.toml").write_text(
        f'[models]\nmemory = "{memory}"\n\n[models.fast]\nprovider = "scripted"\nrules = "answers.yaml"\n',
        encoding="utf-8")
    (tmp_path / "answers.yaml").write_text(json.dumps({"rules": rules}), encoding="utf-8")
    return tmp_path


def step(root: Path, event: str, params: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    chain = {"steps": [{event: params}], "outputs": {"r": "{" + event + "}"}}
    (root / "s.chain.yaml").write_text(json.dumps(chain), encoding="utf-8")
    (root / "t.jsonl").unlink(missing_ok=True)  # the transcript of the last step only
    for extra in root.glob("t.jsonl.*"):
        extra.unlink()
    return cli_here(root, "run", "s.chain.yaml", "--now", NOW, "--json", "--transcript", "t.jsonl")


def model_calls(root: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (root / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in lines if r["type"] == "model_call"]


def test_match_asks_the_tier_and_keeps_its_checked_answer(tmp_path: Path) -> None:
    root = project(tmp_path, [
        {"task": "match", "when": "q2 launch", "answer": {"action": "new", "reason": "a new topic"}},
        {"task": "match", "when": "dentist", "answer": {"action": "suggest_new", "reason": "personal"}},
    ])
    first = step(root, "thread.match", {"message": "Plan the Q2 launch"})
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout)["r"]
    assert got["action"] == "new" and got["thread_id"].startswith("thread-")
    calls = model_calls(root)
    assert [(c["task"], c["tier"]) for c in calls] == [("match", "fast")]
    assert "Plan the Q2 launch" in calls[0]["request"]["messages"][1]["content"]
    # with a current thread, the model's suggest_new is kept (with its reason)
    again = step(root, "thread.match", {"message": "Did I have a dentist appointment?", "thread_id": got["thread_id"]})
    assert json.loads(again.stdout)["r"] == {"action": "suggest_new", "reason": "personal"}


@pytest.mark.parametrize("answer, message", [
    ({"action": "suggest_switch", "thread_id": "thread-nope"}, "not one of the threads it was shown"),
    ({"action": "continue", "thread_id": "x"}, "answered continue without a current thread"),
    ({"action": "maybe"}, "does not match the schema"),
    ("not json at all", "is not JSON"),
])
def test_a_match_answer_that_does_not_fit_fails_the_step(tmp_path: Path, answer: Any, message: str) -> None:
    root = project(tmp_path, [{"task": "match", "answer": answer}])
    proc = step(root, "thread.match", {"message": "Plan the Q2 launch"})
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


def test_summarize_asks_the_tier_masks_and_bounds_the_summary(tmp_path: Path) -> None:
    root = project(tmp_path, [
        {"task": "match", "answer": {"action": "new"}},
        {"task": "summarize", "answers": ["Planning the Q2 launch; the password=hunter2hunter2 was shared.", " "]},
    ])
    thread = json.loads(step(root, "thread.match", {"message": "Plan the Q2 launch"}).stdout)["r"]["thread_id"]
    proc = step(root, "thread.summarize", {"thread_id": thread})
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["r"]["summary"]
    assert summary.startswith("Planning the Q2 launch") and "hunter2" not in summary and "***" in summary
    assert [c["task"] for c in model_calls(root)] == ["summarize"]
    shown = json.loads(cli_here(root, "threads", "show", thread, "--json").stdout)
    assert "hunter2" not in json.dumps(shown) and shown["summary"] == summary


def test_an_empty_summary_fails_the_step(tmp_path: Path) -> None:
    root = project(tmp_path, [{"task": "match", "answer": {"action": "new"}}, {"task": "summarize", "answer": "  "}])
    thread = json.loads(step(root, "thread.match", {"message": "Plan the Q2 launch"}).stdout)["r"]["thread_id"]
    proc = step(root, "thread.summarize", {"thread_id": thread})
    assert proc.returncode == 1 and "empty summary" in proc.stderr, proc.stderr


def test_memory_needs_a_tier(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('[models]\nmemory = "fast"\n', encoding="utf-8")
    (tmp_path / "s.chain.yaml").write_text("steps:\n  - thread.match: {message: hi}\n", encoding="utf-8")
    proc = cli_here(tmp_path, "run", "s.chain.yaml")
    assert proc.returncode == 2 and "memory = 'fast' but no model tier is configured" in proc.stderr, proc.stderr


def test_digest_takes_the_names_from_the_tier_and_only_those_the_journal_holds(tmp_path: Path) -> None:
    root = project(tmp_path, [{"task": "digest", "answer": {
        "people": ["Sarah Lee", "Nobody Invented"], "projects": ["Q2 launch", "password=hunter2hunter2"]}}])
    for text in ("Met Sarah Lee about the Q2 launch budget.", "Sarah Lee sent the Q2 launch dates."):
        assert step(root, "memory.append", {"thread_id": "t1", "content": text}).returncode == 0
    proc = step(root, "memory.digest", {"period": "daily"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["r"]
    assert got["people"] == ["Sarah Lee"] and "Q2 launch" in got["projects"], got
    assert "Nobody Invented" not in json.dumps(got) and "hunter2" not in json.dumps(got)
    assert [c["task"] for c in model_calls(root)] == ["digest"]
    found = json.loads(step(root, "memory.search", {"query": "Sarah", "type": "people"}).stdout)["r"]["matches"]
    assert found and "Sarah Lee" in json.dumps(found[0]) and "Q2 launch" in found[0]["content"], found
