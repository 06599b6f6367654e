"""`repeat` (LANGUAGE.md §2, issue 23): the bounded loop end to end through `chainlang run`,
and a run killed with SIGKILL in the middle of a loop, then resumed.

The static checks (CL050-CL052) are goldens: tests/chains/err/repeat-*.chain.yaml. The
same loops on the Temporal engine: tests/engines/repeat-*.chain.yaml (tests/test_temporal.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import clean_env, cli, command, records, records_so_far, show

REPO = Path(__file__).resolve().parent.parent
RUN_TOOLS = REPO / "tests" / "run" / "run_tools.py"
GATE_TOOLS = REPO / "tests" / "repeat_tools.py"
TIMEOUT = 60


def write(directory: Path, text: str, name: str = "main.chain.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run(directory: Path, text: str, *extra: str) -> tuple["subprocess.CompletedProcess[str]", list[dict[str, Any]]]:
    write(directory, text)
    proc = cli(directory, "run", "main.chain.yaml", "--tools", RUN_TOOLS, "--json", "--transcript", "run.jsonl", *extra)
    return proc, records(directory / "run.jsonl")


def steps(recs: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(r["step"], r["status"], r["result"]) for r in recs if r["type"] == "step_finished"]


def test_a_fold_runs_until_it_holds_and_the_loop_reads_as_its_last_pass_after_it(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - id: start
            test.echo: {value: 2}
          - id: fold
            repeat:
              - id: step
                test.add: {a: "{loop.total}", b: "{start.result}"}
              - test.echo: {value: "pass {loop.pass}: {step.result}"}
            until: "{loop.total} >= 6"
            max: 10
            state: {total: 0, seen: []}
            next: {total: "{step.result}", seen: "{loop.seen + [test.echo.result]}"}
          - test.add: {a: "{step.result}", b: "{fold.passes}"}
        outputs:
          fold: "{fold.result}"
          after: "{test.add.result}"
          last_echo: "{test.echo.result}"
        """)
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {
        "fold": {"state": {"total": 6, "seen": ["pass 1: 2", "pass 2: 4", "pass 3: 6"]}, "passes": 3},
        "after": 9, "last_echo": "pass 3: 6"}
    # every pass's steps are recorded under STEP#PASS, the way a foreach item's are under STEP[i]
    assert [s for s, _, _ in steps(recs)] == ["1", "2#1.1", "2#1.2", "2#2.1", "2#2.2", "2#3.1", "2#3.2", "3"]


def test_an_until_never_true_fails_the_step_with_a_limit_error_after_max_passes(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - id: tolerant
            repeat: [test.echo: {value: "{loop.pass}"}]
            until: "{test.echo.result} > 5"
            max: 2
            on_error: continue
          - test.echo: {value: "went on after {tolerant.error.type}"}
          - repeat: [test.add: {a: "{loop.pass}", b: 0}]
            until: "{test.add.result} > 100"
            max: 3
          - test.echo: {value: never}
        """)
    assert proc.returncode == 1, show(proc)
    assert [s for s, _, _ in steps(recs)] == ["1#1.1", "1#2.1", "2", "3#1.1", "3#2.1", "3#3.1"]
    assert steps(recs)[2][2] == "went on after limit"
    end = recs[-1]
    assert end["status"] == "failed" and end["error"]["type"] == "limit" and end["error"]["step"] == "3", end
    assert "still false after max = 3 passes" in end["error"]["message"]


def test_without_until_the_body_runs_max_times_and_if_foreach_timeout_apply(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - id: counted
            repeat: [test.echo: {value: "{loop.pass}"}]
            max: 3
          - id: each
            foreach: [a, b]
            repeat: [test.echo: {value: "{item}{loop.pass}"}]
            max: 2
          - id: never
            if: "false"
            repeat: [test.echo: {value: x}]
            max: 2
          - id: slow
            repeat: [test.sleep: {seconds: 30}]
            max: 2
            timeout: 200ms
            on_error: continue
        outputs:
          counted: "{counted.result}"
          each: "{each.result}"
          never: "{never.status}"
          slow: "{slow.error.type}"
        """)
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"counted": {"state": {}, "passes": 3},
                                       "each": [{"state": {}, "passes": 2}] * 2, "never": "skipped",
                                       "slow": "timeout"}
    ok = sorted(s for s, status, _ in steps(recs) if status == "ok")  # the foreach items run at once
    assert ok == ["1#1.1", "1#2.1", "1#3.1", "2[0]#1.1", "2[0]#2.1", "2[1]#1.1", "2[1]#2.1"]


