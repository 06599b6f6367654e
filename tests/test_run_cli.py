"""End-to-end tests of `chainlang run` and `chainlang resume` (LANGUAGE.md §9-§11).

Every test runs the real command in a subprocess (`python -m chainlang ...`), with the
working directory in a temporary project and the test tools of `tests/run/run_tools.py`:
exit codes, stdout and stderr, the transcript on disk, and the side effects the tools log
in the project's state directory (`.chainlang/state/calls.jsonl`, and
`notifications.jsonl` for `user.notify`).

The resume tests kill or signal a run while a step is running: the step's tool writes a
pid file in the state directory when it starts (`test.pid_once`, `test.slow_send`) and then
sleeps, so the test knows the step is under way. On the resumed attempt the file is there
already, and the tool returns at once.

A command takes a second or two to start (imports), so independent commands of one test
run concurrently (`cli_many`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import clean_env, cli_many, command, show

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tests" / "run" / "run_tools.py"
TIMEOUT = 60  # seconds, for any one command
START_WITHIN = 20  # seconds for a run to reach the step a test interrupts

Proc = subprocess.CompletedProcess  # type alias for the annotations below


# -- helpers ------------------------------------------------------------------------------


def cli(*args: str | os.PathLike[str], cwd: Path) -> "Proc[str]":
    """`helpers.cli`, the arguments first: run `chainlang ARGS` in `cwd` and wait for it (bounded)."""
    return helpers.cli(cwd, *args)


def run(chain: Path, *args: str | os.PathLike[str]) -> tuple[Path, list[str | os.PathLike[str]]]:
    """A (cwd, args) pair for `cli_many`: `chainlang run CHAIN --tools ... ARGS` in the chain's directory."""
    return chain.parent, ["run", chain.name, "--tools", TOOLS, *args]


def resume(cwd: Path, transcript: str, *args: str | os.PathLike[str]) -> tuple[Path, list[str | os.PathLike[str]]]:
    """A (cwd, args) pair for `cli_many`: `chainlang resume TRANSCRIPT --tools ... ARGS`."""
    return cwd, ["resume", transcript, "--tools", TOOLS, *args]


def assert_clean(proc: "Proc[str]") -> None:
    """No Python traceback, whatever happened."""
    assert "Traceback" not in proc.stderr, show(proc)
    assert "Traceback" not in proc.stdout, show(proc)


