"""`chainlang emit NAME --data JSON [--id KEY]` and `chainlang.emit(...)`, end to end (LANGUAGE.md §6.1).

Each test builds a project in `tmp_path`: a hooks file declaring `email.received` (and
`deploy.done`) with hooks on them, and the tools module of tests/hooks_util.py. The
command runs in a subprocess in the project's directory; the tests assert its exit
code, its summary, the transcript, and what the hooks' actions did (the tools' log).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import chainlang
from tests.helpers import Spawned, cli, cli_many
from tests.hooks_util import (
    assert_clean,
    has,
    kill,
    labels,
    log,
    of_type,
    one,
    records,
    runs,
    show,
    transcript_of,
    validated,
    wait_for,
    write,
    write_tools,
)

EVENTS = textwrap.dedent("""\
    events:
      email.received:
        description: A message arrived in the inbox.
        payload:
          type: object
          properties:
            sender: {type: string}
            subject: {type: string}
            size: {type: integer}
          required: [sender, subject]
      deploy.done:
        description: A deployment ended.
        payload:
          type: object
          properties:
            service: {type: string}
            ok: {type: boolean}
          required: [service, ok]
    """)

HOOKS = """\
    hooks:
      - id: log-all
        trigger: post:email.received
        action:
          - t.log: {label: "mail from {sender}: {subject}"}
      - id: sarah
        trigger: "post:email.*"
        condition: sender contains 'Sarah'
        action:
          - t.log: {label: "sarah wrote ({event.name})"}
      - id: deploys
        trigger: post:deploy.done
        action:
          - t.log: {label: "deploy of {service}"}
