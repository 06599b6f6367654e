"""Runs attached to threads (LANGUAGE.md §13), end to end through the CLI on a real store
file: attaching a run (`--thread`, the input `thread_id`, a `thread.match` that continues or
starts a thread), the results of its steps recorded in the thread once (also across a kill
and a resume), `{thread.ID.KEY}` references, and `chainlang threads`."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, cli_here, records

NOW = "2099-11-23T10:00:00+00:00"  # after the threads are created (on the wall clock)
SECRET = "sk-abcdefghijklmnop1234567890"

TOOLS = '''\
import os
import signal
from pathlib import Path

from chainlang import event


@event("t.echo", description="Return the value", idempotent=True)
def echo(value: object = None) -> dict:
    return {"value": value}


@event("t.fail", description="Fail", idempotent=True)
def fail() -> dict:
    raise ValueError("it fails")


@event("t.crash", description="Kill the process, once (while .chainlang/crash exists)", idempotent=True)
def crash() -> dict:
    marker = Path(".chainlang") / "crash"
    if marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"crashed": False}
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tt.py"]\n', encoding="utf-8")
    return tmp_path


def chain(project: Path, text: str, name: str = "c.chain.yaml") -> str:
    (project / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def run(project: Path, name: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """`chainlang run`, in this process unless it is to be killed (`code=-9`, by t.crash)."""
    command = cli if code < 0 else cli_here
    proc = command(project, "run", name, "--now", NOW, "--json", "--progress", "quiet", *args)
    assert proc.returncode == code, proc.stderr
    return proc


def outputs(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


def create(project: Path, thread_id: str, summary: str = "") -> None:
    args = ["--summary", summary] if summary else []
    proc = cli_here(project, "threads", "create", thread_id, *args)
    assert proc.returncode == 0 and proc.stdout == f"{thread_id}: active\n", proc.stderr


def events(project: Path, thread_id: str) -> list[tuple[str, str | None, str | None, Any]]:
    """A thread's events as (event, key, step, result), in order."""
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        return [(e.event, e.key, e.step, e.result) for e in store.thread_events(thread_id)]


STEPS = """\
steps:
  - id: analysis
    t.echo: {value: "pricing is up 10%"}
  - t.echo: {value: 2}
  - t.fail: {}
    on_error: continue
  - t.echo: {value: skipped}
    if: "1 == 2"
  - chain.run: {path: sub.chain.yaml}
  - thread.summarize: {thread_id: t1}
"""
SUB = """\
steps:
  - id: inner
    t.echo: {value: "in the sub-chain, token=%s"}
outputs:
  said: "{inner.value}"
""" % SECRET


# -- attaching a run, and what is recorded ----------------------------------------------------


def test_a_run_attached_by_thread_records_each_ok_step_once_with_its_id(project: Path) -> None:
    create(project, "t1", "Pricing research")
    chain(project, SUB, "sub.chain.yaml")
    proc = run(project, chain(project, STEPS), "--thread", "t1", "--transcript", "run.jsonl")
    got = events(project, "t1")
    # ok steps only (not the failed, nor the skipped one), the sub-chain's steps and the sub-chain
    # step itself, not thread.summarize; a step's id is its key; secrets masked
    assert got == [
        ("t.echo", "analysis", "1", {"value": "pricing is up 10%"}),
        ("t.echo", None, "2", {"value": 2}),
        ("t.echo", "inner", "5/1", {"value": "in the sub-chain, token=***"}),
        ("chain.run", None, "5", {"said": "in the sub-chain, token=***"}),
    ], got
    started = records(project / "run.jsonl")[0]
    assert started["type"] == "run_started" and started["thread"] == "t1"
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        recorded = store.thread_events("t1")
        thread = store.get_thread("t1")
    assert {e.run_id for e in recorded} == {started["run_id"]}
    assert {e.at for e in recorded} == {"2099-11-23T10:00:00.000000+00:00"}  # the run's clock (--now)
    assert thread is not None and "pricing" in thread.summary  # summarized from the events
    assert SECRET not in (project / ".chainlang" / "store.db").read_bytes().decode("utf-8", "replace")
    assert proc.stdout == "{}\n"


def test_a_run_not_attached_records_nothing(project: Path) -> None:
    create(project, "t1")
    chain(project, SUB, "sub.chain.yaml")
    run(project, chain(project, STEPS.replace("  - thread.summarize: {thread_id: t1}\n", "")), "--transcript",
        "run.jsonl")
    assert events(project, "t1") == []
    assert "thread" not in records(project / "run.jsonl")[0]