def write_chain(directory: Path, text: str, name: str = "main.chain.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, each a JSON object (the test fails on anything else)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path}: the last line is not terminated"
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        value = json.loads(line)
        assert isinstance(value, dict), f"{path}:{number}: not a JSON object: {line}"
        out.append(value)
    return out


def transcript(path: Path) -> list[dict[str, Any]]:
    """The records of a transcript, with the envelope and ordering checked (§9)."""
    records = read_jsonl(path)
    assert records, f"{path} is empty"
    assert records[0]["type"] == "run_started", records[0]
    run_id = records[0]["run_id"]
    for i, rec in enumerate(records, start=1):
        assert isinstance(rec.get("type"), str) and isinstance(rec.get("ts"), str), rec
        assert rec["run_id"] == run_id, rec
        assert rec["seq"] == i, f"seq {rec['seq']} on line {i}"
        if rec["type"].startswith("step_"):
            assert rec["step"] and rec["event"], rec
    return records


def transcript_line(stderr: str, cwd: Path) -> Path:
    """The transcript a command announced on stderr (`transcript: PATH`, relative to its cwd)."""
    found = re.findall(r"^transcript: (.+)$", stderr, re.MULTILINE)
    assert len(found) == 1, stderr
    path = Path(found[0])
    return path if path.is_absolute() else cwd / path


def state(project: Path, name: str) -> list[dict[str, Any]]:
    """A JSONL log of the project's state directory; empty when it was never written."""
    path = project / ".chainlang" / "state" / name
    return read_jsonl(path) if path.exists() else []


def calls(project: Path, event: str | None = None) -> list[dict[str, Any]]:
    return [c for c in state(project, "calls.jsonl") if event is None or c["event"] == event]


def sends(project: Path) -> list[str]:
    """Whom `test.send` sent to, in order."""
    return [c["to"] for c in calls(project, "test.send")]


def steps_of(records: list[dict[str, Any]], kind: str, step: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind and r.get("step") == step]


def step_line(step: str, event: str) -> re.Pattern[str]:
    """A plain progress line about one step: `<symbol> STEP EVENT ...`."""
    return re.compile(rf"^\S+ {re.escape(step)} {re.escape(event)}(?: |$)", re.MULTILINE)


def one_error_line(proc: "Proc[str]") -> str:
    """A usage error: exit code 2 and exactly one line on stderr."""
    assert proc.returncode == 2, show(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("chainlang: error: "), show(proc)
    assert proc.stdout == "", show(proc)
    return lines[0]


def start_until(spawned: list["subprocess.Popen[str]"], chain: Path, marker: Path,
                *args: str | os.PathLike[str]) -> "subprocess.Popen[str]":
    """Start `chainlang run CHAIN` in the background; return once `marker` exists (a step
    under way has written its pid file)."""
    proc = subprocess.Popen(command("run", chain.name, "--tools", TOOLS, *args), cwd=chain.parent, env=clean_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8", start_new_session=True)
    spawned.append(proc)
    deadline = time.monotonic() + START_WITHIN
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended before {marker.name} appeared\n" + show(proc, out, err))
        if time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"{marker.name} did not appear within {START_WITHIN} s\n" + show(proc, out, err))
        time.sleep(0.05)
    assert int(marker.read_text(encoding="utf-8")) == proc.pid
    return proc


def stop(proc: "subprocess.Popen[str]", sig: int) -> tuple[str, str]:
    """Send `sig` to a started run and wait for it to end; (stdout, stderr)."""
    os.kill(proc.pid, sig)
    try:
        return proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"the run did not end within {TIMEOUT} s of signal {sig}\n" + show(proc, out, err))


# -- chains -------------------------------------------------------------------------------

# Step 1 and 4 are side effects that must not happen twice, step 2 a notification (logged
# once per idempotency key), step 3 an idempotent step that is under way when the run dies.
KILL_CHAIN = """\
    steps:
      - test.send: {to: a}
      - user.notify: {message: "sent to {test.send.sent}"}
      - test.pid_once: {name: step3.pid}
      - test.send: {to: b}
    outputs:
      first: "{test.send[0].result}"
      notified: "{user.notify.delivered}"
      third: "{test.pid_once.result}"
      second: "{test.send[1].result}"
    """
KILL_OUTPUTS = {"first": {"sent": "a"}, "notified": True, "third": "awake", "second": {"sent": "b"}}

# Step 2 is a side effect that is NOT idempotent, under way when the run dies.
SLOW_SEND_CHAIN = """\
    steps:
      - test.send: {to: a}
      - test.slow_send: {to: x, name: slow.pid}
      - test.send: {to: b}
    outputs:
      slow: "{test.slow_send.result}"
      last: "{test.send[1].sent}"
    """


# -- 1. exit codes --------------------------------------------------------------------------


def test_exit_codes(tmp_path: Path) -> None:
    ok = write_chain(tmp_path / "ok", """\
        steps:
          - test.echo: {value: 1}
          - test.echo: {value: 2}
        outputs:
          last: "{test.echo[-1].result}"
        """)
    broken = write_chain(tmp_path / "broken", """\
        steps:
          - event: test.fail
            params: {message: stop here}
            on_error: break
          - test.echo: {value: 2}
        outputs:
          after: "{test.echo.result}"
        """)
    failing = write_chain(tmp_path / "failing", """\
        steps:
          - test.echo: {value: 1}
          - test.fail: {message: kaboom}
          - test.echo: {value: 3}
        """)
    invalid = write_chain(tmp_path / "invalid", """\
        steps:
          - test.echo: {value: 1}
          - nosuch.event: {}
        """)
    max_steps = write_chain(tmp_path / "max_steps", """\
        limits: {max_steps: 2}
        steps:
          - test.echo: {value: 1}
          - test.echo: {value: 2}
          - test.echo: {value: 3}
        """)
    timeout = write_chain(tmp_path / "timeout", """\
        limits: {timeout: 300ms}
        steps:
          - test.sleep: {seconds: 30, label: late}
        """)
    p_ok, p_broken, p_failing, p_invalid, p_invalid_t, p_max, p_timeout = cli_many(
        run(ok), run(broken), run(failing), run(invalid), run(invalid, "--transcript", "t.jsonl"), run(max_steps),
        run(timeout))
    for proc in (p_ok, p_broken, p_failing, p_invalid, p_invalid_t, p_max, p_timeout):
        assert_clean(proc)
    # the run timeout stopped the 30 s step: the run ended `limit: timeout` (below) and the step
    # never finished; how long seven CLIs at once take on a busy machine is not the contract
    assert not [r for r in transcript(transcript_line(p_timeout.stderr, timeout.parent))
                if r["type"] == "step_finished" and r.get("status") == "ok"], show(p_timeout)

    assert p_ok.returncode == 0, show(p_ok)
    assert p_ok.stdout == "last: 2\n"

    # a break stops the chain cleanly: exit 0, the rest is not run
    assert p_broken.returncode == 0, show(p_broken)
    assert p_broken.stdout == "after: null\n"
    assert calls(broken.parent, "test.echo") == []
    last = transcript(transcript_line(p_broken.stderr, broken.parent))[-1]
    assert (last["type"], last["status"]) == ("run_finished", "broken")

    # a failing step: exit 1, stderr names the step and the message; later steps do not run
    assert p_failing.returncode == 1, show(p_failing)
    assert re.search(r"^\S+ 2 test\.fail .*kaboom", p_failing.stderr, re.MULTILINE), show(p_failing)
    assert [c["value"] for c in calls(failing.parent, "test.echo")] == [1]
    last = transcript(transcript_line(p_failing.stderr, failing.parent))[-1]
    assert (last["type"], last["status"], last["error"]["step"]) == ("run_finished", "failed", "2")
    assert "kaboom" in last["error"]["message"]

    # check errors: exit 1, the diagnostic with file:line:col, "not started", no transcript
    for proc in (p_invalid, p_invalid_t):
        assert proc.returncode == 1, show(proc)
        assert "main.chain.yaml:3:5" in proc.stderr, show(proc)
        assert "not started" in proc.stderr, show(proc)
        assert "transcript:" not in proc.stderr, show(proc)
        assert proc.stdout == "", show(proc)
    assert not (invalid.parent / ".chainlang").exists()
    assert not (invalid.parent / "t.jsonl").exists()

    # limits: exit 3, stderr names the limit, the transcript records it
    assert p_max.returncode == 3, show(p_max)
    assert "max_steps" in p_max.stderr, show(p_max)
    assert [c["value"] for c in calls(max_steps.parent, "test.echo")] == [1, 2]
    last = transcript(transcript_line(p_max.stderr, max_steps.parent))[-1]
    assert (last["type"], last["status"], last["error"]["limit"]) == ("run_finished", "limit", "max_steps")

    assert p_timeout.returncode == 3, show(p_timeout)
    assert "timeout" in p_timeout.stderr, show(p_timeout)
    last = transcript(transcript_line(p_timeout.stderr, timeout.parent))[-1]
    assert (last["type"], last["status"], last["error"]["limit"]) == ("run_finished", "limit", "timeout")


def test_why_a_run_ended_is_shown_with_progress_quiet(tmp_path: Path) -> None:
    failing = write_chain(tmp_path / "failing", """\
        steps:
          - test.echo: {value: 1}
          - test.fail: {message: kaboom}
        """)
    limited = write_chain(tmp_path / "limited", """\
        limits: {max_steps: 1}
        steps:
          - test.echo: {value: 1}
          - test.echo: {value: 2}
        """)
    p_failing, p_limited = cli_many(run(failing, "--progress", "quiet", "--json"),
                                    run(limited, "--progress", "quiet", "--json"))
    for proc in (p_failing, p_limited):
        assert_clean(proc)
    assert p_failing.returncode == 1, show(p_failing)
    assert "kaboom" in p_failing.stderr and "test.fail" in p_failing.stderr, show(p_failing)
    assert p_limited.returncode == 3, show(p_limited)
    assert "max_steps" in p_limited.stderr, show(p_limited)


def test_usage_errors(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        inputs:
          n: {type: number}
          topic: {type: string, default: launch}
        steps:
          - test.echo: {value: "{inputs.n}"}
        """)
    (tmp_path / "used.jsonl").write_text('{"type":"run_started"}\n', encoding="utf-8")
    missing_file, no_value, bad_now, unknown, missing_input, used_transcript = cli_many(
        (tmp_path, ["run", "nowhere.chain.yaml", "--tools", TOOLS]),
        run(chain, "--input", "novalue"),
        run(chain, "--input", "n=1", "--now", "next tuesday"),
        run(chain, "--input", "n=1", "--input", "nn=2"),
        run(chain, "--input", "topic=x"),
        run(chain, "--input", "n=1", "--transcript", "used.jsonl"),
    )
    for proc in (missing_file, no_value, bad_now, unknown, missing_input, used_transcript):
        assert_clean(proc)
    assert "nowhere.chain.yaml" in one_error_line(missing_file)
    assert "novalue" in one_error_line(no_value)
    assert "--now" in one_error_line(bad_now)
    assert "unknown input 'nn'" in one_error_line(unknown)
    assert "missing input 'n'" in one_error_line(missing_input)
    assert "used.jsonl" in one_error_line(used_transcript)
    # nothing ran, nothing was written
    assert not (tmp_path / ".chainlang").exists()
    assert (tmp_path / "used.jsonl").read_text(encoding="utf-8") == '{"type":"run_started"}\n'


# -- 2. inputs and outputs ------------------------------------------------------------------


INPUTS_CHAIN = """\
    inputs:
      n: {type: number}
      tags: {type: array, items: {type: string}}
      topic: {type: string}
    steps:
      - test.add: {a: "{inputs.n}", b: 1}
      - user.notify: {message: "about {inputs.topic}"}
    outputs:
      n: "{inputs.n}"
      n_plus: "{test.add.result}"
      tags: "{inputs.tags}"
      count: "{inputs.tags | length}"
      topic: "{inputs.topic}"
    """
INPUTS = ["--input", "n=3", "--input", 'tags=["a","b"]', "--input", "topic=hello world"]
INPUTS_OUTPUTS = {"n": 3, "n_plus": 4, "tags": ["a", "b"], "count": 2, "topic": "hello world"}


def test_inputs_and_json_outputs(tmp_path: Path) -> None:
    as_json = write_chain(tmp_path / "json", INPUTS_CHAIN)
    as_text = write_chain(tmp_path / "text", INPUTS_CHAIN)
    p_json, p_text = cli_many(run(as_json, *INPUTS, "--json"), run(as_text, *INPUTS))
    for proc in (p_json, p_text):
        assert_clean(proc)
        assert proc.returncode == 0, show(proc)

    # --json: exactly one JSON object on stdout, nothing else (the notification is on stderr)
    assert len(p_json.stdout.splitlines()) == 1, show(p_json)
    outputs = json.loads(p_json.stdout)
    assert outputs == INPUTS_OUTPUTS
    assert type(outputs["n"]) is int  # `n=3` is the JSON number 3, not the text "3"
    assert "[info] about hello world" in p_json.stderr
    started = transcript(transcript_line(p_json.stderr, as_json.parent))[0]
    assert started["inputs"] == {"n": 3, "tags": ["a", "b"], "topic": "hello world"}

    # without --json: one `name: json` line per output, in declaration order
    assert p_text.stdout.splitlines() == [f"{name}: {json.dumps(value)}" for name, value in INPUTS_OUTPUTS.items()]
    assert "[info] about hello world" in p_text.stderr


# -- 3. transcripts and the clock -------------------------------------------------------------


def test_default_transcript(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        steps:
          - test.echo: {value: 1}
          - tools.now
        """)
    proc = cli(*run(chain)[1], cwd=tmp_path)
    assert_clean(proc)
    assert proc.returncode == 0, show(proc)
    path = transcript_line(proc.stderr, tmp_path)
    # .chainlang/runs/ of the project: the chain's directory when there is no chainlang.toml
    assert path.resolve().parent == (tmp_path / ".chainlang" / "runs").resolve()
    assert path.suffix == ".jsonl" and path.is_file()
    records = transcript(path)
    assert records[0]["type"] == "run_started" and records[0]["resumed"] is False
    assert records[0]["run_id"] == path.stem
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "ok"
    assert [(r["step"], r["event"], r["status"]) for r in records if r["type"] == "step_finished"] == [
        ("1", "test.echo", "ok"), ("2", "tools.now", "ok")]


def test_transcript_path_and_pinned_clock(tmp_path: Path) -> None:
    text = """\
        steps:
          - tools.now
        outputs:
          iso: "{tools.now.iso}"
          date: "{tools.now.date}"
          weekday: "{tools.now.weekday}"
        """
    offset = write_chain(tmp_path / "offset", text)
    utc = write_chain(tmp_path / "utc", text)
    p_offset, p_utc = cli_many(
        run(offset, "--json", "--transcript", "out/run.jsonl", "--now", "2025-01-15T09:30:00+01:00"),
        run(utc, "--json", "--transcript", "run.jsonl", "--now", "2024-02-29T23:59:59Z"),
    )
    for proc in (p_offset, p_utc):
        assert_clean(proc)
        assert proc.returncode == 0, show(proc)
    assert json.loads(p_offset.stdout) == {"iso": "2025-01-15T09:30:00+01:00", "date": "2025-01-15",
                                           "weekday": "Wednesday"}
    assert json.loads(p_utc.stdout) == {"iso": "2024-02-29T23:59:59+00:00", "date": "2024-02-29",
                                        "weekday": "Thursday"}

    # --transcript PATH (relative to the working directory; missing directories are made)
    assert transcript_line(p_offset.stderr, offset.parent).resolve() == (offset.parent / "out" / "run.jsonl").resolve()
    records = transcript(offset.parent / "out" / "run.jsonl")
    assert records[0]["now"] == "2025-01-15T09:30:00+01:00"
    assert records[-1]["type"] == "run_finished" and records[-1]["outputs"]["weekday"] == "Wednesday"
    assert not (offset.parent / ".chainlang" / "runs").exists()
    assert transcript(utc.parent / "run.jsonl")[0]["now"] == "2024-02-29T23:59:59+00:00"


# -- 4. progress ------------------------------------------------------------------------------


def test_progress_plain_and_quiet(tmp_path: Path) -> None:
    text = """\
        steps:
          - test.echo: {value: 1}
          - [tools.now, {test.add: {a: 1, b: 2}}]
          - steps:
              - user.notify: {message: hello}
        """
    plain = write_chain(tmp_path / "plain", text)
    quiet = write_chain(tmp_path / "quiet", text)
    p_plain, p_quiet = cli_many(run(plain), run(quiet, "--progress", "quiet"))
    for proc in (p_plain, p_quiet):
        assert_clean(proc)
        assert proc.returncode == 0, show(proc)
    expected = [("1", "test.echo"), ("2.1", "tools.now"), ("2.2", "test.add"), ("3.1", "user.notify")]
    records = transcript(transcript_line(p_plain.stderr, plain.parent))
    assert sorted((r["step"], r["event"]) for r in records if r["type"] == "step_finished") == expected
    # stderr is a pipe, not a terminal: plain lines, one per finished step
    for step, event in expected:
        assert len(step_line(step, event).findall(p_plain.stderr)) == 1, (step, event, p_plain.stderr)
    # quiet: no step lines (the transcript path and the notification itself are still shown)
    for step, event in expected:
        assert not step_line(step, event).search(p_quiet.stderr), p_quiet.stderr
    transcript_line(p_quiet.stderr, quiet.parent)
    assert [line for line in p_quiet.stderr.splitlines() if not line.startswith("transcript: ")] == ["[info] hello"]


# -- 5. resume --------------------------------------------------------------------------------


def test_resume_after_kill_runs_nothing_twice(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    chain = write_chain(tmp_path, KILL_CHAIN)
    marker = tmp_path / ".chainlang" / "state" / "step3.pid"
    proc = start_until(spawned, chain, marker, "--transcript", "run.jsonl")
    out, err = stop(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, show(proc, out, err)

    path = tmp_path / "run.jsonl"
    records = transcript(path)
    assert [r["status"] for r in records if r["type"] == "step_finished"] == ["ok", "ok"]  # steps 1 and 2
    assert len(steps_of(records, "step_started", "3")) == 1
    assert steps_of(records, "step_finished", "3") == []
    assert not any(r["type"] == "run_finished" for r in records)
    assert sends(tmp_path) == ["a"]
    assert len(state(tmp_path, "notifications.jsonl")) == 1

    # the tools are given again: resume never imports what a transcript names
    resumed = cli("resume", "run.jsonl", "--tools", TOOLS, "--json", cwd=tmp_path)
    assert_clean(resumed)
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == KILL_OUTPUTS
    assert "[info] sent to a" not in resumed.stderr  # the notification is not shown again

    # every side effect happened exactly once
    assert sends(tmp_path) == ["a", "b"]
    assert len(state(tmp_path, "notifications.jsonl")) == 1
    # the idempotent step 3 ran again, as the same attempt (same idempotency key)
    third = calls(tmp_path, "test.pid_once")
    assert [(c["first"], c["attempt"]) for c in third] == [(True, 1), (False, 1)]
    assert third[0]["key"] == third[1]["key"]

    records = transcript(path)
    restarts = [r for r in records[1:] if r["type"] == "run_started"]
    assert len(restarts) == 1 and restarts[0]["resumed"] is True
    assert restarts[0]["run_id"] == records[0]["run_id"]
    for step in ("1", "2", "4"):
        assert len(steps_of(records, "step_started", step)) == 1, step  # finished steps were not re-run
    assert len(steps_of(records, "step_started", "3")) == 2
    assert [r["status"] for r in steps_of(records, "step_finished", "3")] == ["ok"]
    assert records[-1]["type"] == "run_finished"
    assert records[-1]["status"] == "ok" and records[-1]["outputs"] == KILL_OUTPUTS
    assert [r["type"] for r in records].count("run_finished") == 1


def _killed_in_slow_send(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> Path:
    """Run SLOW_SEND_CHAIN and kill it while its non-idempotent step 2 is under way."""
    chain = write_chain(tmp_path, SLOW_SEND_CHAIN)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "slow.pid", "--transcript", "run.jsonl")
    out, err = stop(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL, show(proc, out, err)
    records = transcript(tmp_path / "run.jsonl")
    assert len(steps_of(records, "step_started", "2")) == 1 and steps_of(records, "step_finished", "2") == []
    return tmp_path / "run.jsonl"


def test_resume_stops_at_unfinished_non_idempotent_step_then_rerun(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    path = _killed_in_slow_send(tmp_path, spawned)

    blocked = cli("resume", path.name, "--tools", TOOLS, cwd=tmp_path)
    assert_clean(blocked)
    assert blocked.returncode != 0, show(blocked)
    assert blocked.returncode != 2, show(blocked)  # not a usage error: the run stopped
    assert "step 2" in blocked.stderr and "test.slow_send" in blocked.stderr, show(blocked)
    assert "--rerun 2" in blocked.stderr and "--skip 2" in blocked.stderr, show(blocked)
    # nothing was run again: not the unfinished step, not the steps after it
    assert [c.get("phase") for c in calls(tmp_path, "test.slow_send")] == ["start"]
    assert sends(tmp_path) == ["a"]
    assert transcript(path)[-1]["type"] == "run_finished"

    # a step that finished cannot be re-run on request
    wrong = cli("resume", path.name, "--tools", TOOLS, "--rerun", "1", cwd=tmp_path)
    assert_clean(wrong)
    assert "--rerun" in one_error_line(wrong)

    rerun = cli("resume", path.name, "--tools", TOOLS, "--rerun", "2", "--json", cwd=tmp_path)
    assert_clean(rerun)
    assert rerun.returncode == 0, show(rerun)
    assert json.loads(rerun.stdout) == {"slow": {"sent": "x"}, "last": "b"}
    assert [c.get("phase") for c in calls(tmp_path, "test.slow_send")] == ["start", "start", "end"]
    assert sends(tmp_path) == ["a", "b"]
    records = transcript(path)
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "ok"
    assert len(steps_of(records, "step_started", "1")) == 1


def test_resume_skip_unfinished_non_idempotent_step(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    path = _killed_in_slow_send(tmp_path, spawned)
    skipped = cli("resume", path.name, "--tools", TOOLS, "--skip", "2", "--json", cwd=tmp_path)
    assert_clean(skipped)
    assert skipped.returncode == 0, show(skipped)
    assert json.loads(skipped.stdout) == {"slow": None, "last": "b"}
    assert [c.get("phase") for c in calls(tmp_path, "test.slow_send")] == ["start"]  # not called again
    assert sends(tmp_path) == ["a", "b"]
    records = transcript(path)
    assert steps_of(records, "step_finished", "2")[-1]["status"] == "skipped"
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "ok"


def test_resume_finished_run_changes_nothing(tmp_path: Path) -> None:
    ok = write_chain(tmp_path / "ok", """\
        steps:
          - test.echo: {value: 1}
        outputs:
          value: "{test.echo.result}"
        """)
    failing = write_chain(tmp_path / "failing", "steps:\n  - test.fail: {message: kaboom}\n")
    limited = write_chain(tmp_path / "limited", """\
        limits: {max_steps: 1}
        steps:
          - test.echo: {value: 1}
          - test.echo: {value: 2}
        """)
    chains = (ok, failing, limited)
    firsts = cli_many(*(run(chain, "--transcript", "run.jsonl") for chain in chains))
    assert [p.returncode for p in firsts] == [0, 1, 3], [show(p) for p in firsts]
    before = [((c.parent / "run.jsonl").read_bytes(), calls(c.parent)) for c in chains]

    again = cli_many(*(resume(c.parent, "run.jsonl") for c in chains))
    for chain, first, proc, (data, logged) in zip(chains, firsts, again, before):
        assert_clean(proc)
        assert proc.returncode == first.returncode, show(proc)  # that run's exit code
        assert (chain.parent / "run.jsonl").read_bytes() == data  # nothing appended
        assert calls(chain.parent) == logged  # nothing run
        assert proc.stdout in ("", first.stdout), show(proc)  # at most the same outputs again
        assert not re.search(r"^\S+ \d+ test\.", proc.stderr, re.MULTILINE), show(proc)  # no step ran


def test_resume_bad_transcripts(tmp_path: Path) -> None:
    (tmp_path / "garbage.jsonl").write_text("this is not json\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "array.jsonl").write_text("[1, 2]\n", encoding="utf-8")
    (tmp_path / "nostart.jsonl").write_text(
        '{"type":"step_started","run_id":"r","seq":1,"ts":"2025-01-01T00:00:00.000Z","step":"1","event":"a.b"}\n',
        encoding="utf-8")
    (tmp_path / "gone.jsonl").write_text(
        '{"type":"run_started","run_id":"r","seq":1,"ts":"2025-01-01T00:00:00.000Z",'
        '"file":"no-such-dir/gone.chain.yaml","inputs":{},"now":null}\n', encoding="utf-8")
    (tmp_path / "adir.jsonl").mkdir()
    names = ["garbage.jsonl", "empty.jsonl", "array.jsonl", "nostart.jsonl", "gone.jsonl", "adir.jsonl",
             "missing.jsonl"]
    procs = cli_many(*(resume(tmp_path, name) for name in names))
    for name, proc in zip(names, procs):
        assert_clean(proc)
        assert name in one_error_line(proc) or name == "gone.jsonl", show(proc)
    assert "gone.chain.yaml" in procs[names.index("gone.jsonl")].stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_interrupts_then_resume(tmp_path: Path, spawned: list["subprocess.Popen[str]"], sig: int) -> None:
    chain = write_chain(tmp_path, KILL_CHAIN)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "step3.pid", "--transcript", "run.jsonl")
    out, err = stop(proc, sig)
    assert "Traceback" not in err, show(proc, out, err)
    assert proc.returncode == 130, show(proc, out, err)
    assert "chainlang resume run.jsonl" in err, show(proc, out, err)

    path = tmp_path / "run.jsonl"
    records = transcript(path)
    assert [r["status"] for r in steps_of(records, "step_finished", "3")] == ["cancelled"]
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "interrupted"
    assert sends(tmp_path) == ["a"]

    resumed = cli("resume", "run.jsonl", "--tools", TOOLS, "--json", cwd=tmp_path)
    assert_clean(resumed)
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == KILL_OUTPUTS
    assert sends(tmp_path) == ["a", "b"]
    assert len(state(tmp_path, "notifications.jsonl")) == 1
    records = transcript(path)
    assert [r["resumed"] for r in records if r["type"] == "run_started"] == [False, True]
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "ok"
    for step in ("1", "2", "4"):
        assert len(steps_of(records, "step_started", step)) == 1, step
