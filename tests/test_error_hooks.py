"""`error:NAME` hooks (LANGUAGE.md §6.1, issue 23), end to end through `chainlang run`,
`resume` and `check`: they fire when a step of their event ends failed after its last
retry, with the payload `{error: {type, message}, params}`, run like `post:` hooks, and
leave the run's outcome to the chain's own `on_error`.

Each test writes a project in `tmp_path` (the tools of tests/hooks_util.py, and
`eh_tools.py` below) and runs the real command in the test's own process (`cli_here`); a
run the test kills runs in a subprocess, and so does the editor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Spawned, cli_here
from tests.lsp_util import finish, started
from tests.hooks_util import (
    assert_clean,
    has,
    kill,
    labels,
    of_type,
    one,
    records,
    seq,
    show,
    validated,
    wait_for,
    write,
    write_tools,
)

# a tool that fails until a given attempt, and one that always fails (both log what they do)
EH_TOOLS = '''\
import json
from pathlib import Path
from typing import Any

from chainlang import event


def _log(ctx: Any, label: str) -> None:
    path = Path(ctx.state_dir) / "log.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": ctx.step, "event": ctx.event, "label": label}) + "\\n")


@event("e.flaky", description="Fail until the given attempt", idempotent=True)
def flaky(succeed_on: int, ctx: Any = None) -> int:
    _log(ctx, f"flaky attempt {ctx.attempt}")
    if int(ctx.attempt) < succeed_on:
        raise ValueError(f"attempt {ctx.attempt} failed")
    return int(ctx.attempt)


@event("e.fail", description="Always fail", idempotent=True)
def fail(message: str, ctx: Any = None) -> None:
    _log(ctx, f"fail attempt {ctx.attempt}")
    raise RuntimeError(message)
'''


def project(tmp_path: Path, chain: str, name: str = "main.chain.yaml") -> Path:
    write_tools(tmp_path)
    write(tmp_path, "eh_tools.py", EH_TOOLS)
    return write(tmp_path, name, chain)


def run(chain: Path, *args: str) -> list[str]:
    return ["run", chain.name, "--tools", "hk_tools.py", "--tools", "eh_tools.py", "--transcript", "run.jsonl",
            *args]


def test_an_error_hook_runs_after_the_last_retry_only(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.log: {label: start}
          - id: flaky
            e.flaky: {succeed_on: 2}
            retry: {attempts: 3, delay: 10ms}
          - id: charge
            e.fail: {message: card declined}
            retry: {attempts: 3, delay: 10ms}
            on_error: continue
          - t.log: {label: "end: {charge.status}"}
        hooks:
          - id: alarm
            trigger: error:e.fail
            condition: "error.type == 'tool_error'"
            action:
              - t.log: {label: "alarm {event.name} {error.type}: {error.message} (params {params.message})"}
          - id: any-e
            trigger: error:e.*
            action:
              - t.log: {label: "glob {event.name}"}
          - id: never
            trigger: error:t.log
            max_depth: 1
            action:
              - t.log: {label: "t.log failed"}
        """)
    proc = cli_here(tmp_path, *run(chain))
    assert proc.returncode == 0, show(proc)  # on_error: continue decides; the hooks change nothing
    assert_clean(proc)
    done = labels(tmp_path)
    assert done.count("flaky attempt 1") == done.count("flaky attempt 2") == 1, done
    assert [x for x in done if x.startswith("fail attempt")] == ["fail attempt 1", "fail attempt 2", "fail attempt 3"]
    # each hook once, after the third attempt; not for the flaky step (its retry succeeded), not for ok steps
    assert done.count("alarm e.fail tool_error: RuntimeError: card declined (params card declined)") == 1, done
    assert done.count("glob e.fail") == 1 and "glob e.flaky" not in done and "t.log failed" not in done, done
    assert "end: failed" in done
    recs = validated(tmp_path / "run.jsonl", tmp_path)
    fired = of_type(recs, "hook_fired")
    assert sorted((r["hook"], r["when"], r["event"], r["step"], r["trigger"]) for r in fired) == [
        ("alarm", "error", "e.fail", "3", "error:e.fail"), ("any-e", "error", "e.fail", "3", "error:e.*")]
    last_attempt = seq(recs, "step_finished", step="3", attempt=3)
    assert all(r["seq"] > last_attempt for r in fired)
    assert [r["status"] for r in of_type(recs, "hook_finished")] == ["ok", "ok"]
    assert one(recs, "step_finished", step="3/hook:alarm/1")["status"] == "ok"
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