def test_every_pass_counts_against_max_steps(tmp_path: Path) -> None:
    # the checker counts a foreach over a computed list once; the run counts each step it executes
    proc, recs = run(tmp_path, """\
        limits: {max_steps: 10}
        steps:
          - id: items
            test.echo: {value: [1, 2, 3]}
          - repeat:
              - foreach: "{items.result}"
                test.echo: {value: "{item}"}
            max: 4
        """)
    assert proc.returncode == 3, show(proc)
    assert recs[-1]["status"] == "limit" and "max_steps = 10" in recs[-1]["error"]["message"], recs[-1]


def test_a_failing_until_is_an_expression_failure_of_the_step(tmp_path: Path) -> None:
    proc, recs = run(tmp_path, """\
        steps:
          - repeat: [test.echo: {value: {a: 1}}]
            until: "{test.echo.result.a} > 'x'"
            max: 2
        """)
    assert proc.returncode == 1, show(proc)
    assert recs[-1]["error"]["type"] == "expression" and "until" in recs[-1]["error"]["message"], recs[-1]


def test_a_secret_read_only_by_a_repeat_s_state_and_until_is_read_when_the_run_starts(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(f'tools = [{json.dumps(str(RUN_TOOLS))}]\n'
                                             '[secrets]\nTOKEN = {env = "REPEAT_TOKEN"}\n', encoding="utf-8")
    write(tmp_path, """\
        steps:
          - id: r
            repeat: [test.echo: {value: "{loop.pass}"}]
            max: 3
            state: {ok: "{secrets.TOKEN == 'open-sesame'}"}
            until: "{loop.ok and secrets.TOKEN != ''}"
        outputs: {r: "{r.result}"}
        """)
    proc = cli(tmp_path, "run", "main.chain.yaml", "--json", env=clean_env(REPEAT_TOKEN="open-sesame"))
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"r": {"state": {"ok": True}, "passes": 1}}
    # a secret that cannot be read stops the run before its first step, not in the middle of the loop
    missing = cli(tmp_path, "run", "main.chain.yaml", "--json", env=clean_env(REPEAT_TOKEN=None))
    assert missing.returncode == 2 and "cannot start the run" in missing.stderr and "REPEAT_TOKEN" in missing.stderr, \
        show(missing)
    assert "test.echo" not in missing.stderr


# -- killed with SIGKILL in the middle of a loop, then resumed --------------------------------

GATED = """\
    steps:
      - id: poll
        repeat:
          - gate.note: {ref: "p{loop.pass}"}
          - gate.wait: {name: "pass{loop.pass}"}
        max: 3
        delay: DELAY
        state: {seen: []}
        next: {seen: "{loop.seen + [gate.note.result]}"}
    outputs:
      poll: "{poll.result}"
    """


def start(directory: Path, spawned: list["subprocess.Popen[str]"]) -> "subprocess.Popen[str]":
    proc = subprocess.Popen(command("run", "main.chain.yaml", "--tools", GATE_TOOLS, "--transcript", "run.jsonl"),
                            cwd=directory, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", start_new_session=True)
    spawned.append(proc)
    return proc


def wait_for(proc: "subprocess.Popen[str]", done: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"{what} did not happen\nexit code {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}")
        time.sleep(0.02)


def kill(proc: "subprocess.Popen[str]") -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)


def notes(directory: Path) -> list[tuple[str, str, int]]:
    path = directory / ".chainlang" / "state" / "notes.jsonl"
    return [(n["ref"], n["step"], n["pid"]) for n in map(json.loads, path.read_text(encoding="utf-8").splitlines())]