ATTACH_BY_INPUT = """\
inputs:
  thread_id: {type: string, default: ""}
steps:
  - id: answer
    t.echo: {value: "{inputs.thread_id}"}
outputs:
  answer: "{answer.value}"
"""


def test_an_input_named_thread_id_attaches_the_run(project: Path) -> None:
    create(project, "t1")
    name = chain(project, ATTACH_BY_INPUT)
    # the empty default (the seed's entry flow) attaches nothing
    assert outputs(run(project, name, "--transcript", "run.jsonl")) == {"answer": ""}
    assert "thread" not in records(project / "run.jsonl")[0] and events(project, "t1") == []
    assert outputs(run(project, name, "--input", "thread_id=t1")) == {"answer": "t1"}
    assert events(project, "t1") == [("t.echo", "answer", "1", {"value": "t1"})]
    # --thread and the input may both be given when they agree
    run(project, name, "--input", "thread_id=t1", "--thread", "t1")
    assert len(events(project, "t1")) == 2
    # not when they differ
    create(project, "t2")
    both = run(project, name, "--input", "thread_id=t1", "--thread", "t2", code=2)
    assert "--thread t2 and the input thread_id=t1 name two threads" in both.stderr, both.stderr
    # an input thread_id that is not text (declared without a type)
    untyped = chain(project, ATTACH_BY_INPUT.replace('{type: string, default: ""}', "{}"), "u.chain.yaml")
    number = run(project, untyped, "--input", "thread_id=7", code=2)
    assert "the input thread_id attaches the run to a thread: give a thread id (text), not int 7" in number.stderr
    assert len(events(project, "t1")) == 2 and events(project, "t2") == []


def test_an_unknown_or_archived_thread_is_a_usage_error(project: Path) -> None:
    name = chain(project, "steps:\n  - t.echo: {value: 1}\n")
    empty = run(project, name, "--thread", "morning_001", code=2)
    assert empty.stderr.startswith("chainlang: error: --thread morning_001: no thread 'morning_001' in the "
                                   "project's store; there are no active threads; create it with: chainlang "
                                   "threads create morning_001"), empty.stderr
    assert not (project / ".chainlang" / "store.db").exists()  # asking created no store
    assert not list((project / ".chainlang" / "runs").glob("*.jsonl")) if (project / ".chainlang").exists() else True
    for thread_id in ("a1", "a2", "a3", "a4", "a5", "a6"):
        create(project, thread_id)
    wrong = run(project, name, "--thread", "a7", code=2)
    assert "no thread 'a7'" in wrong.stderr and "the active threads are: a6, a5, a4, a3, a2 and 1 more" in wrong.stderr
    by_input = chain(project, ATTACH_BY_INPUT.replace(', default: ""', ""), "i.chain.yaml")
    unknown = run(project, by_input, "--input", "thread_id=nope", code=2)
    assert "the input thread_id=nope: no thread 'nope'" in unknown.stderr, unknown.stderr
    archived = cli_here(project, "threads", "archive", "a1")
    assert archived.returncode == 0 and archived.stdout == "a1: archived\n"
    proc = run(project, name, "--thread", "a1", code=2)
    assert "--thread a1: the thread 'a1' is archived; attach the run to an active thread" in proc.stderr
    assert all(events(project, t) == [] for t in ("a1", "a2"))


# -- kill and resume --------------------------------------------------------------------------


KILLED = """\
steps:
  - id: first
    t.echo: {value: before}
  - t.crash: {}
  - id: last
    t.echo: {value: after}
outputs:
  last: "{last.value}"
"""


