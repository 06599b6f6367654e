"""Conversations that route right (issue 25, deliverable 7; LANGUAGE.md §13), end to end
through the CLI on a real store file: `thread.match` keeps the current thread unless
another is clearly better (`threshold`, `margin`), never routes on words that came from
prompts, plans or the clock, keeps a freshly created thread, and takes `prefer` so a user
can decline a suggestion; `thread.list` lists threads (seed 001's end-of-day loop); an
extractive summary says each sentence once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, cli_here

NOW = "2026-11-19T10:00:00+00:00"

MORNING = "Good morning, what's on my schedule today?"
# What seed 001's morning routine records in its thread: the plan and the chain written by
# the models (their prompts say "summarize"), the tools' results, and the reply.
MORNING_EVENTS: list[tuple[str, Any]] = [
    ("tools.now", {"date": "2026-11-19", "weekday": "Thursday", "time": "08:30:00"}),
    ("agent.think", {"event": "agent.chain", "params": {
        "plan": "1. Get today's date\n2. Check calendar for today\n3. List pending tasks for today\n"
                "4. Summarize both"}}),
    ("calendar.check", {"events": [{"time": "09:00", "title": "Standup"},
                                   {"time": "14:00", "title": "Client call with Acme Corp"}]}),
    ("agent.chain", {"chain": [{"tools.now": {}}, {"calendar.check": {"date": "{tools.now.date}"}},
                               {"agent.think": {"thread_id": "x", "prompt": "summarize calendar events and tasks"}}],
                     "repairs": 0}),
    ("agent.reply", {"message": "You have 3 meetings: 9am standup, 2pm client call, 4pm 1-on-1."}),
]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    return tmp_path


def run(project: Path, steps: list[Any], outputs: dict[str, str], *, now: str = NOW,
        ok: bool = True) -> subprocess.CompletedProcess[str]:
    (project / "s.chain.yaml").write_text(json.dumps({"steps": steps, "outputs": outputs}), encoding="utf-8")
    for old in project.glob("t.jsonl*"):  # the transcript of the last run only
        old.unlink()
    proc = cli_here(project, "run", "s.chain.yaml", "--now", now, "--json", "--transcript", "t.jsonl")
    assert (proc.returncode == 0) is ok, proc.stderr
    return proc


def step(project: Path, event: str, params: dict[str, Any], *, now: str = NOW, ok: bool = True) -> Any:
    proc = run(project, [{event: params}], {"r": "{" + event + "}"}, now=now, ok=ok)
    return json.loads(proc.stdout)["r"] if ok else proc.stderr


def matched(project: Path, message: str, thread_id: str | None = None, **more: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message, **more}
    if thread_id is not None:
        params["thread_id"] = thread_id
    return dict(step(project, "thread.match", params))


def new_thread(project: Path, message: str) -> str:
    got = matched(project, message)
    assert got["action"] == "new", got
    return str(got["thread_id"])


def add(project: Path, thread_id: str, items: list[tuple[str, Any]], at: str = NOW) -> None:
    """Events recorded in a thread as an attached run records them (`ThreadRecorder`)."""
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        for event, result in items:
            store.add_event(thread_id, event, result, at=at)


def said(project: Path, thread_id: str) -> list[str]:
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        return [e.result["text"] for e in store.thread_events(thread_id) if e.event == "user.input"]


def morning_thread(project: Path) -> str:
    morning = new_thread(project, MORNING)
    add(project, morning, MORNING_EVENTS)
    assert step(project, "thread.summarize", {"thread_id": morning})["summary"]
    return morning


# -- words from prompts and the system ------------------------------------------------------


def test_words_of_a_models_prompts_and_plans_do_not_route_a_message(project: Path) -> None:
    """The finding: "Summarize yesterday's team meeting" was sent to the morning thread, whose
    only "summarize" was in a plan and a prompt written by the models."""
    morning = morning_thread(project)
    got = matched(project, "Summarize yesterday's team meeting")
    assert got["action"] == "new" and got["thread_id"] != morning, got
    summary = step(project, "thread.summarize", {"thread_id": morning})["summary"]
    assert "summarize" not in summary.lower() and "3 meetings" in summary, summary


def test_the_thread_still_matches_on_what_was_said_replied_and_found(project: Path) -> None:
    morning = morning_thread(project)
    other = new_thread(project, "Research the competitor's new pricing")
    # "standup" is in a tool's result, "meetings" in the reply, "schedule" in what the user said
    got = matched(project, "When is the standup meeting on my schedule?", other)
    assert got["action"] == "suggest_switch" and got["thread_id"] == morning, got
    assert "'standup'" in got["reason"] and "'schedule'" in got["reason"], got["reason"]


def test_the_clocks_words_do_not_route_a_message(project: Path) -> None:
    morning = morning_thread(project)
    # the weekday is in tools.now's result only (a number is never a word of the topic)
    assert matched(project, "Thursday 2026-11-19 roses", morning)["action"] == "suggest_new"


# -- a fresh thread, threshold and margin -----------------------------------------------------


def test_a_freshly_created_thread_is_kept_when_nothing_is_clearly_better(project: Path) -> None:
    """The finding: the next message in a thread just created was suggested away again."""
    morning_thread(project)
    made = cli(project, "threads", "create", "meeting-notes")
    assert made.returncode == 0, made.stderr
    got = matched(project, "Summarize yesterday's team meeting", "meeting-notes")
    assert got == {"action": "continue", "thread_id": "meeting-notes"}
    assert said(project, "meeting-notes") == ["Summarize yesterday's team meeting"]


def test_a_fresh_thread_still_gets_a_suggestion_when_another_is_clearly_better(project: Path) -> None:
    morning = morning_thread(project)
    assert cli(project, "threads", "create", "fresh").returncode == 0
    got = matched(project, "Move the standup and the client call", "fresh")
    assert got["action"] == "suggest_switch" and got["thread_id"] == morning, got


def test_threshold_sets_the_words_in_common_a_suggestion_needs(project: Path) -> None:
    morning = morning_thread(project)
    message = "Summarize yesterday's team meeting"  # one word in common with the morning thread
    got = matched(project, message, threshold=1)
    assert got["action"] == "suggest_switch" and got["thread_id"] == morning, got
    assert "'meeting'" in got["reason"]
    # with a current thread that shares nothing, too: one word is not enough by default
    dentist = new_thread(project, "Did I have a dentist appointment today?")
    assert matched(project, "Who joined the meeting?", dentist)["action"] == "suggest_new"
    got = matched(project, "Who joined the meeting?", dentist, threshold=1)
    assert got["action"] == "suggest_switch" and got["thread_id"] == morning, got


def test_margin_sets_how_much_better_another_thread_must_be(project: Path) -> None:
    flight = new_thread(project, "Book the flight to Berlin")
    hotel = new_thread(project, "Find a hotel in Berlin near the conference venue")
    message = "Which Berlin hotel is closest to the conference?"  # flight: 1 word; hotel: 3
    got = matched(project, message, flight)
    assert got["action"] == "suggest_switch" and got["thread_id"] == hotel, got
    assert matched(project, message, flight, margin=2)["action"] == "suggest_switch"
    assert matched(project, message, flight, margin=3) == {"action": "continue", "thread_id": flight}
    assert said(project, flight) == ["Book the flight to Berlin", message]


def test_a_message_that_goes_back_needs_one_word_in_common(project: Path) -> None:
    """Seed 001's "Never mind, go back to my schedule": one word names the thread it returns to."""
    morning = morning_thread(project)
    email = new_thread(project, "Did John reply to my email about the contract?")
    back = matched(project, "Never mind, go back to my schedule. Also remind me to buy groceries after work", email)
    assert back["action"] == "suggest_switch" and back["thread_id"] == morning, back
    # the same words without going back: not enough for a suggestion
    assert matched(project, "Buy groceries after work, and the schedule", email)["action"] == "suggest_new"