def test_the_run_ends_as_it_would_without_the_hook(tmp_path: Path) -> None:
    body = """\
        steps:
          - t.log: {label: one}
          - e.fail: {message: out of stock}
          - t.log: {label: never}
        """
    bare = project(tmp_path / "bare", body)
    hooked = project(tmp_path / "hooked", body.rstrip(" ") + """\
        hooks:
          - id: report
            trigger: error:e.fail
            on_error: fail
            action:
              - t.log: {label: "report {error.message}"}
          - id: broken
            trigger: error:e.fail
            action:
              - e.fail: {message: "the report failed too"}
            max_depth: 1
        """)
    without = cli_here(bare.parent, *run(bare))
    with_hooks = cli_here(hooked.parent, *run(hooked))
    assert without.returncode == with_hooks.returncode == 1, show(without) + show(with_hooks)
    assert_clean(with_hooks)
    end_bare = records(bare.parent / "run.jsonl")[-1]
    assert end_bare["type"] == "run_finished" and end_bare["status"] == "failed"
    recs = records(hooked.parent / "run.jsonl")
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "failed"
    assert end["error"] == end_bare["error"]  # the step's failure, not the hooks'
    # report fires for the chain's step, and for the step of broken's action that failed too
    assert labels(hooked.parent) == ["one", "fail attempt 1", "report RuntimeError: out of stock", "fail attempt 1",
                                     "report RuntimeError: the report failed too"]
    # the run ended only once every action had ended; the failing one is recorded and changes nothing
    finished = {(r["hook"], r["step"]): r for r in of_type(recs, "hook_finished")}
    assert {key: r["status"] for key, r in finished.items()} == {
        ("report", "2"): "ok", ("broken", "2"): "failed", ("report", "2/hook:broken/1"): "ok"}
    assert all(r["seq"] < end["seq"] for r in finished.values())


def test_a_failure_before_the_call_fires_it_too_with_the_params(tmp_path: Path) -> None:
    """Params the event's schema refuses end the step failed without calling the tool."""
    chain = project(tmp_path, """\
        inputs:
          n: {type: string}
        steps:
          - id: bad
            t.num: {n: "{inputs.n}"}
            on_error: continue
        hooks:
          - id: why
            trigger: error:t.num
            action:
              - t.say: {message: "{error.type}: n was {params.n}"}
        """)
    proc = cli_here(tmp_path, *run(chain, "--input", "n=seven"))
    assert proc.returncode == 0, show(proc)
    assert "decide: n was seven" in proc.stdout, show(proc)  # no decide model here: the step fails
    assert "num seven" not in labels(tmp_path)


