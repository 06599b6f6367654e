"""Hooks at run time, end to end through `chainlang run` / `resume` / `check` (LANGUAGE.md §6.1).

Each test writes a project in `tmp_path` (chain files, hooks files, the tools module of
tests/hooks_util.py) and runs the real command in the test's own process (`cli_here`); in a
subprocess where the test kills the run, and where a run that never ends must fail its test
within seconds. It asserts the exit code, what was printed, the transcript records and the
side effects the tools logged.
Where an action must still be running when something else happens, it waits for a
file (`t.wait`) that a later step (`t.touch`) or the test itself creates.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import Spawned, cli, cli_here
from tests.hooks_util import (
    assert_clean,
    has,
    kill,
    labels,
    log,
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


def project(tmp_path: Path, chain: str, name: str = "main.chain.yaml") -> Path:
    """A project with the test tools and one chain; the chain's path."""
    write_tools(tmp_path)
    return write(tmp_path, name, chain)


def run(chain: Path, *args: str) -> tuple[Path, list[str]]:
    """(cwd, args) of `chainlang run CHAIN --tools hk_tools.py --transcript run.jsonl ARGS`."""
    return chain.parent, ["run", chain.name, "--tools", "hk_tools.py", "--transcript", "run.jsonl", *args]


def run_chain(chain: Path, *args: str, timeout: float = 60,
              own_process: bool = False) -> tuple["object", list[dict]]:
    """Run the chain (in this process, unless `own_process`); the finished command and the
    records of its transcript. The test fails when the run took `timeout` s or more."""
    cwd, argv = run(chain, *args)
    if own_process:
        proc = cli(cwd, *argv, timeout=timeout)
    else:
        began = time.monotonic()
        proc = cli_here(cwd, *argv)
        took = time.monotonic() - began
        assert took < timeout, f"the run took {took:.1f} s, not less than {timeout} s\n" + show(proc)
    assert_clean(proc)
    transcript = cwd / "run.jsonl"
    return proc, records(transcript) if transcript.exists() else []


# -- 1. the issue: a pre hook cancels the step that would print a password --------------------


def test_pre_hook_cancels_the_password_notification(tmp_path: Path) -> None:
    chain = write(tmp_path, "notify.chain.yaml", """\
        steps:
          - user.notify: {message: "your new password is hunter2"}
          - user.notify: {message: "all done"}
        hooks:
          - id: no-passwords
            trigger: pre:user.notify
            condition: message contains 'password'
            cancel: true
        """)
    proc = cli_here(tmp_path, "run", chain.name, "--transcript", "run.jsonl")
    assert proc.returncode == 0, show(proc)
    assert_clean(proc)
    assert "hunter2" not in proc.stdout and "hunter2" not in proc.stderr, show(proc)
    assert "all done" in proc.stdout + proc.stderr, show(proc)  # the next step ran and notified
    assert "hooks yet" not in proc.stdout + proc.stderr, show(proc)
    recs = records(tmp_path / "run.jsonl")
    fired = one(recs, "hook_fired", hook="no-passwords")
    assert (fired["when"], fired["event"], fired["step"], fired["trigger"]) == \
        ("pre", "user.notify", "1", "pre:user.notify")
    first = one(recs, "step_finished", step="1")
    assert first["status"] == "cancelled", first
    assert first["error"]["type"] == "cancelled" and "no-passwords" in first["error"]["message"], first
    assert one(recs, "step_finished", step="2")["status"] == "ok"
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok", recs[-1]
    assert len(of_type(recs, "hook_fired")) == 1  # the condition was false for step 2