@pytest.mark.parametrize("params, message", [
    ({"threshold": 0}, "threshold"),
    ({"margin": -1}, "margin"),
    ({"prefer": "other"}, "prefer"),
])
def test_bad_routing_params_fail_the_step_naming_them(project: Path, params: dict[str, Any], message: str) -> None:
    err = step(project, "thread.match", {"message": "hello", **params}, ok=False)
    assert message in err and "Traceback" not in err, err


# -- declining a suggestion -------------------------------------------------------------------


def test_prefer_current_continues_the_current_thread_whatever_matches_elsewhere(project: Path) -> None:
    morning = morning_thread(project)
    email = new_thread(project, "Did John reply to my email about the contract?")
    message = "Actually, first check if John replied to my email"
    assert matched(project, message, morning)["thread_id"] == email  # suggested ...
    got = matched(project, message, morning, prefer="current")  # ... and declined
    assert got == {"action": "continue", "thread_id": morning}
    assert said(project, morning) == [MORNING, message]
    assert said(project, email) == ["Did John reply to my email about the contract?"]


def test_prefer_new_starts_a_thread_even_when_one_matches(project: Path) -> None:
    morning = morning_thread(project)
    message = "Move the standup and the client call"
    assert matched(project, message)["thread_id"] == morning  # suggested ...
    got = matched(project, message, prefer="new")  # ... and declined
    assert got["action"] == "new" and got["thread_id"] not in (morning, None), got
    assert said(project, got["thread_id"]) == [message]
    again = matched(project, "Also the 1-on-1", morning, prefer="new")
    assert again["action"] == "new" and again["thread_id"] not in (morning, got["thread_id"]), again
    # without a current thread, `current` leaves nothing to keep: no suggestion, a new thread
    alone = matched(project, message, prefer="current")
    assert alone["action"] == "new" and alone["thread_id"] != morning, alone