def test_a_killed_then_resumed_run_records_each_step_once(project: Path) -> None:
    create(project, "t1")
    (project / ".chainlang" / "crash").write_text("", encoding="utf-8")
    killed = run(project, chain(project, KILLED), "--thread", "t1", "--transcript", "run.jsonl", code=-9)
    assert killed.stdout == ""
    assert events(project, "t1") == [("t.echo", "first", "1", {"value": "before"})]
    resumed = cli(project, "resume", "run.jsonl", "--json", "--progress", "quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(resumed) == {"last": "after"}
    assert events(project, "t1") == [  # step 1 replayed: not recorded again
        ("t.echo", "first", "1", {"value": "before"}),
        ("t.crash", None, "2", {"crashed": False}),
        ("t.echo", "last", "3", {"value": "after"}),
    ]
    starts = [r for r in records(project / "run.jsonl") if r["type"] == "run_started"]
    assert [(r["resumed"], r["thread"]) for r in starts] == [(False, "t1"), (True, "t1")]  # attached again
    # resuming the finished run changes nothing
    again = cli(project, "resume", "run.jsonl", "--json", "--progress", "quiet")
    assert again.returncode == 0 and len(events(project, "t1")) == 3


MATCHED = """\
inputs:
  message: {type: string}
steps:
  - t.echo: {value: "before the match: not attached"}
  - thread.match: {message: "{inputs.message}"}
  - t.crash: {}
  - id: reply
    t.echo: {value: "on it"}
  - thread.summarize: {thread_id: "{thread.match.thread_id}"}
outputs:
  thread: "{thread.match.thread_id}"
  action: "{thread.match.action}"
  reply: "{thread.match.action}: {reply.value}"
"""


def test_a_thread_match_that_starts_or_continues_a_thread_attaches_the_run(project: Path) -> None:
    name = chain(project, MATCHED)
    first = outputs(run(project, name, "--input", "message=Plan the Q2 product launch with marketing"))
    assert first["action"] == "new" and first["reply"] == "new: on it"
    thread_id = first["thread"]
    assert [(e, k, s) for e, k, s, _ in events(project, thread_id)] == [
        ("user.input", None, "2"), ("thread.match", None, "2"), ("t.crash", None, "3"), ("t.echo", "reply", "4")]
    # a second message on the same topic, without a thread: the strong match is only suggested,
    # which attaches nothing; with the thread it continues it, and the run is attached
    suggested = outputs(run(project, name, "--input", "message=Q2 product launch budget"))
    assert suggested["action"] == "suggest_switch" and len(events(project, thread_id)) == 4
    by_input = chain(project, MATCHED.replace("message: {type: string}", "message: {type: string}\n  thread_id: "
                                              "{type: string}").replace('"{inputs.message}"}',
                                                                        '"{inputs.message}", thread_id: '
                                                                        '"{inputs.thread_id}"}'), "i.chain.yaml")
    cont = outputs(run(project, by_input, "--input", "message=launch date", "--input", f"thread_id={thread_id}"))
    assert cont["action"] == "continue"
    got = events(project, thread_id)
    assert [e for e, _k, _s, _r in got].count("t.echo") == 3  # attached from the start: step 1 recorded too
    assert ("t.echo", None, "1", {"value": "before the match: not attached"}) in got


def test_a_resumed_run_attaches_again_at_its_thread_match(project: Path) -> None:
    (project / ".chainlang").mkdir()
    (project / ".chainlang" / "crash").write_text("", encoding="utf-8")
    killed = run(project, chain(project, MATCHED), "--input", "message=Dentist appointment on Thursday",
                 "--transcript", "run.jsonl", code=-9)
    assert killed.stdout == ""
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        (thread,) = store.list_threads()
    assert [e for e, *_ in events(project, thread.id)] == ["user.input", "thread.match"]
    resumed = cli(project, "resume", "run.jsonl", "--json", "--progress", "quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(resumed) == {"thread": thread.id, "action": "new", "reply": "new: on it"}
    assert [(e, k, s) for e, k, s, _ in events(project, thread.id)] == [
        ("user.input", None, "2"), ("thread.match", None, "2"), ("t.crash", None, "3"), ("t.echo", "reply", "4")]
    assert "thread" not in records(project / "run.jsonl")[0]  # attached mid-run: derived, not recorded


# -- {thread.ID.KEY} ---------------------------------------------------------------------------


READ = """\
steps:
  - t.echo:
      value:
        summary: "{thread.t1.summary}"
        status: "{thread.t1.status}"
        updated: "{thread.t1.updated_at}"
        event: "{thread.t1.memory.search.matches[0].content}"
        result: "{thread.t1.memory.search.result.matches[-1].content}"
        missing_path: "{thread.t1.memory.search.nothing.here}"
        named: "{thread.t1.analysis.value}"
        whole: "{thread.t1.analysis}"
        quoted: "{thread['t-2'].summary}"
outputs:
  read: "{t.echo.value}"
"""


def test_thread_references_read_the_summary_status_events_and_named_values(project: Path) -> None:
    from chainlang.tasks.stored import project_store

    create(project, "t1", "Competitor pricing research")
    create(project, "t-2", "Another thread")
    with project_store(project) as store:
        store.add_event("t1", "memory.search", {"matches": [{"content": "old"}]}, at=NOW)
        store.add_event("t1", "memory.search", {"matches": [{"content": "Acme cut prices"}, {"content": "last"}]},
                        at=NOW)
    analyse = chain(project, "steps:\n  - id: analysis\n    t.echo: {value: 'prices -10%'}\n", "a.chain.yaml")
    run(project, analyse, "--thread", "t1")
    got = outputs(run(project, chain(project, READ)))["read"]
    assert got == {"summary": "Competitor pricing research", "status": "active",
                   "updated": "2099-11-23T10:00:00.000000+00:00", "event": "Acme cut prices", "result": "last",
                   "missing_path": None, "named": "prices -10%", "whole": {"value": "prices -10%"},
                   "quoted": "Another thread"}


def test_a_thread_reference_to_a_missing_thread_or_key_fails_the_step(project: Path) -> None:
    create(project, "t1")
    run(project, chain(project, "steps:\n  - id: analysis\n    t.echo: {value: 1}\n", "a.chain.yaml"), "--thread", "t1")
    missing = run(project, chain(project, "steps:\n  - t.echo: {value: '{thread.t1.competitors}'}\n"), code=1)
    assert ("thread.t1.competitors: the thread 't1' has no value for 'competitors'; it has summary, status, "
            "created_at, updated_at; its events t.echo; its named values analysis") in missing.stderr, missing.stderr
    nothread = run(project, chain(project, "steps:\n  - t.echo: {value: '{thread.t9.summary}'}\n"), code=1)
    assert "thread.t9.summary: no thread 't9' in the project's store; the active threads are: t1" in nothread.stderr
    # a reference without a key is a check error: the chain does not start
    nokey = run(project, chain(project, "steps:\n  - t.echo: {value: '{thread.t1}'}\n"), code=1)
    assert "a thread reference names a thread and a key: thread.ID.KEY [CL021 ref-unknown]" in nokey.stderr
    assert "the chain has errors: it was not started" in nokey.stderr


def test_thread_match_earlier_in_the_chain_wins_over_a_thread_named_match(project: Path) -> None:
    create(project, "match", "a thread that the reference does not reach")
    name = chain(project, """\
        steps:
          - thread.match: {message: "Book the team offsite"}
        outputs:
          id: "{thread.match.thread_id}"
        """)
    assert outputs(run(project, name))["id"].startswith("thread-")
    # the rest of the reference is a path into thread.match's result, checked as such
    path = cli_here(project, "check", chain(project, (project / name).read_text(encoding="utf-8").replace(
        "thread_id}", "summary}"), "p.chain.yaml"))
    assert path.returncode == 1 and "the result of thread.match has no 'summary'" in path.stdout, path.stdout
    # without a thread.match step it is a check error, not a read of the thread 'match'
    bad = cli_here(project, "check", chain(project, "steps:\n  - t.echo: {value: '{thread.match.summary}'}\n", "b.chain.yaml"))
    assert bad.returncode == 1 and "thread.match does not run in this chain before this point" in bad.stdout


# -- chainlang threads -------------------------------------------------------------------------


def test_chainlang_threads_lists_and_shows_threads(project: Path) -> None:
    empty = cli_here(project, "threads")
    assert (empty.returncode, empty.stdout) == (0, "no threads\n")
    assert json.loads(cli_here(project, "threads", "--json").stdout) == {"threads": []}
    create(project, "pricing", "Competitor pricing research: Acme cut prices by 10% " + "and more " * 10)
    create(project, "dentist")
    run(project, chain(project, "steps:\n  - id: analysis\n    t.echo: {value: {token: '%s'}}\n" % SECRET),
        "--thread", "pricing")
    listed = cli_here(project, "threads")
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("pricing  active   2099-11-23T10:00:00Z  Competitor pricing research: Acme cut")
    assert lines[0].endswith("…") and len(lines) == 2 and lines[1].startswith("dentist  active   ")
    rows = json.loads(cli_here(project, "threads", "--json").stdout)["threads"]
    assert [r["thread_id"] for r in rows] == ["pricing", "dentist"]
    assert set(rows[0]) == {"thread_id", "status", "summary", "created_at", "updated_at"}
    shown = cli_here(project, "threads", "show", "pricing")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[:2] == ["thread pricing: active",
                                             "summary: " + rows[0]["summary"]]
    assert 't.echo (analysis): {"value": {"token": "***"}}  [run ' in shown.stdout
    body = json.loads(cli_here(project, "threads", "show", "pricing", "--json").stdout)
    assert body["thread_id"] == "pricing" and len(body["events"]) == 1
    event = body["events"][0]
    assert (event["event"], event["key"], event["step"], event["result"]) == (
        "t.echo", "analysis", "1", {"value": {"token": "***"}})
    cli_here(project, "threads", "archive", "dentist")
    archived = cli_here(project, "threads", "list", "--status", "archived")
    assert archived.stdout.startswith("dentist  archived ")
    # another directory: --project
    elsewhere = cli_here(project.parent, "threads", "--project", str(project), "--json")
    assert len(json.loads(elsewhere.stdout)["threads"]) == 2
    unknown = cli_here(project, "threads", "show", "pricin")
    assert unknown.returncode == 2 and "no thread 'pricin' in the project's store (did you mean 'pricing'?)" in \
        unknown.stderr, unknown.stderr
    assert "the active threads are: pricing" in unknown.stderr
    twice = cli_here(project, "threads", "create", "pricing")
    assert twice.returncode == 2 and "already a thread" in twice.stderr


def test_a_thread_match_in_a_sub_chain_attaches_the_run(project: Path) -> None:
    chain(project, 'inputs:\n  message: {type: string}\nsteps:\n  - thread.match: {message: "{inputs.message}"}\n'
                   'outputs:\n  thread: "{thread.match.thread_id}"\n', "entry.chain.yaml")
    name = chain(project, """\
        steps:
          - t.echo: {value: not attached yet}
          - chain.run: {path: entry.chain.yaml, inputs: {message: Book the team offsite in March}}
          - id: after
            t.echo: {value: attached}
        outputs:
          thread: "{chain.run.thread}"
        """)
    thread_id = outputs(run(project, name))["thread"]
    assert [(e, k, s) for e, k, s, _ in events(project, thread_id)] == [
        ("user.input", None, "2/1"), ("thread.match", None, "2/1"), ("chain.run", None, "2"), ("t.echo", "after", "3")]


def test_an_emits_hook_action_attaches_at_its_thread_match_and_reads_threads(project: Path) -> None:
    """chainlang emit: the action's thread.match attaches it (its later steps are recorded in the
    thread) and {thread.ID.KEY} reads the store there as in a run."""
    create(project, "t1", "pricing review with Sarah")
    (project / "mail.hooks.yaml").write_text(textwrap.dedent("""\
        events:
          mail.got:
            payload: {type: object, properties: {subject: {type: string}}, required: [subject]}
        hooks:
          - id: route
            trigger: post:mail.got
            action:
              - thread.match: {message: "{event.result.subject}"}
              - id: seen
                t.echo: {value: "{thread.t1.summary}"}
        """), encoding="utf-8")
    proc = cli(project, "emit", "mail.got", "--data", json.dumps({"subject": "Budget numbers for the offsite"}))
    assert proc.returncode == 0, proc.stderr
    made = [t for t in json.loads(cli(project, "threads", "--json").stdout)["threads"] if t["thread_id"] != "t1"]
    assert len(made) == 1, made
    got = events(project, made[0]["thread_id"])
    assert ("t.echo", "seen", {"value": "pricing review with Sarah"}) in [(e, k, r) for e, k, _s, r in got]


def test_a_result_with_a_key_naming_a_secret_is_stored_masked(project: Path) -> None:
    create(project, "t1")
    name = chain(project, """\
        steps:
          - t.echo: {value: {user: sarah, password: hunter2secret, api_key: abcdefgh1234, note: "token=zzz9999"}}
        """)
    run(project, name, "--thread", "t1")
    stored = events(project, "t1")
    assert stored[-1][3] == {"value": {"user": "sarah", "password": "***", "api_key": "***", "note": "token=***"}}


def test_run_thread_is_the_attached_thread(project: Path) -> None:
    """{run.thread}: null before the run is attached, then the thread (given, or from thread.match)."""
    create(project, "t1")
    name = chain(project, """\
        steps:
          - id: before
            t.echo: {value: "{run.thread}"}
          - thread.match: {message: "Plan the Q2 product launch"}
          - id: after
            t.echo: {value: "{run.thread}"}
        outputs:
          before: "{before.value}"
          after: "{after.value}"
          matched: "{thread.match.thread_id}"
        """)
    got = outputs(run(project, name))
    assert got["before"] is None and got["after"] == got["matched"] and got["after"].startswith("thread-")
    given = outputs(run(project, name, "--thread", "t1"))
    assert given["before"] == "t1"