def test_a_cancelling_hook_stops_the_later_pre_hooks(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: "secret"}
          - t.say: {message: "public"}
        hooks:
          - id: tag
            trigger: pre:t.say
            priority: 10
            set: {message: "[tagged] {message}"}
          - id: stop
            trigger: pre:t.say
            priority: 5
            condition: message contains 'secret'
            cancel: true
          - id: later
            trigger: pre:t.say
            set: {message: "{message} [later]"}
        """)
    proc, recs = run_chain(chain, "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[tagged] public [later]"], show(proc)
    assert [r["hook"] for r in of_type(recs, "hook_fired", step="1")] == ["tag", "stop"]
    assert [r["hook"] for r in of_type(recs, "hook_fired", step="2")] == ["tag", "later"]
    assert one(recs, "step_finished", step="1")["status"] == "cancelled"


def test_pre_hooks_run_in_the_compiled_order(tmp_path: Path) -> None:
    # priority (higher first), then `after`; a glob trigger takes its place among them; each
    # sees the params as the previous one left them; every item of a foreach is hooked
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: m}
          - event: t.say
            foreach: [a, b]
            as: x
            params: {message: "{x}"}
        hooks:
          - id: low
            trigger: pre:t.say
            priority: 1
            set: {message: "{message}-low"}
          - id: high
            trigger: pre:t.say
            priority: 10
            set: {message: "{message}-high"}
          - id: last
            trigger: pre:t.say
            priority: 100
            after: [low]
            set: {message: "{message}-last"}
          - id: glob
            trigger: "pre:t.s*"
            priority: 5
            set: {message: "{message}-glob"}
        """)
    proc, recs = run_chain(chain, "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert sorted(proc.stdout.splitlines()) == ["a-high-glob-low-last", "b-high-glob-low-last",
                                                "m-high-glob-low-last"], show(proc)
    assert [r["hook"] for r in of_type(recs, "hook_fired", step="1")] == ["high", "glob", "low", "last"]
    assert len(of_type(recs, "hook_fired")) == 12


# -- 2. set ---------------------------------------------------------------------------------