"""

SARAH = json.dumps({"sender": "Sarah Lee", "subject": "budget"})


def project(tmp_path: Path, hooks: str = HOOKS) -> Path:
    """The tools module, and inbox.hooks.yaml: the events declared, and `hooks` (a `hooks:` key)."""
    write_tools(tmp_path)
    (tmp_path / "inbox.hooks.yaml").write_text(EVENTS + textwrap.dedent(hooks), encoding="utf-8")
    return tmp_path


def emit(*args: str) -> list[str]:
    """The args of `chainlang emit ARGS --tools hk_tools.py`."""
    return ["emit", *args, "--tools", "hk_tools.py"]


# -- 1. matching hooks fire; the summary --------------------------------------------------------


def test_emit_fires_the_matching_hooks(tmp_path: Path) -> None:
    project(tmp_path)
    proc = cli(tmp_path, *emit("email.received", "--data", SARAH))
    assert proc.returncode == 0, show(proc)
    assert_clean(proc)
    lines = proc.stdout.splitlines()
    assert lines[0] == "emit email.received: 2 hooks fired", show(proc)
    assert len(lines) == 3 and "log-all ok" in lines[1] and "sarah ok" in lines[2], show(proc)
    assert sorted(labels(tmp_path)) == ["mail from Sarah Lee: budget", "sarah wrote (email.received)"]
    transcript = transcript_of(proc.stderr, tmp_path)
    assert transcript.parent == tmp_path / ".chainlang" / "runs"
    recs = records(transcript)
    assert [(r["hook"], r["event"], r["trigger"]) for r in of_type(recs, "hook_fired")] == \
        [("log-all", "email.received", "post:email.received"), ("sarah", "email.received", "post:email.*")]
    assert sorted(r["step"] for r in of_type(recs, "step_finished")) == ["hook:log-all/1", "hook:sarah/1"]


def test_emit_with_no_hook_whose_condition_holds(tmp_path: Path) -> None:
    project(tmp_path, """\
        hooks:
          - id: sarah-only
            trigger: post:email.received
            condition: sender contains 'Sarah'
            action:
              - t.log: {label: never}
        """)
    other_event = json.dumps({"service": "api", "ok": True})
    bob, deploy = cli_many(
        (tmp_path, emit("email.received", "--data", json.dumps({"sender": "Bob", "subject": "hi"}))),
        (tmp_path, emit("deploy.done", "--data", other_event)),  # declared; no hook on it
    )
    for proc, name in ((bob, "email.received"), (deploy, "deploy.done")):
        assert proc.returncode == 0, show(proc)
        assert proc.stdout == f"emit {name}: no hook fired\n", show(proc)
        assert_clean(proc)
    assert log(tmp_path) == []


def test_emit_fires_python_hooks_of_the_tools_modules(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path, "py_hooks.py", '''\
        import chainlang

        py_audit = chainlang.hook("post:email.received", id="py-audit",
                                  action=[{"t.log": {"label": "python saw {sender}"}}])
        ''')
    proc = cli(tmp_path, *emit("email.received", "--data", SARAH), "--tools", "py_hooks.py")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines()[0] == "emit email.received: 3 hooks fired", show(proc)
    assert "python saw Sarah Lee" in labels(tmp_path)


def test_hooks_files_anywhere_in_a_project_tree(tmp_path: Path) -> None:
    write(tmp_path, "chainlang.toml", "")
    write_tools(tmp_path)
    write(tmp_path, "automations/inbox.hooks.yaml", EVENTS + textwrap.dedent(HOOKS))
    proc = cli(tmp_path, *emit("deploy.done", "--data", json.dumps({"service": "api", "ok": False})))
    assert proc.returncode == 0, show(proc)
    assert labels(tmp_path) == ["deploy of api"]


# -- 2. invalid data ------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "code", "message"), [
    ('{"sender": "Sarah"}', 1, "'subject' is a required property"),
    ('{"sender": "Sarah", "subject": "s", "size": "big"}', 1, "size: 'big' is not of type 'integer'"),
    ('["Sarah", "budget"]', 1, "the data must be a JSON object"),
    ('"Sarah"', 1, "the data must be a JSON object"),
    ('{"sender": "Sarah",', 2, "--data: not JSON"),
    ('{"sender": NaN, "subject": "s"}', 2, "--data: not JSON"),
])
def test_invalid_data_runs_nothing(tmp_path: Path, data: str, code: int, message: str) -> None:
    project(tmp_path)
    proc = cli(tmp_path, *emit("email.received", "--data", data))
    assert proc.returncode == code, show(proc)
    assert_clean(proc)
    assert message in proc.stderr, show(proc)
    assert proc.stdout == ""
    assert log(tmp_path) == [] and runs(tmp_path) == []


def test_a_hooks_file_with_errors_fires_nothing(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path, "broken.hooks.yaml", """\
        - id: typo
          trigger: post:email.recieved
          action:
            - t.log: {label: x}
        """)
    proc = cli(tmp_path, *emit("email.received", "--data", SARAH))
    assert proc.returncode == 1, show(proc)
    assert_clean(proc)
    assert "broken.hooks.yaml" in proc.stderr and "CL041" in proc.stderr and "nothing was fired" in proc.stderr, \
        show(proc)
    assert log(tmp_path) == [] and runs(tmp_path) == []


# -- 3. not an external event ----------------------------------------------------------------------


@pytest.mark.slow  # four commands, run side by side
def test_emit_of_what_is_not_an_external_event(tmp_path: Path) -> None:
    project(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    typo, tool, stdlib, nowhere = cli_many(
        (tmp_path, emit("email.recieved", "--data", SARAH)),
        (tmp_path, emit("t.log", "--data", '{"label": "x"}')),
        (tmp_path, emit("user.notify", "--data", '{"message": "x"}')),
        (empty, ["emit", "email.received", "--data", SARAH]),
    )
    for proc in (typo, tool, stdlib, nowhere):
        assert proc.returncode == 2, show(proc)
        assert_clean(proc)
        assert proc.stdout == ""
    assert "did you mean email.received?" in typo.stderr, show(typo)
    assert "t.log is a tool, not an external event" in tool.stderr, show(tool)
    assert "user.notify" in stdlib.stderr and "not an external event" in stdlib.stderr, show(stdlib)
    assert "email.received: not an event of this project" in nowhere.stderr, show(nowhere)
    assert log(tmp_path) == [] and runs(tmp_path) == []


# -- 4. a failing action -----------------------------------------------------------------------------


def test_a_failing_action_fails_the_emit(tmp_path: Path) -> None:
    project(tmp_path, """\
        hooks:
          - id: fine
            trigger: post:deploy.done
            action:
              - t.log: {label: "fine {service}"}
          - id: pager
            trigger: post:deploy.done
            condition: not ok
            action:
              - t.fail: {message: "pager is down"}
              - t.log: {label: never}
        """)
    proc = cli(tmp_path, *emit("deploy.done", "--data", json.dumps({"service": "api", "ok": False})))
    assert proc.returncode == 1, show(proc)
    assert_clean(proc)
    lines = proc.stdout.splitlines()
    assert lines[0] == "emit deploy.done: 2 hooks fired", show(proc)
    [fine] = [line for line in lines if " fine " in line]
    [pager] = [line for line in lines if " pager " in line]
    assert "fine ok" in fine and "pager failed" in pager and "pager is down" in pager, show(proc)
    assert sorted(labels(tmp_path)) == ["fail", "fine api"]
    recs = records(transcript_of(proc.stderr, tmp_path))
    assert one(recs, "hook_finished", hook="pager")["status"] == "failed"
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "failed" and "pager" in end["error"]["message"], end


# -- 5. --id -----------------------------------------------------------------------------------------


def test_the_same_id_twice_runs_the_hooks_once(tmp_path: Path) -> None:
    project(tmp_path)
    first = cli(tmp_path, *emit("email.received", "--data", SARAH, "--id", "msg-1"))
    assert first.returncode == 0, show(first)
    assert (tmp_path / ".chainlang" / "store.db").is_file()
    again, other = cli_many(
        (tmp_path, emit("email.received", "--data", SARAH, "--id", "msg-1")),
        (tmp_path, emit("deploy.done", "--data", json.dumps({"service": "api", "ok": True}), "--id", "msg-2")),
    )
    assert again.returncode == 0, show(again)
    assert_clean(again)
    assert "already processed" in again.stderr and again.stdout == "", show(again)
    run_id = records(transcript_of(first.stderr, tmp_path))[0]["run_id"]
    assert run_id in again.stderr  # it names the earlier emit
    assert other.returncode == 0 and "1 hook fired" in other.stdout, show(other)
    assert labels(tmp_path).count("mail from Sarah Lee: budget") == 1
    assert labels(tmp_path).count("deploy of api") == 1
    assert len(runs(tmp_path)) == 2  # the duplicate wrote no transcript


def test_an_id_claimed_by_a_process_that_died_before_its_transcript_began(tmp_path: Path) -> None:
    # the claim is in the store (with its payload), its transcript never began, its lock is
    # free: the same id emitted again fires it, under the claim's run id, with the kept payload
    from chainlang.store import open_store

    project(tmp_path)
    where = tmp_path / ".chainlang" / "runs" / "dead-run.jsonl"
    with open_store(tmp_path) as store:
        store.claim_emit("msg-9", "email.received", "dead-run", str(where), json.loads(SARAH))
    other = json.dumps({"sender": "Bob", "subject": "ignored: the claim's payload is used"})
    proc = cli(tmp_path, *emit("email.received", "--data", other, "--id", "msg-9"))
    assert proc.returncode == 0, show(proc)
    assert sorted(labels(tmp_path)) == ["mail from Sarah Lee: budget", "sarah wrote (email.received)"]
    assert records(where)[0]["run_id"] == "dead-run"
    with open_store(tmp_path) as store:
        claim = store.get_emit("msg-9")
        assert claim is not None and claim.status == "ok"
    again = cli(tmp_path, *emit("email.received", "--data", SARAH, "--id", "msg-9"))
    assert again.returncode == 0 and "already processed" in again.stderr, show(again)
    assert len(labels(tmp_path)) == 2


def test_the_same_id_twice_with_the_same_transcript_path(tmp_path: Path) -> None:
    # the duplicate is found before the existing --transcript is refused
    project(tmp_path)
    args = emit("email.received", "--data", SARAH, "--id", "msg-1", "--transcript", "msg-1.jsonl")
    first = cli(tmp_path, *args)
    assert first.returncode == 0, show(first)
    again = cli(tmp_path, *args)
    assert again.returncode == 0 and "already processed" in again.stderr, show(again)
    assert labels(tmp_path).count("mail from Sarah Lee: budget") == 1


# -- 6. durability: killed during an action, then resumed or emitted again -----------------------------

SLOW_HOOKS = """\
    hooks:
      - id: quick
        trigger: post:email.received
        action:
          - t.log: {label: "quick {subject}"}
      - id: slow
        trigger: post:email.received
        action:
          - t.log: {label: "slow first {subject}"}
          - t.wait: {name: go, label: "slow second {subject}"}