def test_a_hook_stored_by_task_register_fires_on_error(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    setup = project(tmp_path, """\
        steps:
          - task.register:
              id: payment-alarm
              trigger: error:e.fail
              condition: "params.message contains 'card'"
              action:
                - t.log: {label: "stored alarm: {error.message}"}
        """, name="setup.chain.yaml")
    registered = cli_here(tmp_path, *run(setup))
    assert registered.returncode == 0, show(registered)
    listed = cli_here(tmp_path, "tasks", "list")
    assert "error:e.fail" in listed.stdout, show(listed)
    later = write(tmp_path, "pay.chain.yaml", """\
        steps:
          - e.fail: {message: card declined}
            on_error: continue
          - e.fail: {message: disk full}
            on_error: continue
        """)
    (tmp_path / "run.jsonl").unlink()
    proc = cli_here(tmp_path, *run(later))
    assert proc.returncode == 0, show(proc)
    assert labels(tmp_path).count("stored alarm: RuntimeError: card declined") == 1
    assert not any("disk full" in x for x in labels(tmp_path) if x.startswith("stored"))
    fired = one(records(tmp_path / "run.jsonl"), "hook_fired", hook="payment-alarm")
    assert (fired["when"], fired["step"], fired["trigger"]) == ("error", "1", "error:e.fail")


def test_check_types_the_payload_and_refuses_what_does_not_fit(tmp_path: Path) -> None:
    write_tools(tmp_path)
    write(tmp_path, "alarm.hooks.yaml", """\
        events:
          email.received:
            description: A message arrived.
            payload: {type: object, properties: {sender: {type: string}}}
        hooks:
          - trigger: error:t.num
            condition: "error.kind == 'x' or params.m == 1"
            action: [t.log: {label: "{error.message}"}]
          - trigger: error:t.num
            set: {n: 2}
          - trigger: error:email.received
            action: [t.log: {label: "{error.message}"}]
        """)
    proc = cli_here(tmp_path, "check", "alarm.hooks.yaml", "--tools", "hk_tools.py")
    assert proc.returncode == 1, show(proc)
    assert_clean(proc)
    text = proc.stdout
    assert "'kind' is not a field of 'error' in this hook's payload [CL021" in text, text
    assert "'m' is not a field of 'params' in this hook's payload [CL021" in text, text
    assert "'set' only works on pre: hooks (an error: hook cannot undo the failure) [CL046" in text, text
    assert "trigger 'error:email.received' never fires" in text and "[CL058 error-hook-never-fires]" in text, text


@pytest.mark.slow
def test_resume_does_not_run_a_finished_error_hook_again(tmp_path: Path, spawned: Spawned) -> None:
    chain = project(tmp_path, """\
        steps:
          - id: charge
            e.fail: {message: card declined}
            on_error: continue
          - t.wait: {name: go, label: main}
        hooks:
          - id: alarm
            trigger: error:e.fail
            action:
              - t.log: {label: "alarm {error.message}"}
        """)
    transcript = tmp_path / "run.jsonl"
    proc = spawned.start(tmp_path, *run(chain))
    wait_for(proc, "the error hook finished, the chain waiting",
             lambda: has(transcript, "hook_finished", hook="alarm")() and "main:start" in labels(tmp_path))
    kill(proc)
    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", "hk_tools.py", "--tools", "eh_tools.py")
    assert resumed.returncode == 0, show(resumed)
    assert_clean(resumed)
    done = labels(tmp_path)
    assert done.count("alarm RuntimeError: card declined") == 1, done
    assert done.count("fail attempt 1") == 1, done  # the failed step is taken from the transcript
    recs = validated(transcript, tmp_path)
    assert len(of_type(recs, "hook_fired", hook="alarm")) == 1
    assert len(of_type(recs, "hook_finished", hook="alarm")) == 1
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


@pytest.mark.slow
def test_resume_finishes_an_error_hook_cut_short_without_firing_it_again(tmp_path: Path, spawned: Spawned) -> None:
    chain = project(tmp_path, """\
        steps:
          - id: charge
            e.fail: {message: card declined}
            on_error: continue
          - t.log: {label: after}
        hooks:
          - id: slow
            trigger: error:e.fail
            action:
              - t.log: {label: "first {error.message}"}
              - t.wait: {name: go, label: "second {params.message}"}
        """)
    transcript = tmp_path / "run.jsonl"
    proc = spawned.start(tmp_path, *run(chain))
    wait_for(proc, "the hook's second step under way",
             lambda: has(transcript, "step_finished", step="1/hook:slow/1")()
             and "second card declined:start" in labels(tmp_path))
    kill(proc)
    assert not of_type(records(transcript), "hook_finished")
    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", "hk_tools.py", "--tools", "eh_tools.py")
    assert resumed.returncode == 0, show(resumed)
    assert_clean(resumed)
    done = labels(tmp_path)
    assert done.count("first RuntimeError: card declined") == 1, done  # finished before the kill
    assert done.count("second card declined:end") == 1 and done.count("fail attempt 1") == 1, done
    recs = validated(transcript, tmp_path)
    assert len(of_type(recs, "hook_fired", hook="slow")) == 1
    assert one(recs, "hook_finished", hook="slow")["status"] == "ok"
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


def test_a_hook_registered_in_python_fires_on_error(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - e.fail: {message: no route}
            on_error: continue
          - t.log: {label: next}
        """)
    write(tmp_path, "py_hooks.py", """\
        from chainlang import hook

        routing = hook("error:e.*", id="py-alarm",
                       action=[{"t.log": {"label": "python saw {event.name}: {error.message}"}}])
        """)
    proc = cli_here(tmp_path, *run(chain, "--tools", "py_hooks.py"))
    assert proc.returncode == 0, show(proc)
    assert_clean(proc)
    assert labels(tmp_path).count("python saw e.fail: RuntimeError: no route") == 1, labels(tmp_path)
    fired = one(records(tmp_path / "run.jsonl"), "hook_fired", hook="py-alarm")
    assert (fired["when"], fired["trigger"]) == ("error", "error:e.*")


def test_the_editor_completes_an_error_trigger(tmp_path: Path) -> None:
    client = started(tmp_path)
    try:
        uri = client.open(tmp_path / "h.hooks.yaml", "- trigger: error:tools.\n")
        assert "tools.now" in client.complete(uri, 0, len("- trigger: error:tools."))
    finally:
        finish(client)