def test_set_changes_params_before_validation(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: hello}
          - t.num: {n: 1}
        outputs:
          said: "{t.say.message}"
          n: "{t.num.n}"
        hooks:
          - id: shout
            trigger: pre:t.say
            set: {message: "{message | upper}!"}
          - id: ten
            trigger: pre:t.num
            set: {n: 10}
        """)
    proc, recs = run_chain(chain, "--json", "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines()[0] == "HELLO!", show(proc)  # what the tool printed
    assert json.loads(proc.stdout.splitlines()[-1]) == {"said": "HELLO!", "n": 10}
    assert one(recs, "step_started", step="1")["params"] == {"message": "HELLO!"}
    assert one(recs, "step_started", step="2")["params"] == {"n": 10}
    assert [entry["label"] for entry in log(tmp_path)] == ["HELLO!", "num 10"]


def test_set_that_breaks_the_params_is_repaired_or_fails_the_step(tmp_path: Path) -> None:
    # the checker cannot know what `extra` holds; at run time `n` becomes "3" (repaired to 3)
    # and then "three" (no obvious repair, no decide model: the step fails, the run too)
    chain = project(tmp_path, """\
        steps:
          - t.pair: {n: 1, extra: "3"}
          - t.pair: {n: 1, extra: "three"}
          - t.log: {label: never}
        hooks:
          - id: from-extra
            trigger: pre:t.pair
            set: {n: "{extra}"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 1, show(proc)
    first = one(recs, "step_started", step="1")
    assert first["params"]["n"] == 3, first
    assert one(recs, "step_finished", step="1")["status"] == "ok"
    second = one(recs, "step_finished", step="2")
    assert second["status"] == "failed", second
    assert "'three' is not of type 'integer'" in second["error"]["message"], second
    assert recs[-1]["status"] == "failed"
    assert [entry["label"] for entry in log(tmp_path)] == ["pair 3"]  # "never" did not run


def test_set_that_cannot_be_rendered_is_a_failed_firing(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.pair: {n: 1, extra: "abc"}
        hooks:
          - id: bad-set
            trigger: pre:t.pair
            set: {n: "{extra + 1}"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    done = one(recs, "hook_finished", hook="bad-set")
    assert done["status"] == "failed" and done["error"]["type"] == "hook", done
    assert one(recs, "step_finished", step="1")["status"] == "ok"  # with its params as they were
    assert [entry["n"] for entry in log(tmp_path)] == [1]


# -- 3. a pre hook's action runs to completion before the event -----------------------------


def test_pre_hook_action_runs_before_the_event(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 7}
        hooks:
          - id: prepare
            trigger: pre:t.num
            action:
              - t.sleep: {seconds: 0.2, label: "prepare {n}"}
              - t.log: {label: "prepared {n}"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    assert labels(tmp_path) == ["prepare 7:start", "prepare 7:end", "prepared 7", "num 7"]
    assert seq(recs, "hook_fired", hook="prepare") < seq(recs, "step_finished", step="1/hook:prepare/1") \
        < seq(recs, "step_finished", step="1/hook:prepare/2") < seq(recs, "hook_finished", hook="prepare") \
        < seq(recs, "step_started", step="1")
    assert one(recs, "hook_finished", hook="prepare")["status"] == "ok"
    assert one(recs, "hook_finished", hook="prepare")["step"] == "1"


# -- 4. post hooks run beside the chain; the run ends after them ----------------------------


def test_post_hook_action_runs_beside_the_chain(tmp_path: Path) -> None:
    # the action waits for a file that step 3 creates: had the chain waited for the action,
    # the run could never end
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.log: {label: next}
          - t.touch: {name: go}
        hooks:
          - id: follow-up
            trigger: post:t.num
            action:
              - t.wait: {name: go, label: "follow-up {n}"}
              - t.log: {label: "followed up {n}"}
        """)
    proc, recs = run_chain(chain, timeout=20)
    assert proc.returncode == 0, show(proc)
    assert seq(recs, "step_finished", step="1") < seq(recs, "hook_fired", hook="follow-up") \
        < seq(recs, "step_started", step="2") < seq(recs, "step_started", step="3") \
        < seq(recs, "step_finished", step="1/hook:follow-up/1")
    done = labels(tmp_path)
    assert done[0] == "num 1" and done[-2:] == ["follow-up 1:end", "followed up 1"], done
    assert done.index("touch go") < done.index("follow-up 1:end"), done
    assert seq(recs, "step_finished", step="1/hook:follow-up/2") < seq(recs, "hook_finished", hook="follow-up") \
        < seq(recs, "run_finished")
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


def test_post_hook_fires_only_when_the_step_ends_ok(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - {event: t.fail, params: {message: nope}, on_error: continue}
          - t.log: {label: next}
        hooks:
          - id: after-any
            trigger: "post:t.*"
            action:
              - user.notify: {message: "after {event.name}"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["2"]
    assert one(recs, "hook_finished", hook="after-any")["status"] == "ok"
    assert "after t.log" in proc.stderr, show(proc)


# -- 5. modes -------------------------------------------------------------------------------

MODES_CHAIN = """\
    steps:
      - t.num: {{n: 1}}
      - t.num: {{n: 2}}
      - t.num: {{n: 3}}
      - t.touch: {{name: go}}
    hooks:
      - id: act
        trigger: post:t.num
        {mode}
        action:
          - t.wait: {{name: go, label: "act {{n}}"}}
    """


def action_log(project_dir: Path) -> list[str]:
    return [f"{e['label']}:{e['phase']}" for e in log(project_dir) if e["label"].startswith("act ")]


def test_mode_single_drops_a_firing_while_the_action_runs(tmp_path: Path) -> None:
    proc, recs = run_chain(project(tmp_path, MODES_CHAIN.format(mode="mode: single")))
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["1"]
    dropped = of_type(recs, "hook_dropped")
    assert [(r["step"], r["reason"], r["when"], r["event"]) for r in dropped] == \
        [("2", "single", "post", "t.num"), ("3", "single", "post", "t.num")]
    assert action_log(tmp_path) == ["act 1:start", "act 1:end"]
    assert recs[-1]["status"] == "ok"


def test_mode_queued_runs_one_after_another(tmp_path: Path) -> None:
    proc, recs = run_chain(project(tmp_path, MODES_CHAIN.format(mode="mode: queued")))
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["1", "2", "3"]
    assert action_log(tmp_path) == ["act 1:start", "act 1:end", "act 2:start", "act 2:end", "act 3:start",
                                    "act 3:end"]
    assert [r["status"] for r in of_type(recs, "hook_finished")] == ["ok"] * 3


def test_mode_restart_cancels_the_earlier_action(tmp_path: Path) -> None:
    # each step waits until the action it started is under way (the action touches a file)
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.wait: {name: started-1, label: "step waits 1"}
          - t.num: {n: 2}
          - t.wait: {name: started-2, label: "step waits 2"}
          - t.num: {n: 3}
          - t.touch: {name: go}
        hooks:
          - id: act
            trigger: post:t.num
            mode: restart
            action:
              - t.touch: {name: "started-{n}"}
              - t.wait: {name: go, label: "act {n}"}
        """)
    proc, recs = run_chain(chain, timeout=20)
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["1", "3", "5"]
    assert [(r["step"], r["reason"]) for r in of_type(recs, "hook_dropped")] == [("1", "restart"), ("3", "restart")]
    assert [(r["step"], r["status"]) for r in of_type(recs, "hook_finished")] == [("5", "ok")]
    assert action_log(tmp_path) == ["act 1:start", "act 2:start", "act 3:start", "act 3:end"]
    assert recs[-1]["status"] == "ok"


def test_mode_restart_of_actions_that_have_not_started_yet(tmp_path: Path) -> None:
    # t.quick never suspends: the action tasks of steps 1 and 2 have not run when the next
    # firing restarts them (the run used to spin for ever in drain(), nothing recorded dropped);
    # in a process of its own: a run that spins again fails this test after 8 s
    chain = project(tmp_path, MODES_CHAIN.replace("t.num", "t.quick").format(mode="mode: restart"))
    proc, recs = run_chain(chain, timeout=8, own_process=True)
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["1", "2", "3"]
    assert [(r["step"], r["reason"]) for r in of_type(recs, "hook_dropped")] == [("1", "restart"), ("2", "restart")]
    assert [(r["step"], r["status"]) for r in of_type(recs, "hook_finished")] == [("3", "ok")]
    entries = action_log(tmp_path)
    assert entries[-2:] == ["act 3:start", "act 3:end"] and "act 1:end" not in entries, entries
    assert recs[-1]["status"] == "ok"


def test_mode_parallel_max_1_never_overlaps(tmp_path: Path) -> None:
    proc, recs = run_chain(project(tmp_path, MODES_CHAIN.format(mode="mode: parallel\n        max: 1")))
    assert proc.returncode == 0, show(proc)
    entries = action_log(tmp_path)
    assert len(entries) == 6, entries
    for i in range(0, 6, 2):  # each start is followed by its own end
        assert entries[i].endswith(":start") and entries[i + 1] == entries[i].replace(":start", ":end"), entries
    assert [r["status"] for r in of_type(recs, "hook_finished")] == ["ok"] * 3


def test_mode_parallel_default_overlaps(tmp_path: Path) -> None:
    # each step waits until the action it started is under way; the actions all wait for `go`
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.wait: {name: started-1, label: "step waits 1"}
          - t.num: {n: 2}
          - t.wait: {name: started-2, label: "step waits 2"}
          - t.num: {n: 3}
          - t.wait: {name: started-3, label: "step waits 3"}
          - t.touch: {name: go}
        hooks:
          - id: act
            trigger: post:t.num
            action:
              - t.touch: {name: "started-{n}"}
              - t.wait: {name: go, label: "act {n}"}
        """)
    proc, recs = run_chain(chain, timeout=20)
    assert proc.returncode == 0, show(proc)
    entries = action_log(tmp_path)
    assert entries[:3] == ["act 1:start", "act 2:start", "act 3:start"], entries  # all before `go`
    assert sorted(entries[3:]) == ["act 1:end", "act 2:end", "act 3:end"]
    assert [r["status"] for r in of_type(recs, "hook_finished")] == ["ok"] * 3


# -- 6. depth -------------------------------------------------------------------------------


def test_a_hook_that_retriggers_itself_stops_at_its_max_depth(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.log: {label: top}
        hooks:
          - id: echo
            trigger: post:t.log
            max_depth: 2
            action:
              - t.log: {label: "echo of {label}"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    assert [r["step"] for r in of_type(recs, "hook_fired")] == ["1", "1/hook:echo/1"]
    [drop] = of_type(recs, "hook_dropped")
    assert drop["reason"] == "depth" and drop["step"] == "1/hook:echo/1/hook:echo/1", drop
    assert "max_depth" in drop["message"]
    assert [e["label"] for e in log(tmp_path)] == ["top", "echo of top", "echo of echo of top"]
    assert [r["status"] for r in of_type(recs, "hook_finished")] == ["ok", "ok"]
    assert recs[-1]["status"] == "ok"


def test_beyond_the_runs_max_depth_a_hook_is_dropped(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        limits: {max_depth: 1}
        steps:
          - t.num: {n: 1}
        hooks:
          - id: first
            trigger: post:t.num
            action:
              - t.log: {label: "first"}
          - id: second
            trigger: post:t.log
            action:
              - t.sleep: {seconds: 0, label: "second"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    assert [r["hook"] for r in of_type(recs, "hook_fired")] == ["first"]
    drop = one(recs, "hook_dropped", hook="second")
    assert drop["reason"] == "depth" and drop["step"] == "1/hook:first/1", drop
    assert [e["label"] for e in log(tmp_path)] == ["num 1", "first"]
    assert recs[-1]["status"] == "ok"


# -- 7. on_error ----------------------------------------------------------------------------


def test_on_error_fail_on_a_pre_hook_fails_the_step(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.log: {label: guarded}
          - t.log: {label: after}
        hooks:
          - id: guard
            trigger: pre:t.log
            on_error: fail
            action:
              - t.fail: {message: "guard says no"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 1, show(proc)
    done = one(recs, "hook_finished", hook="guard")
    assert done["status"] == "failed" and "guard says no" in json.dumps(done["error"]), done
    step = one(recs, "step_finished", step="1")
    assert step["status"] == "failed" and step["error"]["type"] == "hook" and "guard" in step["error"]["message"]
    assert recs[-1]["status"] == "failed"
    assert [e["label"] for e in log(tmp_path)] == ["fail"]  # neither t.log ran


def test_on_error_fail_on_a_post_hook_fails_the_run(tmp_path: Path) -> None:
    # step 2 would wait for ever: the failed action stops the chain
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.wait: {name: never, label: blocked}
          - t.log: {label: never}
        hooks:
          - id: strict
            trigger: post:t.num
            on_error: fail
            action:
              - t.fail: {message: "strict failure"}
        """)
    proc, recs = run_chain(chain, timeout=20)
    assert proc.returncode == 1, show(proc)
    assert one(recs, "step_finished", step="1")["status"] == "ok"
    assert one(recs, "hook_finished", hook="strict")["status"] == "failed"
    assert one(recs, "step_finished", step="2")["status"] == "cancelled"
    assert not of_type(recs, "step_started", step="3")
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "failed" and end["error"]["type"] == "hook", end
    assert "strict" in end["error"]["message"]


def test_a_failing_action_does_not_fail_the_run_by_default(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.log: {label: next}
        hooks:
          - id: lenient-post
            trigger: post:t.num
            action:
              - t.fail: {message: "post failure"}
          - id: lenient-pre
            trigger: pre:t.log
            action:
              - t.fail: {message: "pre failure"}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    assert one(recs, "hook_finished", hook="lenient-post")["status"] == "failed"
    assert one(recs, "hook_finished", hook="lenient-pre")["status"] == "failed"
    assert one(recs, "step_finished", step="2")["status"] == "ok"
    assert recs[-1]["status"] == "ok"


# -- 8. a condition that cannot be evaluated ------------------------------------------------


def test_a_condition_that_fails_at_run_time_is_a_failed_firing(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.pair: {n: 1, extra: "abc"}
          - t.log: {label: next}
        hooks:
          - id: compare
            trigger: post:t.pair
            condition: extra > 5
            action:
              - t.log: {label: never}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 0, show(proc)
    fired = one(recs, "hook_fired", hook="compare")
    assert fired["step"] == "1"
    done = one(recs, "hook_finished", hook="compare")
    assert done["status"] == "failed" and done["error"]["type"] == "hook", done
    assert "extra > 5" in done["error"]["message"], done
    assert [e["label"] for e in log(tmp_path)] == ["pair 1", "next"]
    assert recs[-1]["status"] == "ok"


def test_a_failing_condition_with_on_error_fail_fails_a_pre_step(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.pair: {n: 1, extra: "abc"}
        hooks:
          - id: compare
            trigger: pre:t.pair
            condition: extra > 5
            on_error: fail
            set: {n: 2}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 1, show(proc)
    step = one(recs, "step_finished", step="1")
    assert step["status"] == "failed" and "extra > 5" in step["error"]["message"], step
    assert log(tmp_path) == []


def test_a_chains_own_hook_sees_the_chains_inputs(tmp_path: Path) -> None:
    # `chainlang check` accepts inputs.NAME in a chain's own hook: it must not be null at run time
    chain = project(tmp_path, """\
        inputs:
          limit: {type: integer}
        steps:
          - t.num: {n: 7}
        hooks:
          - id: big
            trigger: post:t.num
            condition: n > inputs.limit
            action:
              - t.log: {label: "{n} is over {inputs.limit}"}
        """)
    proc, recs = run_chain(chain, "--input", "limit=5")
    assert proc.returncode == 0, show(proc)
    assert one(recs, "hook_finished", hook="big")["status"] == "ok"
    assert labels(tmp_path) == ["num 7", "7 is over 5"]


# -- 9. the project's hooks files -------------------------------------------------------------


def test_hooks_files_of_the_project_fire_during_a_run(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: hello}
        """)
    write(tmp_path, "tag.hooks.yaml", """\
        - id: tag
          trigger: pre:t.say
          set: {message: "[tag] {message}"}
        """)
    write(tmp_path, "nested/ignored.hooks.yaml", """\
        - id: nested
          trigger: pre:t.say
          set: {message: "[nested] {message}"}
        """)  # no chainlang.toml: only the chain's own directory counts
    proc, recs = run_chain(chain, "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[tag] hello"], show(proc)
    assert [r["hook"] for r in of_type(recs, "hook_fired")] == ["tag"]


def test_hooks_files_of_the_chains_directory_not_the_working_directory(tmp_path: Path) -> None:
    write_tools(tmp_path / "proj")
    write(tmp_path, "proj/main.chain.yaml", """\
        steps:
          - t.say: {message: hello}
        """)
    write(tmp_path, "proj/tag.hooks.yaml", """\
        - id: tag
          trigger: pre:t.say
          set: {message: "[tag] {message}"}
        """)
    write(tmp_path, "outer.hooks.yaml", """\
        - id: outer
          trigger: pre:t.say
          set: {message: "[outer] {message}"}
        """)
    proc = cli_here(tmp_path, "run", "proj/main.chain.yaml", "--tools", "proj/hk_tools.py", "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[tag] hello"], show(proc)


def test_hooks_files_of_a_project_tree_fire(tmp_path: Path) -> None:
    write(tmp_path, "chainlang.toml", "")
    write(tmp_path, "automations/tag.hooks.yaml", """\
        - id: tag
          trigger: pre:t.say
          set: {message: "[tag] {message}"}
        """)
    write_tools(tmp_path / "chains")
    chain = write(tmp_path, "chains/main.chain.yaml", """\
        steps:
          - t.say: {message: hello}
        """)
    proc, recs = run_chain(chain, "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[tag] hello"], show(proc)


def test_hooks_in_force_fire_inside_a_named_sub_chain(tmp_path: Path) -> None:
    write(tmp_path, "chainlang.toml", 'chains = ["library"]\n')
    write_tools(tmp_path)
    write(tmp_path, "library/inner.chain.yaml", """\
        chain: lib.inner
        inputs:
          msg: {type: string}
        steps:
          - t.say: {message: "{inputs.msg}"}
        """)
    write(tmp_path, "hooks/tag.hooks.yaml", """\
        - id: tag
          trigger: pre:t.say
          set: {message: "[tag] {message}"}
        """)
    chain = write(tmp_path, "main.chain.yaml", """\
        steps:
          - lib.inner: {msg: hello}
        hooks:
          - id: own
            trigger: pre:t.say
            priority: -1
            set: {message: "{message} [own]"}
        """)
    proc, recs = run_chain(chain, "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[tag] hello [own]"], show(proc)
    assert [(r["hook"], r["step"]) for r in of_type(recs, "hook_fired")] == [("tag", "1/1"), ("own", "1/1")]


def test_a_hooks_file_with_errors_stops_the_run(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: hello}
        """)
    write(tmp_path, "broken.hooks.yaml", """\
        - id: typo
          trigger: post:t.sya
          action:
            - t.log: {label: x}
        """)
    proc, recs = run_chain(chain)
    assert proc.returncode == 1, show(proc)
    assert "broken.hooks.yaml" in proc.stderr and "CL041" in proc.stderr, show(proc)
    assert "t.say" in proc.stderr  # did you mean
    assert recs == [] and log(tmp_path) == [] and "hello" not in proc.stdout


# -- 10. hooks registered in Python -----------------------------------------------------------

PY_HOOKS = '''\
import chainlang

audit = chainlang.hook("pre:t.say", id="audit", set={"message": "[audited] {message}"})
'''


def test_a_python_hook_fires(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: hello}
        """)
    write(tmp_path, "py_hooks.py", PY_HOOKS)
    proc, recs = run_chain(chain, "--tools", "py_hooks.py", "--progress", "quiet")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["[audited] hello"], show(proc)
    assert one(recs, "hook_fired", hook="audit")["trigger"] == "pre:t.say"


def test_a_bad_python_hook_is_reported_by_check(tmp_path: Path) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.say: {message: hello}
        """)
    write(tmp_path, "bad_hooks.py", '''\
        import chainlang

        typo = chainlang.hook("pre:t.sya", id="typo", set={"message": "x"})
        ''')
    checked = cli_here(tmp_path, "check", "--tools", "hk_tools.py", "--tools", "bad_hooks.py", chain.name)
    cwd, argv = run(chain, "--tools", "bad_hooks.py")
    ran = cli_here(cwd, *argv)
    assert checked.returncode == 1, show(checked)
    assert_clean(checked)
    assert "bad_hooks.py" in checked.stderr + checked.stdout and "CL041" in checked.stderr + checked.stdout, \
        show(checked)
    assert "t.say" in checked.stderr + checked.stdout  # did you mean
    assert ran.returncode == 1 and "CL041" in ran.stderr, show(ran)
    assert log(tmp_path) == []


# -- 11. check: one file and its directory agree ----------------------------------------------

EVENTS_FILE = """\
    events:
      email.received:
        description: A message arrived.
        payload:
          type: object
          properties:
            sender: {type: string}
            subject: {type: string}
          required: [sender, subject]
          additionalProperties: false
    hooks: []
    """


def test_check_a_file_and_its_directory_agree_on_external_events(tmp_path: Path) -> None:
    write(tmp_path, "inbox.hooks.yaml", EVENTS_FILE)
    write(tmp_path, "watch.chain.yaml", """\
        hooks:
          - id: sarah
            trigger: post:email.received
            condition: sender contains 'Sarah'
            action:
              - user.notify: {message: "mail from {sender}"}
        steps:
          - user.notify: {message: watching}
        """)
    one_file = cli_here(tmp_path, "check", "watch.chain.yaml")
    directory = cli_here(tmp_path, "check", ".")
    from_elsewhere = cli_here(tmp_path.parent, "check", tmp_path / "watch.chain.yaml")
    for proc in (one_file, directory, from_elsewhere):
        assert proc.returncode == 0, show(proc)
        assert "CL041" not in proc.stdout + proc.stderr, show(proc)


def test_check_a_file_and_its_directory_report_the_same_payload_error(tmp_path: Path) -> None:
    write(tmp_path, "inbox.hooks.yaml", EVENTS_FILE)
    write(tmp_path, "watch.chain.yaml", """\
        hooks:
          - id: sarah
            trigger: post:email.received
            condition: sendr contains 'Sarah'
            action:
              - user.notify: {message: "mail"}
        steps:
          - user.notify: {message: watching}
        """)
    one_file, directory = cli_here(tmp_path, "check", "watch.chain.yaml"), cli_here(tmp_path, "check", ".")
    assert one_file.returncode == directory.returncode == 1

    def problems(proc: "object") -> list[str]:
        text = proc.stdout + proc.stderr  # type: ignore[attr-defined]
        return sorted(line.removeprefix("./") for line in text.splitlines() if ": error:" in line)

    assert problems(one_file) == problems(directory) != [], show(one_file) + show(directory)
    assert "sendr" in problems(one_file)[0]


# -- 12. durability: a run killed during a hook action, then resumed ---------------------------


@pytest.mark.slow
def test_resume_after_a_kill_during_a_post_hook_action(tmp_path: Path, spawned: Spawned) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.log: {label: one}
          - t.num: {n: 2}
          - t.log: {label: three}
        hooks:
          - id: quick
            trigger: post:t.log
            condition: label == 'one'
            max_depth: 1
            action:
              - t.log: {label: "quick after {label}"}
          - id: slow
            trigger: post:t.num
            action:
              - t.log: {label: "slow first {n}"}
              - t.wait: {name: go, label: "slow second {n}"}
        """)
    transcript = tmp_path / "run.jsonl"
    cwd, argv = run(chain)
    proc = spawned.start(cwd, *argv)
    wait_for(proc, "the second action step under way, the first finished",
             lambda: has(transcript, "step_finished", step="2/hook:slow/1")()
             and "slow second 2:start" in labels(tmp_path)
             and has(transcript, "hook_finished", hook="quick")())
    kill(proc)
    before = records(transcript)
    assert not of_type(before, "run_finished") and not of_type(before, "hook_finished", hook="slow")
    assert sorted(labels(tmp_path)) == sorted(["one", "quick after one", "num 2", "slow first 2",
                                               "slow second 2:start", "three"])

    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", "hk_tools.py")
    assert resumed.returncode == 0, show(resumed)
    assert_clean(resumed)
    done = labels(tmp_path)
    assert done.count("slow first 2") == 1, done  # finished before the kill: not run again
    assert done.count("quick after one") == 1, done  # its action finished: not run again
    assert done.count("one") == 1 and done.count("num 2") == 1 and done.count("three") == 1, done
    assert done.count("slow second 2:start") == 2 and done.count("slow second 2:end") == 1, done
    recs = validated(transcript, tmp_path)
    assert len(of_type(recs, "hook_finished", hook="quick")) == 1
    assert one(recs, "hook_finished", hook="slow")["status"] == "ok"
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


@pytest.mark.slow
def test_resume_after_a_kill_during_a_pre_hook_action(tmp_path: Path, spawned: Spawned) -> None:
    chain = project(tmp_path, """\
        steps:
          - t.num: {n: 1}
          - t.log: {label: after}
        hooks:
          - id: prep
            trigger: pre:t.num
            set: {n: 5}
            action:
              - t.log: {label: "prep first"}
              - t.wait: {name: go, label: "prep second"}
        """)
    transcript = tmp_path / "run.jsonl"
    cwd, argv = run(chain)
    proc = spawned.start(cwd, *argv)
    wait_for(proc, "the second action step under way",
             lambda: has(transcript, "step_finished", step="1/hook:prep/1")() and "prep second:start" in labels(tmp_path))
    kill(proc)
    assert not of_type(records(transcript), "step_started", step="1")  # the event waits for its pre hooks
    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", "hk_tools.py")
    assert resumed.returncode == 0, show(resumed)
    assert_clean(resumed)
    assert labels(tmp_path) == ["prep first", "prep second:start", "prep second:start", "prep second:end", "num 5",
                                "after"]
    recs = validated(transcript, tmp_path)
    assert len(of_type(recs, "hook_fired", hook="prep")) == 1
    assert one(recs, "hook_finished", hook="prep")["status"] == "ok"
    assert one(recs, "step_started", step="1")["params"] == {"n": 5}
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"