def at(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()


def one(recs: list[dict[str, Any]], kind: str, step: str) -> dict[str, Any]:
    found = [r for r in recs if r["type"] == kind and r.get("step") == step]
    assert len(found) == 1, (kind, step, found)
    return found[0]


@pytest.mark.slow
def test_a_resumed_loop_goes_on_at_its_pass_and_step_and_does_not_serve_a_delay_twice(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    state = tmp_path / ".chainlang" / "state"
    state.mkdir(parents=True)
    for name in ("pass1", "pass3"):
        (state / f"{name}.open").touch()
    write(tmp_path, GATED.replace("DELAY", "4s"))
    proc = start(tmp_path, spawned)
    # pass 1 ran, the 4 s before pass 2 were served, pass 2 noted its ref and waits at its gate
    wait_for(proc, (state / "pass2.waiting").exists, "pass 2 reaching its gate")
    kill(proc)
    first = records_so_far(tmp_path / "run.jsonl")
    assert not any(r["type"] == "run_finished" for r in first)

    (state / "pass2.open").touch()
    resumed = cli(tmp_path, "resume", "run.jsonl", "--tools", GATE_TOOLS, "--json", timeout=TIMEOUT)
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"poll": {"state": {"seen": ["p1", "p2", "p3"]}, "passes": 3}}
    # each pass's note happened once: passes 1 and 2 by the killed process, pass 3 after the resume
    noted = notes(tmp_path)
    assert [(ref, step) for ref, step, _ in noted] == [("p1", "1#1.1"), ("p2", "1#2.1"), ("p3", "1#3.1")]
    assert noted[0][2] == noted[1][2] == proc.pid and noted[2][2] != proc.pid
    recs = records(tmp_path / "run.jsonl")
    later = recs[len(first):]
    restarted = [r["step"] for r in later if r["type"] == "step_started"]
    assert restarted == ["1#2.2", "1#3.1", "1#3.2"]  # the gate it was killed at, then pass 3
    # the delay before pass 2 was served before the kill: not started again, not waited again
    assert not [r for r in later if r["type"] == "clock" and r["step"] == "1#2"]
    resumed_at = at(next(r for r in later if r["type"] == "run_started"))
    assert at(one(later, "step_started", "1#2.2")) - resumed_at < 4
    # the delay before pass 3 is served in full, by the resumed run
    timer = one(later, "clock", "1#3")
    assert at(one(later, "step_started", "1#3.1")) - at(timer) >= 4 - 0.01
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok"


@pytest.mark.slow
def test_a_delay_cut_by_a_kill_waits_only_what_is_left_of_it_on_resume(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    state = tmp_path / ".chainlang" / "state"
    state.mkdir(parents=True)
    for name in ("pass1", "pass2", "pass3"):
        (state / f"{name}.open").touch()
    write(tmp_path, GATED.replace("DELAY", "6s").replace("max: 3", "max: 2"))
    proc = start(tmp_path, spawned)

    def timer_started() -> bool:
        return any(r["type"] == "clock" and r.get("step") == "1#2" for r in records_so_far(tmp_path / "run.jsonl"))

    wait_for(proc, timer_started, "the delay before pass 2 starting")
    kill(proc)
    began = at(one(records_so_far(tmp_path / "run.jsonl"), "clock", "1#2"))
    while time.time() < began + 3:  # half of the delay passes while no process runs the chain
        time.sleep(0.05)
    resumed = cli(tmp_path, "resume", "run.jsonl", "--tools", GATE_TOOLS, "--json", timeout=TIMEOUT)
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"poll": {"state": {"seen": ["p1", "p2"]}, "passes": 2}}
    recs = records(tmp_path / "run.jsonl")
    resumed_at = at([r for r in recs if r["type"] == "run_started"][-1])
    second = at(one(recs, "step_started", "1#2.1"))
    assert second >= began + 6 - 0.01  # the timer is durable: the whole delay passed before pass 2
    assert second < resumed_at + 6  # and the resumed run did not start it over
    assert [ref for ref, _, _ in notes(tmp_path)] == ["p1", "p2"]


# -- the editor ----------------------------------------------------------------------------


def test_the_editor_completes_the_keys_of_a_repeat(tmp_path: Path) -> None:
    from tests.lsp_util import Client

    client = Client(tmp_path)
    try:
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        client.notify("initialized", {})
        text = ("steps:\n"
                "  - repeat: [tools.now]\n"
                "    max: 3\n"
                "    \n"                # 3: the keys a repeat may still take
                "  - \n")               # 4: a new step: repeat is one of its forms
        uri = client.open(tmp_path / "r.chain.yaml", text)
        keys = set(client.complete(uri, 3, 4))
        assert {"until", "delay", "state", "next", "timeout", "on_error"} <= keys
        assert not keys & {"max", "repeat", "params", "retry", "then"}  # written already, or of other forms
        assert "repeat" in client.complete(uri, 4, 4)
    finally:
        client.proc.kill()
        client.proc.wait(timeout=TIMEOUT)
