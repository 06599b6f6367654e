"""Threads (LANGUAGE.md §13): the store's thread operations, and thread.match and
thread.summarize in their embedded (model-free) tier, end to end through the CLI on a
real store file, with the seed's scenarios (001: the morning routine's thread switch,
the interrupted flow, the follow-up that continues)."""

from __future__ import annotations

import asyncio

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here

NOW = "2026-11-23T10:00:00+00:00"
SECRET = "sk-abcdefghijklmnop1234567890"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    return tmp_path


def step(project: Path, event: str, params: dict[str, Any], *, now: str = NOW,
         ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a chain of one step (its result as the output `r`) with the clock pinned."""
    chain = {"steps": [{event: params}], "outputs": {"r": "{" + event + "}"}}
    (project / "s.chain.yaml").write_text(json.dumps(chain), encoding="utf-8")
    proc = cli_here(project, "run", "s.chain.yaml", "--now", now, "--json")
    assert (proc.returncode == 0) is ok, proc.stderr
    return proc


def matched(project: Path, message: str, thread_id: str | None = None, now: str = NOW) -> dict[str, Any]:
    params = {"message": message} if thread_id is None else {"message": message, "thread_id": thread_id}
    return dict(json.loads(step(project, "thread.match", params, now=now).stdout)["r"])


def new_thread(project: Path, message: str) -> str:
    got = matched(project, message)
    assert got["action"] == "new", got
    return str(got["thread_id"])


def texts(project: Path, thread_id: str) -> list[str]:
    """The user messages recorded in a thread, in order."""
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        return [e.result["text"] for e in store.thread_events(thread_id) if e.event == "user.input"]


def thread(project: Path, thread_id: str) -> Any:
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        return store.get_thread(thread_id)


def add(project: Path, thread_id: str, event: str, result: Any) -> None:
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        store.add_event(thread_id, event, result, at=NOW)


# -- thread.match ----------------------------------------------------------------------------


def test_a_first_message_creates_a_thread_with_the_message_as_its_first_event(project: Path) -> None:
    got = matched(project, "Good morning, what's on my schedule today?")
    assert got["action"] == "new" and set(got) == {"action", "thread_id"}
    assert got["thread_id"].startswith("thread-") and len(got["thread_id"]) == len("thread-") + 12
    assert texts(project, got["thread_id"]) == ["Good morning, what's on my schedule today?"]
    record = thread(project, got["thread_id"])
    assert record.status == "active" and record.created_at.startswith("2026-11-23T10:00:00")


def test_an_unrelated_first_message_starts_another_thread(project: Path) -> None:
    first = new_thread(project, "Plan the Q2 product launch")
    second = new_thread(project, "Did I have a dentist appointment?")
    assert first != second


def test_a_related_message_continues_the_current_thread_and_is_recorded(project: Path) -> None:
    launch = new_thread(project, "I need to plan the Q2 product launch")
    add(project, launch, "agent.reply", {"message": "Template: 1. Marketing kickoff (T-6 weeks), "
                                                    "2. Engineering freeze (T-4 weeks)"})
    message = "Set up meetings with marketing and engineering teams next week"
    assert matched(project, message, launch) == {"action": "continue", "thread_id": launch}
    assert texts(project, launch) == ["I need to plan the Q2 product launch", message]


def test_a_follow_up_without_words_of_its_own_continues(project: Path) -> None:
    compete = new_thread(project, "Research our competitor's new pricing and how it affects our strategy")
    message = "Create a presentation about this for tomorrow's meeting"
    assert matched(project, message, compete) == {"action": "continue", "thread_id": compete}
    assert matched(project, "ok, do it", compete) == {"action": "continue", "thread_id": compete}
    assert texts(project, compete)[1:] == [message, "ok, do it"]


def test_morning_routine_suggests_switching_to_the_thread_that_fits_better(project: Path) -> None:
    morning = new_thread(project, "Good morning, what's on my schedule today?")
    add(project, morning, "agent.think", {"message": "You have 3 meetings: 9am standup, 2pm client call. "
                                                     "Tasks: Review Q1 report, check the invoice"})
    email = new_thread(project, "Did John reply to my email about the budget?")
    got = matched(project, "Actually, first check if John replied to my email", morning)
    assert got["action"] == "suggest_switch" and got["thread_id"] == email, got
    assert "'john'" in got["reason"].lower() and "'email'" in got["reason"], got["reason"]
    assert morning in got["reason"]
    # a suggestion records nothing: the user decides
    assert texts(project, morning) == ["Good morning, what's on my schedule today?"]
    assert texts(project, email) == ["Did John reply to my email about the budget?"]
    # and back: the schedule is the morning thread's
    back = matched(project, "Never mind, go back to my schedule. Also remind me to buy groceries after work", email)
    assert back["action"] == "suggest_switch" and back["thread_id"] == morning, back
    assert "'schedule'" in back["reason"]


def test_the_current_thread_wins_when_another_fits_only_a_little_better(project: Path) -> None:
    budget = new_thread(project, "Review the budget report with Sarah")
    other = new_thread(project, "Budget numbers for the offsite")
    assert budget != other
    assert matched(project, "Send Sarah the budget report", budget) == {"action": "continue", "thread_id": budget}


def test_without_a_current_thread_a_strong_match_is_suggested_not_duplicated(project: Path) -> None:
    meeting = new_thread(project, "Summarize yesterday's team meeting notes")
    got = matched(project, "What were the team meeting notes again?")
    assert got["action"] == "suggest_switch" and got["thread_id"] == meeting, got
    assert "'team'" in got["reason"] and "'meeting'" in got["reason"]


def test_interrupted_flow_suggests_a_new_thread_then_the_way_back(project: Path) -> None:
    meeting = new_thread(project, "Summarize yesterday's team meeting")
    add(project, meeting, "memory.search", {"matches": [{"content": "Team meeting: Q1 results review, hiring plan"}]})
    got = matched(project, "Wait, did I have a dentist appointment today?", meeting)
    assert got["action"] == "suggest_new" and "thread_id" not in got, got
    assert meeting in got["reason"]
    assert texts(project, meeting) == ["Summarize yesterday's team meeting"]
    appointment = new_thread(project, "Wait, did I have a dentist appointment today?")
    back = matched(project, "Thanks. Now back to that meeting summary", appointment)
    assert back == {"action": "suggest_switch", "thread_id": meeting, "reason": back["reason"]}
    assert "'meeting'" in back["reason"]


def test_an_unknown_current_thread_fails_the_step_naming_it_and_the_known_ones(project: Path) -> None:
    known = new_thread(project, "Plan the Q2 product launch")
    wrong = known[:-1] + ("0" if known[-1] != "0" else "1")
    proc = step(project, "thread.match", {"message": "launch dates", "thread_id": wrong}, ok=False)
    assert proc.returncode == 1
    assert f"no thread {wrong!r}" in proc.stderr and f"did you mean {known!r}" in proc.stderr, proc.stderr
    assert f"the active threads are: {known}" in proc.stderr
    empty = step(project.parent / project.name, "thread.match", {"message": "x", "thread_id": "nope"}, ok=False)
    assert "no thread 'nope'" in empty.stderr


def test_an_unknown_thread_in_an_empty_store_says_how_to_start_one(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    proc = step(tmp_path, "thread.match", {"message": "hello", "thread_id": "morning_001"}, ok=False)
    assert "no thread 'morning_001'" in proc.stderr and "leave thread_id out" in proc.stderr, proc.stderr


def test_an_archived_thread_is_not_continued_nor_suggested(project: Path) -> None:
    from chainlang.tasks.stored import project_store

    old = new_thread(project, "Plan the Q2 product launch")
    with project_store(project) as store:
        store.archive(old)
    proc = step(project, "thread.match", {"message": "Q2 product launch dates", "thread_id": old}, ok=False)
    assert f"the thread {old!r} is archived" in proc.stderr, proc.stderr
    assert matched(project, "Q2 product launch dates")["action"] == "new"


def test_secrets_in_a_message_are_masked_in_what_is_stored(project: Path) -> None:
    first = new_thread(project, f"Deploy the app, the api key is {SECRET}")
    matched(project, f"Deploy again with token={SECRET}", first)
    stored = texts(project, first)
    assert stored == ["Deploy the app, the api key is ***", "Deploy again with token=***"]
    database = (project / ".chainlang" / "store.db").read_bytes()
    assert SECRET.encode() not in database


def test_a_resumed_step_finds_the_thread_it_created(project: Path) -> None:
    """The new thread's id is derived from the step attempt's idempotency key: the same step
    run again (a resume) returns it, and records its message once."""
    from chainlang.runtime.context import FixedClock, RunContext
    from chainlang.stdlib.thread import match

    from datetime import datetime

    ctx = RunContext(run_id="run-1", chain="c.chain.yaml", step="1", event="thread.match", attempt=1,
                     idempotency_key="run-1/1/1", clock=FixedClock(datetime.fromisoformat(NOW)),
                     state_dir=project / ".chainlang" / "state", project=project)
    first = asyncio.run(match(ctx, "Plan the Q2 product launch"))
    again = asyncio.run(match(ctx, "Plan the Q2 product launch"))
    assert first == again and first["action"] == "new"
    assert texts(project, first["thread_id"]) == ["Plan the Q2 product launch"]
    # a continue, resumed, records the message once too
    later = RunContext(run_id="run-2", chain="c.chain.yaml", step="1", event="thread.match", attempt=1,
                       idempotency_key="run-2/1/1", clock=FixedClock(datetime.fromisoformat(NOW)),
                       state_dir=project / ".chainlang" / "state", project=project)
    for _ in range(2):
        assert asyncio.run(match(later, "Q2 launch dates", first["thread_id"])) == {
            "action": "continue", "thread_id": first["thread_id"]}
    assert texts(project, first["thread_id"]) == ["Plan the Q2 product launch", "Q2 launch dates"]


# -- thread.summarize ------------------------------------------------------------------------


def test_summarize_stores_and_returns_an_extractive_summary(project: Path) -> None:
    meeting = new_thread(project, "Summarize yesterday's team meeting.")
    add(project, meeting, "memory.search", {"matches": [
        {"content": "The team meeting reviewed the Q1 results. Sarah presented the budget. Lunch was late."}]})
    later = "2026-11-23T11:30:00+01:00"
    got = json.loads(step(project, "thread.summarize", {"thread_id": meeting}, now=later).stdout)["r"]
    assert got["thread_id"] == meeting and got["updated_at"] == later
    assert "team meeting" in got["summary"] and got["summary"]
    record = thread(project, meeting)
    assert record.summary == got["summary"] and record.updated_at.startswith("2026-11-23T10:30:00")
    # the summary is what later matching reads too
    assert matched(project, "Q1 results", meeting, now=later)["action"] == "continue"


def test_summarize_masks_secrets(project: Path) -> None:
    first = new_thread(project, "Deploy the service.")
    add(project, first, "agent.reply", {"message": f"Use the password is hunter2secret. The deploy key {SECRET}."})
    got = json.loads(step(project, "thread.summarize", {"thread_id": first}).stdout)["r"]
    assert "hunter2secret" not in got["summary"] and SECRET not in got["summary"]
    assert "***" in got["summary"]


def test_summarize_an_unknown_thread_fails_the_step(project: Path) -> None:
    known = new_thread(project, "Plan the Q2 product launch")
    proc = step(project, "thread.summarize", {"thread_id": known + "x"}, ok=False)
    assert f"no thread {known + 'x'!r}" in proc.stderr and f"did you mean {known!r}" in proc.stderr, proc.stderr


# -- the store -------------------------------------------------------------------------------


def test_store_threads_and_their_events(tmp_path: Path) -> None:
    from chainlang.store import StoreError, open_store

    with open_store(tmp_path) as store:
        made = store.create_thread("morning_001", at="2026-01-15T10:30:00+00:00")
        assert (made.id, made.status, made.version, made.summary) == ("morning_001", "active", 1, "")
        with pytest.raises(StoreError, match="thread ID exists"):
            store.create_thread("morning_001")
        first = store.add_event("morning_001", "user.input", {"text": "hi"}, "run-1", "1",
                                at="2026-01-15T10:30:01+00:00")
        again = store.add_event("morning_001", "user.input", {"text": "hi"}, "run-1", "1")
        assert again == first  # a resumed step records once
        store.add_event("morning_001", "calendar.check", {"events": ["standup"]}, "run-1", "2")
        store.add_event("morning_001", "calendar.check", {"events": ["call"]}, "run-1", "3")
        store.add_event("morning_001", "value", {"value": 3}, "run-1", "3", key="count")
        assert [e.event for e in store.thread_events("morning_001")] == [
            "user.input", "calendar.check", "calendar.check", "value"]
        assert [e.event for e in store.thread_events("morning_001", limit=2)] == ["calendar.check", "value"]
        latest = store.latest("morning_001", "calendar.check")
        assert latest is not None and latest.result == {"events": ["call"]}
        named = store.latest("morning_001", "value", key="count")
        assert named is not None and named.result == {"value": 3} and named.to_json()["key"] == "count"
        assert store.latest("morning_001", "email.search") is None
        thread = store.get_thread("morning_001")
        assert thread is not None and thread.version == 5
        with pytest.raises(StoreError, match="is at version 5, not 1"):
            store.set_summary("morning_001", "stale", version=1)
        done = store.set_summary("morning_001", f"Schedule; key {SECRET}", at="2026-01-15T11:00:00+01:00",
                                 version=thread.version)
        assert done.summary == "Schedule; key ***" and done.updated_at.startswith("2026-01-15T10:00:00")
        store.create_thread("email_002")
        assert store.archive("email_002").status == "archived"
        assert [t.id for t in store.list_threads(status="active")] == ["morning_001"]
        assert {t.id for t in store.list_threads()} == {"morning_001", "email_002"}
        with pytest.raises(StoreError, match="no thread with id 'nope'"):
            store.thread_events("nope")
        with pytest.raises(StoreError, match="no thread with id 'nope'"):
            store.add_event("nope", "user.input", {})
        with pytest.raises(StoreError, match="status is one of"):
            store.list_threads(status="open")
        with pytest.raises(StoreError, match="must be JSON"):
            store.add_event("morning_001", "x.y", {"bad": object()})
        masked = store.add_event("morning_001", "x.y", {"notes": [f"token: {SECRET}"]})
        assert masked.result == {"notes": ["token: ***"]}
        kinds = [e["kind"] for e in store.events(limit=100)]
        assert {"thread_created", "thread_event", "thread_summarized", "thread_archived"} <= set(kinds)