"""


def start_and_kill(tmp_path: Path, spawned: Spawned, *extra: str) -> Path:
    """Start the emit, SIGKILL it while the second step of `slow` runs (its first step and
    the whole of `quick` finished); the transcript."""
    proc = spawned.start(tmp_path, *emit("email.received", "--data", SARAH, *extra))
    wait_for(proc, "a transcript", lambda: len(runs(tmp_path)) == 1)
    [transcript] = runs(tmp_path)
    wait_for(proc, "slow's second step under way",
             lambda: has(transcript, "step_finished", step="hook:slow/1")()
             and has(transcript, "hook_finished", hook="quick")()
             and "slow second budget:start" in labels(tmp_path))
    kill(proc)
    recs = records(transcript)
    assert not of_type(recs, "run_finished") and not of_type(recs, "hook_finished", hook="slow")
    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    return transcript


def assert_finished_once(tmp_path: Path, transcript: Path) -> None:
    done = labels(tmp_path)
    assert done.count("quick budget") == 1, done  # its action finished before the kill
    assert done.count("slow first budget") == 1, done  # finished before the kill
    assert done.count("slow second budget:start") == 2 and done.count("slow second budget:end") == 1, done
    recs = validated(transcript, tmp_path)
    assert len(of_type(recs, "hook_fired", hook="slow")) == 1
    assert len(of_type(recs, "hook_finished", hook="quick")) == 1
    assert one(recs, "hook_finished", hook="slow")["status"] == "ok"
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


@pytest.mark.slow
def test_resume_an_emit_killed_during_an_action(tmp_path: Path, spawned: Spawned) -> None:
    project(tmp_path, SLOW_HOOKS)
    transcript = start_and_kill(tmp_path, spawned)
    resumed = cli(tmp_path, "resume", str(transcript), "--tools", "hk_tools.py")
    assert resumed.returncode == 0, show(resumed)
    assert_clean(resumed)
    assert_finished_once(tmp_path, transcript)
    assert len(runs(tmp_path)) == 1


@pytest.mark.slow
def test_the_same_id_after_a_kill_continues_the_interrupted_emit(tmp_path: Path, spawned: Spawned) -> None:
    project(tmp_path, SLOW_HOOKS)
    transcript = start_and_kill(tmp_path, spawned, "--id", "msg-9")
    again = cli(tmp_path, *emit("email.received", "--data", SARAH, "--id", "msg-9"))
    assert again.returncode == 0, show(again)
    assert_clean(again)
    assert "already processed" not in again.stderr, show(again)
    assert_finished_once(tmp_path, transcript)
    assert runs(tmp_path) == [transcript]  # continued, not a new emit
    third = cli(tmp_path, *emit("email.received", "--data", SARAH, "--id", "msg-9"))
    assert third.returncode == 0 and "already processed" in third.stderr, show(third)
    assert labels(tmp_path).count("slow second budget:end") == 1


# -- 7. --json and the API ----------------------------------------------------------------------------


def test_emit_json_output(tmp_path: Path) -> None:
    project(tmp_path)
    proc = cli(tmp_path, *emit("email.received", "--data", SARAH, "--json"))
    assert proc.returncode == 0, show(proc)
    body = json.loads(proc.stdout)
    assert body["status"] == "ok" and body["event"] == "email.received" and body["error"] is None
    assert isinstance(body["run_id"], str) and body["run_id"]
    assert [(f["hook"], f["status"]) for f in body["fired"]] == [("log-all", "ok"), ("sarah", "ok")]
    transcript = Path(body["transcript"])
    assert transcript.is_file() and records(transcript)[0]["run_id"] == body["run_id"]


def test_emit_through_the_api(tmp_path: Path) -> None:
    project(tmp_path)
    tools = [str(tmp_path / "hk_tools.py")]
    result = chainlang.emit("email.received", {"sender": "Sarah Lee", "subject": "budget"}, project=tmp_path,
                            tools=tools)
    assert result.status == "ok" and result.ok and result.exit_code == 0, result
    assert [(f["hook"], f["status"]) for f in result.fired] == [("log-all", "ok"), ("sarah", "ok")]
    assert result.transcript is not None and records(result.transcript)[0]["run_id"] == result.run_id
    assert sorted(labels(tmp_path)) == ["mail from Sarah Lee: budget", "sarah wrote (email.received)"]

    invalid = chainlang.emit("email.received", {"sender": "Sarah Lee"}, project=tmp_path, tools=tools)
    assert invalid.status == "invalid" and invalid.exit_code == 1 and invalid.fired == []
    assert invalid.errors == ["'subject' is a required property"]

    first = chainlang.emit("deploy.done", {"service": "api", "ok": True}, id="d-1", project=tmp_path, tools=tools)
    duplicate = chainlang.emit("deploy.done", {"service": "api", "ok": True}, id="d-1", project=tmp_path, tools=tools)
    assert first.status == "ok" and duplicate.status == "duplicate" and duplicate.ok
    assert duplicate.previous is not None and duplicate.previous["run_id"] == first.run_id
    assert labels(tmp_path).count("deploy of api") == 1


# -- 8. the transcript of an emit ----------------------------------------------------------------------


def test_the_transcript_of_an_emit(tmp_path: Path) -> None:
    project(tmp_path)
    proc = cli(tmp_path, *emit("email.received", "--data", SARAH, "--id", "m-1", "--now", "2025-01-15T09:30:00+01:00",
                               "--transcript", "emit.jsonl"))
    assert proc.returncode == 0, show(proc)
    recs = validated(tmp_path / "emit.jsonl", tmp_path)
    started = recs[0]
    assert started["type"] == "run_started" and started["chain"] is None
    assert started["emit"] == {"event": "email.received", "data": json.loads(SARAH), "id": "m-1"}
    assert started["now"] == "2025-01-15T09:30:00+01:00"
    fired = of_type(recs, "hook_fired")
    finished = of_type(recs, "hook_finished")
    assert [r["hook"] for r in fired] == ["log-all", "sarah"] and len(finished) == 2
    for rec in fired + finished:
        assert rec.get("step") is None, rec
    assert all(r["status"] == "ok" for r in finished)
    for hook in ("log-all", "sarah"):
        assert one(recs, "hook_fired", hook=hook)["seq"] < one(recs, "step_started", step=f"hook:{hook}/1")["seq"] \
            < one(recs, "hook_finished", hook=hook)["seq"]
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "ok"
    assert [f["hook"] for f in end["outputs"]["fired"]] == ["log-all", "sarah"]