def test_prefer_current_still_checks_the_current_thread(project: Path) -> None:
    err = step(project, "thread.match", {"message": "hi", "thread_id": "nope", "prefer": "current"}, ok=False)
    assert "no thread 'nope'" in err, err


def test_declining_a_suggestion_in_a_conversation_chain(project: Path) -> None:
    """The documented pattern: the chain runs the turn again with `prefer` after the user declines."""
    morning = morning_thread(project)
    email = new_thread(project, "Did John reply to my email about the contract?")
    turn = [
        {"thread.match": {"message": "{inputs.message}", "thread_id": "{inputs.thread_id}",
                          "prefer": "{inputs.prefer}"}},
    ]
    chain = {"inputs": {"message": {"type": "string"}, "thread_id": {"type": "string"},
                        "prefer": {"type": "string", "default": "auto"}},
             "steps": turn, "outputs": {"action": "{thread.match.action}", "thread_id": "{thread.match.thread_id}"}}
    (project / "turn.chain.yaml").write_text(json.dumps(chain), encoding="utf-8")
    message = "Actually, first check if John replied to my email"
    for prefer, want in (("auto", {"action": "suggest_switch", "thread_id": email}),
                         ("current", {"action": "continue", "thread_id": morning})):
        proc = cli(project, "run", "turn.chain.yaml", "--now", NOW, "--json", "--input", f"message={message}",
                   "--input", f"thread_id={morning}", "--input", f"prefer={prefer}")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == want


# -- the model tier ---------------------------------------------------------------------------


def tier_project(root: Path, rules: list[dict[str, Any]]) -> None:
    (root / "chainlang.toml").write_text(
        '[models]\nmemory = "fast"\n\n[models.fast]\nprovider = "scripted"\nrules = "answers.yaml"\n',
        encoding="utf-8")
    (root / "answers.yaml").write_text(json.dumps({"rules": rules}), encoding="utf-8")


def model_calls(root: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (root / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in lines if r["type"] == "model_call"]


def test_the_model_tier_never_sees_words_from_prompts_and_plans(project: Path) -> None:
    morning = morning_thread(project)  # summarized without a model
    tier_project(project, [{"task": "match", "answer": {"action": "new", "reason": "a new topic"}}])
    assert matched(project, "Summarize yesterday's team meeting")["action"] == "new"
    [call] = model_calls(project)
    asked = json.dumps(call["request"]["messages"])
    assert morning in asked and "3 meetings" in asked  # the morning thread is shown: its summary
    assert "summariz" not in asked.replace("Summarize yesterday", "").lower(), asked  # no plan, no prompt


def test_prefer_is_decided_before_the_model_is_asked(project: Path) -> None:
    morning = morning_thread(project)
    tier_project(project, [{"task": "match", "answer": {"action": "suggest_new", "reason": "x"}}])
    assert matched(project, "Plan the garden", morning, prefer="current") == {"action": "continue", "thread_id": morning}
    assert model_calls(project) == []
    got = matched(project, "Move the standup", prefer="new")
    assert got["action"] == "new" and model_calls(project) == []


# -- thread.list ------------------------------------------------------------------------------


def test_thread_list_filters_by_status_and_since_newest_first(project: Path) -> None:
    from chainlang.tasks.stored import project_store

    assert step(project, "thread.list", {}) == {"threads": []}
    assert not (project / ".chainlang" / "store.db").exists()  # listing creates no store
    with project_store(project) as store:
        store.create_thread("old", summary="Q1 budget review", at="2026-11-10T09:00:00+00:00")
        store.create_thread("mid", at="2026-11-18T23:30:00+00:00")
        store.create_thread("new", summary="Garden plans", at="2026-11-19T08:00:00+00:00")
        store.create_thread("gone", at="2026-11-17T08:00:00+00:00")
        store.archive("gone", at="2026-11-19T09:00:00+00:00")
    listed = step(project, "thread.list", {})["threads"]
    assert [t["thread_id"] for t in listed] == ["new", "mid", "old"]
    assert listed[0] == {"thread_id": "new", "summary": "Garden plans", "status": "active",
                         "created_at": listed[0]["created_at"], "updated_at": listed[0]["updated_at"]}
    assert listed[0]["updated_at"].startswith("2026-11-19T08:00:00")
    ids = lambda **p: [t["thread_id"] for t in step(project, "thread.list", p)["threads"]]  # noqa: E731
    assert ids(status="archived") == ["gone"]
    assert ids(status="any") == ["gone", "new", "mid", "old"]
    assert ids(since="2026-11-19") == ["new"]
    assert ids(since="2026-11-18T23:00:00+00:00") == ["new", "mid"]
    assert ids(since="2026-11-19T00:00:00+01:00") == ["new", "mid"]  # 23:00 UTC the day before
    assert ids(since="2026-11-19", status="any") == ["gone", "new"]
    assert ids(limit=2) == ["new", "mid"]
    # a date is a day of the run's clock
    proc = run(project, [{"thread.list": {"since": "2026-11-19"}}], {"r": "{thread.list}"},
               now="2026-11-19T10:00:00+02:00")  # the day began at 22:00 UTC
    assert [t["thread_id"] for t in json.loads(proc.stdout)["r"]["threads"]] == ["new", "mid"]
    proc = run(project, [{"thread.list": {"since": "2026-11-19"}}], {"r": "{thread.list}"},
               now="2026-11-19T10:00:00-02:00")
    assert [t["thread_id"] for t in json.loads(proc.stdout)["r"]["threads"]] == ["new"]
    proc = run(project, [{"thread.list": {"since": "2026-11-18"}}], {"r": "{thread.list}"},
               now="2026-11-18T10:00:00+01:00")
    assert [t["thread_id"] for t in json.loads(proc.stdout)["r"]["threads"]] == ["new", "mid"]


@pytest.mark.parametrize("params, message", [
    ({"since": "last week"}, "since"),
    ({"since": "2026-13-40"}, "since"),
    ({"status": "open"}, "status"),
    ({"limit": 0}, "limit"),
    ({"limit": 100000}, "limit"),
])
def test_thread_list_refuses_bad_params_clearly(project: Path, params: dict[str, Any], message: str) -> None:
    err = step(project, "thread.list", params, ok=False)
    assert message in err and "Traceback" not in err, err


def test_the_end_of_day_loop_appends_each_active_thread_to_the_journal(project: Path) -> None:
    """Seed 001, case 5: "for each active thread -> memory.append"."""
    morning = morning_thread(project)
    new_thread(project, "Research the competitor's new pricing")  # no summary: skipped
    steps = [
        {"thread.list": {"status": "active", "since": "{tools.now.date}"}},
        {"foreach": "thread.list.threads", "steps": [
            {"if": "item.summary != ''",
             "memory.append": {"thread_id": "{item.thread_id}", "content": "{item.summary}"}}]},
        {"memory.search": {"query": "standup"}},
    ]
    proc = run(project, [{"tools.now": {}}, *steps], {"found": "{memory.search.matches}"})
    found = json.loads(proc.stdout)["found"]
    assert [m["thread_id"] for m in found] == [morning], found


# -- summaries --------------------------------------------------------------------------------


def test_a_summary_says_each_sentence_once(project: Path) -> None:
    """The finding: "You have 3 meetings..." three times."""
    morning = new_thread(project, MORNING)
    reply = "You have 3 meetings: 9am standup, 2pm client call, 4pm 1-on-1."
    add(project, morning, [("agent.reply", {"message": reply}),
                           ("notes.read", {"content": reply.upper()}),
                           ("agent.reply", {"message": "  you have 3 meetings:  9am standup, 2pm client call, 4pm 1-on-1. "}),
                           ("task.list", {"tasks": [{"description": "Review Q1 report"}]})])
    summary = step(project, "thread.summarize", {"thread_id": morning})["summary"]
    assert summary.lower().count("you have 3 meetings") == 1, summary
    assert "Review Q1 report" in summary or MORNING in summary, summary


def test_lexical_summarize_drops_repeated_sentences() -> None:
    from chainlang.stdlib.lexical import summarize

    text = "The budget is due Friday. Sarah owns the budget. The budget is due Friday."
    assert summarize([text, "the  BUDGET is due friday", "Lunch was late."], sentences=3) == (
        "The budget is due Friday. Sarah owns the budget. Lunch was late.")
    assert summarize(["Same.", "same", "SAME!"], sentences=3) == "Same."


def test_a_named_chains_outputs_do_not_route_a_message(project: Path) -> None:
    """A turn's chain (the assistant's `assistant.turn`) outputs the plan the model wrote; its
    steps are in the thread one by one, its outputs are not the conversation."""
    (project / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (project / "turn.chain.yaml").write_text(json.dumps({
        "chain": "my.turn", "steps": [{"user.notify": {"message": "Planned."}}],
        "outputs": {"plan": "1. Search the notes\n2. Summarize the meeting"}}), encoding="utf-8")
    assert cli(project, "threads", "create", "planning").returncode == 0
    (project / "s.chain.yaml").write_text(json.dumps({"steps": [{"my.turn": {}}]}), encoding="utf-8")
    proc = cli(project, "run", "s.chain.yaml", "--now", NOW, "--thread", "planning")
    assert proc.returncode == 0, proc.stderr
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        recorded = [e.event for e in store.thread_events("planning")]
    assert "my.turn" in recorded and "user.notify" in recorded, recorded
    got = matched(project, "Summarize the meeting notes")
    assert got["action"] == "new", got
