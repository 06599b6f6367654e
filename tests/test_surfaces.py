"""Every output surface of `chainlang run` / `resume` / `check` (issue 7, "secrets on every
surface"), end to end through the CLI, with the tools of tests/run/surface_tools.py (and
tests/run/run_tools.py where a step must be under way). The commands run in the test's own
process (`cli_here`), but in subprocesses where the process is the point: a tool that tries
to end it, a signal, an interpreter started with a narrow PYTHONIOENCODING.

- The decide model's API key, configured as a project configures it (`[decide]` with
  `api_key_env` in chainlang.toml), appears nowhere a user or a CI log sees it: stdout
  (`--json` and text), stderr in every progress mode (plain, rich, quiet), notification
  lines, error lines, diagnostics and the transcript; also when a tool returns it, fails
  with it, reports it, or the decide model echoes it back.
- A string that is not valid Unicode (a lone surrogate) is escaped on every output; it
  never ends the command with an internal error.
- A tool that raises SystemExit or KeyboardInterrupt fails its step (exit 1), while a
  Ctrl-C of the process still interrupts the run (exit 130, resumable).
- `check` of paths that hold no chain file, and `run` / `resume` of a directory, are
  usage errors (exit 2) with one clear line.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.records import StepProgress
from chainlang.output.progress import MAX_TEXT, PlainProgress, QuietProgress
from chainlang.redaction import Redactor, escape_surrogates
from tests.test_decide import KEY, KEY_ENV, FakeEndpoint, Reply, endpoint  # noqa: F401 - endpoint is a fixture
from tests.helpers import clean_env, cli_here, cli_many, command, show
from tests.test_run_cli import (
    TIMEOUT,
    Proc,
    assert_clean,
    one_error_line,
    start_until,
    stop,
    transcript,
    write_chain,
)

SURFACE_TOOLS = Path(__file__).resolve().parent / "run" / "surface_tools.py"
RUN_TOOLS = Path(__file__).resolve().parent / "run" / "run_tools.py"

#: every way a run shows itself: (--json or text) × (plain, rich, quiet)
MODES = [
    ("--json", "--progress", "plain"),
    ("--progress", "plain"),
    ("--json", "--progress", "rich"),
    ("--progress", "rich"),
    ("--json", "--progress", "quiet"),
    ("--progress", "quiet"),
]


@pytest.fixture(autouse=True)
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key variable is set for the commands (clean_env, and cli_here's command, keep the environment)."""
    monkeypatch.setenv(KEY_ENV, KEY)


def project(directory: Path, chain: str, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    """A project whose decide model's key is in KEY_ENV, with one chain file."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "chainlang.toml").write_text(
        f'[decide]\nbase_url = "{base_url}"\nmodel = "phi3"\napi_key_env = "{KEY_ENV}"\n', encoding="utf-8")
    return write_chain(directory, chain)


def run_all_modes(chain: Path, *args: str) -> list[tuple[tuple[str, ...], "Proc[str]", Path]]:
    """The chain run once in each of MODES, in this process: (mode, command, transcript)."""
    ran: list[tuple[tuple[str, ...], "Proc[str]", Path]] = []
    for i, mode in enumerate(MODES):
        proc = cli_here(chain.parent, "run", chain.name, "--tools", SURFACE_TOOLS, "--transcript", f"t{i}.jsonl",
                        *mode, *args)
        ran.append((mode, proc, chain.parent / f"t{i}.jsonl"))
    return ran


def assert_no_key(proc: "Proc[str]", *files: Path) -> None:
    assert_clean(proc)
    assert KEY not in proc.stdout, show(proc)
    assert KEY not in proc.stderr, show(proc)
    for path in files:
        if path.exists():
            assert KEY not in path.read_text(encoding="utf-8"), path


# -- secrets ----------------------------------------------------------------------------------

LEAKY_CHAIN = """\
    steps:
      - surface.key: {}
      - surface.tell_key: {}
      - user.notify: {message: "token {surface.key.token}"}
      - surface.fail_with_key: {}
        on_error: continue
      - surface.echo: {value: "{surface.key.said}"}
    outputs:
      token: "{surface.key.token}"
      said: "{surface.echo.result}"
      whole: "{surface.key}"
    """


def test_the_key_never_shows_in_outputs_progress_notifications_or_errors(tmp_path: Path) -> None:
    chain = project(tmp_path, LEAKY_CHAIN)
    for mode, proc, path in run_all_modes(chain):
        assert_no_key(proc, path)
        assert proc.returncode == 0, show(proc)
        if "--json" in mode:
            outputs = json.loads(proc.stdout)
            assert outputs["token"] == "***" and outputs["said"] == "the key is ***!", show(proc)
            assert outputs["whole"]["all"] == ["***", "***"] and outputs["whole"]["***"] == "as a key", show(proc)
        else:
            assert 'token: "***"' in proc.stdout, show(proc)
        # the notifications (a tool's ctx.notify and user.notify) are shown, masked
        assert "using *** now" in proc.stderr and "[info] token ***" in proc.stderr, show(proc)
        if "plain" in mode:
            assert "sending with ***" in proc.stderr, show(proc)  # the progress line
            assert "failed: RuntimeError: 401 Unauthorized for Bearer ***" in proc.stderr, show(proc)


def test_the_key_never_shows_when_it_fails_the_run(tmp_path: Path) -> None:
    """The one line that says why a run failed (every mode), and a chain whose check errors
    quote it, and an --input that is refused."""
    chain = project(tmp_path, """\
        inputs:
          n: {type: integer, default: 1}
        steps:
          - surface.fail_with_key: {}
        """)
    for mode, proc, path in run_all_modes(chain):
        assert_no_key(proc, path)
        assert proc.returncode == 1, show(proc)
        assert "401 Unauthorized for Bearer ***" in proc.stderr, show(proc)
    invalid = write_chain(tmp_path, f'steps:\n  - surface.no_such_event: {{token: "{KEY}"}}\n', "bad.chain.yaml")
    bad_input = cli_here(tmp_path, "run", chain.name, "--tools", SURFACE_TOOLS, "--input", f"n={KEY}")
    bad_chain = cli_here(tmp_path, "run", invalid.name, "--tools", SURFACE_TOOLS)
    assert "***" in one_error_line(bad_input), show(bad_input)
    assert_no_key(bad_input)
    assert bad_chain.returncode == 1 and "surface.no_such_event" in bad_chain.stderr, show(bad_chain)
    assert_no_key(bad_chain)


def test_a_model_that_echoes_the_key_back(endpoint: FakeEndpoint, tmp_path: Path) -> None:  # noqa: F811
    """The model answers with a reason and params that hold the key (a condition on valid
    params: the step keeps its own params, and the reason is recorded and shown), then with
    an error page that quotes it."""
    chain = project(tmp_path, """\
        steps:
          - surface.echo: {value: hello}
            decide: "only when the message looks urgent"
          - surface.echo: {value: again}
            decide: "only on weekdays"
            on_error: continue
        outputs:
          echoed: "{surface.echo[0].result}"
        """, base_url=endpoint.url)
    for i, mode in enumerate([("--json", "--progress", "plain"), ("--progress", "quiet")]):
        endpoint.reply({"action": "continue", "reason": f"urgent: {KEY}", "params": {"value": f"urgent: {KEY}"}})
        endpoint.replies.append(Reply(status=401, body=f'{{"error": "bad key Bearer {KEY}"}}'))
        path = tmp_path / f"m{i}.jsonl"
        proc = cli_here(tmp_path, "run", chain.name, "--tools", SURFACE_TOOLS, "--transcript", path.name, *mode)
        assert_no_key(proc, path)
        assert proc.returncode == 0, show(proc)
        if "--json" in mode:
            assert json.loads(proc.stdout) == {"echoed": "hello"}, show(proc)
            assert "answered continue: urgent: ***" in proc.stderr, show(proc)
        else:
            assert proc.stdout == 'echoed: "hello"\n', show(proc)
        records = transcript(path)
        decided = [r for r in records if r["type"] == "decide"]
        assert decided[0]["params"] == {"value": "hello"}, decided
        assert decided[0]["reason"].startswith("the light model answered continue: urgent: ***;"), decided
    assert len(endpoint.requests) == 4  # the model was asked: the key was sent to it, and only there
    assert all(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in endpoint.requests)


def test_the_redaction_service() -> None:
    """The one Redactor of a run: free without secrets, masks messages of exceptions."""
    empty = Redactor()
    value = {"a": (1, "x")}
    assert not empty and empty.mask("text") == "text" and empty.redact(value) is value
    redactor = Redactor([KEY])
    assert KEY not in repr(redactor)
    exc = RuntimeError(f"failed with {KEY}", 3)
    redactor.scrub(exc)
    assert exc.args == ("failed with ***", 3)
    assert redactor.redact({KEY: [f"x{KEY}", 1]}) == {"***": ["x***", 1]}
    redactor.add("later-learned-token")  # a secret the run learns: masked from then on
    assert redactor.mask("later-learned-token and " + KEY) == "*** and ***"


def test_a_progress_view_masks_a_secret_before_it_cuts_a_line() -> None:
    """A view gets the run's own records (not the masked copies the transcript has): it masks
    what it shows (notes, and a key cut in half at the end of a long line must not leave
    its first half)."""
    for make in (PlainProgress, QuietProgress):
        stream = io.StringIO()
        view = make(stream)
        view.use_secrets(Redactor([KEY]))
        view.record(StepProgress("1", "e", "x" * (MAX_TEXT - 10) + KEY, None))
        view.note(f"note {KEY}")
        view.close()
        out = stream.getvalue()
        assert KEY[:8] not in out and "note ***" in out, out


# -- strings that are not valid Unicode ----------------------------------------------------


def test_escape_surrogates() -> None:
    assert escape_surrogates("plain é ✓ 😀") == "plain é ✓ 😀"
    text = json.dumps({"a\udc80": "b\ud800"}, ensure_ascii=False)
    escaped = escape_surrogates(text)
    escaped.encode("utf-8")
    assert json.loads(escaped) == {"a\udc80": "b\ud800"}

SURROGATE_OUTPUT = {"text": "a\ud800b", "\udc80key": ["\udfff"], "fine": "é ✓ 😀"}


def test_lone_surrogates_are_escaped_on_every_output(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        steps:
          - surface.surrogate: {where: note}
          - surface.surrogate: {where: error}
            on_error: continue
        outputs:
          value: "{surface.surrogate[0].result}"
        """)
    for mode, proc, path in run_all_modes(chain):
        assert_clean(proc)
        assert proc.returncode == 0, show(proc)
        assert "internal error" not in proc.stderr, show(proc)
        if "--json" in mode:
            assert json.loads(proc.stdout) == {"value": SURROGATE_OUTPUT}, show(proc)
            assert "\\ud800" in proc.stdout, show(proc)
        else:
            name, _, value = proc.stdout.rstrip("\n").partition(": ")
            assert name == "value" and json.loads(value) == SURROGATE_OUTPUT, show(proc)
        assert "half a pair: \\ud800 (a note)" in proc.stderr, show(proc)  # the notification
        if "plain" in mode:
            assert "and \\udfff in progress" in proc.stderr, show(proc)
            assert "got \\udc80 here" in proc.stderr, show(proc)
        assert json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["outputs"] == {"value": SURROGATE_OUTPUT}


def test_a_failure_with_a_lone_surrogate_is_said_in_one_line(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, "steps:\n  - surface.surrogate: {where: error}\n")
    proc = cli_here(tmp_path, "run", chain.name, "--tools", SURFACE_TOOLS, "--progress", "quiet", "--json")
    assert_clean(proc)
    assert proc.returncode == 1, show(proc)
    assert json.loads(proc.stdout) == {}
    assert "run failed: step 1 (surface.surrogate): RuntimeError: cannot decode b'\\x80': got \\udc80 here" \
        in proc.stderr, show(proc)


def test_a_stdout_that_cannot_encode_the_outputs_gets_ascii_json(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, "steps:\n  - surface.surrogate: {}\noutputs:\n  é: \"{surface.surrogate.result}\"\n")
    env = {**clean_env(), "PYTHONIOENCODING": "ascii"}
    for mode in (["--json"], []):
        proc = subprocess.run(command("run", chain.name, "--tools", SURFACE_TOOLS, "--progress", "quiet", *mode),
                              cwd=tmp_path, env=env, capture_output=True, timeout=TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr.decode("ascii", "replace")
        out = proc.stdout.decode("ascii")
        if mode:
            assert json.loads(out) == {"é": SURROGATE_OUTPUT}
        else:
            assert out.startswith("\\xe9: ") and json.loads(out.partition(": ")[2]) == SURROGATE_OUTPUT


# -- a tool that tries to end the process --------------------------------------------------


@pytest.mark.parametrize("event", ["surface.exit", "surface.exit_in_thread", "surface.interrupt",
                                   "surface.interrupt_in_thread"])
def test_a_tool_that_exits_or_interrupts_fails_its_step(tmp_path: Path, event: str) -> None:
    fails = write_chain(tmp_path, f"steps:\n  - {event}: {{}}\n  - surface.echo: {{value: after}}\n", "fails.chain.yaml")
    goes_on = write_chain(tmp_path, textwrap.dedent(f"""\
        steps:
          - {event}: {{}}
            on_error: continue
          - surface.echo: {{value: after}}
        outputs: {{last: "{{surface.echo.result}}"}}
        """), "goes_on.chain.yaml")
    failed, went_on = cli_many(
        (tmp_path, ["run", fails.name, "--tools", SURFACE_TOOLS, "--transcript", "fails.jsonl"]),
        (tmp_path, ["run", goes_on.name, "--tools", SURFACE_TOOLS, "--json", "--transcript", "goes_on.jsonl"]),
    )
    for proc in (failed, went_on):
        assert_clean(proc)
        assert "resume" not in proc.stderr and "interrupted" not in proc.stderr, show(proc)
    assert failed.returncode == 1, show(failed)
    kind = "SystemExit" if "exit" in event else "KeyboardInterrupt"
    assert f"failed: {kind}" in failed.stderr, show(failed)
    records = transcript(tmp_path / "fails.jsonl")
    finished = [r for r in records if r["type"] == "step_finished"]
    assert [(r["step"], r["status"], r["error"]["type"]) for r in finished] == [("1", "failed", "tool_error")]
    assert records[-1]["type"] == "run_finished" and records[-1]["status"] == "failed"
    assert went_on.returncode == 0 and json.loads(went_on.stdout) == {"last": "after"}, show(went_on)


def test_ctrl_c_still_interrupts_the_run_when_a_tool_raised_keyboard_interrupt(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:  # noqa: F811
    """Step 1's tool raises KeyboardInterrupt: its failure (on_error: continue). Then a real
    SIGINT while step 2 runs: exit 130, with resume advice that resume can follow."""
    chain = write_chain(tmp_path, """\
        steps:
          - surface.interrupt: {}
            on_error: continue
          - test.pid_once: {name: step2.pid}
        outputs: {woke: "{test.pid_once.result}"}
        """)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "step2.pid",
                       "--tools", SURFACE_TOOLS, "--transcript", "run.jsonl")
    out, err = stop(proc, signal.SIGINT)
    assert "Traceback" not in err, show(proc, out, err)
    assert proc.returncode == 130, show(proc, out, err)
    assert "interrupted; continue with: chainlang resume run.jsonl" in err, show(proc, out, err)
    records = transcript(tmp_path / "run.jsonl")
    finished = {r["step"]: r for r in records if r["type"] == "step_finished"}
    assert finished["1"]["status"] == "failed" and finished["1"]["error"]["type"] == "tool_error"
    assert finished["2"]["status"] == "cancelled"
    assert records[-1]["status"] == "interrupted"
    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", RUN_TOOLS, "--tools", SURFACE_TOOLS, "--json")
    assert_clean(resumed)
    assert resumed.returncode == 0 and json.loads(resumed.stdout) == {"woke": "awake"}, show(resumed)


def test_a_ctrl_c_raised_inside_a_tool_is_not_the_tools_failure(tmp_path: Path) -> None:
    """Python API under asyncio.run: a second Ctrl-C raises KeyboardInterrupt in whatever runs,
    here a sync tool. That stops the run; it is not recorded as the tool's failure."""
    tools = tmp_path / "ctrl_c_tools.py"
    tools.write_text(textwrap.dedent("""\
        import os, signal, time
        from chainlang import event

        @event("t.ctrl_c", description="Press Ctrl-C twice", idempotent=True)
        def ctrl_c() -> str:
            os.kill(os.getpid(), signal.SIGINT)  # asyncio.run: the first cancels the run
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)  # the second raises KeyboardInterrupt here
            time.sleep(5)
            return "not interrupted"
        """), encoding="utf-8")
    chain = write_chain(tmp_path, "steps:\n  - t.ctrl_c: {}\n")
    script = textwrap.dedent(f"""\
        import chainlang
        try:
            chainlang.run({str(chain)!r}, tools=[{str(tools)!r}], transcript="api.jsonl")
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        else:
            print("no interrupt")
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, encoding="utf-8", timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    assert proc.stdout == "KeyboardInterrupt\n", show(proc)
    records = transcript(tmp_path / "api.jsonl")
    # sync tools run in worker threads: the signal reaches the run, not the tool; the step
    # is cancelled with the run, and nothing records it as the tool's failure
    finished = [r for r in records if r["type"] == "step_finished"]
    assert all(r["status"] == "cancelled" for r in finished), finished
    assert not any((r.get("error") or {}).get("type") == "tool_error" for r in finished), finished


# -- usage errors: paths ------------------------------------------------------------------


def test_check_of_paths_without_chain_files_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.yaml").write_text("steps: []\n", encoding="utf-8")
    (tmp_path / "docs" / ".hidden").mkdir()
    (tmp_path / "docs" / ".hidden" / "x.chain.yaml").write_text("steps: []\n", encoding="utf-8")
    empty, several, missing = (cli_here(tmp_path, "check", "empty/"), cli_here(tmp_path, "check", "empty", "docs"),
                               cli_here(tmp_path, "check", "exmaples/"))
    line = one_error_line(empty)
    assert line.startswith("chainlang: error: empty/: no chain or hooks files found") and "*.chain.yaml" in line
    assert one_error_line(several).startswith("chainlang: error: empty, docs: no chain or hooks files found")
    assert one_error_line(missing) == "chainlang: error: exmaples/: no such file or directory"
    for fmt in ("json", "sarif", "github"):
        assert one_error_line(cli_here(tmp_path, "check", "empty", "--format", fmt))


def test_run_or_resume_of_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    chains = tmp_path / "chains"
    write_chain(chains, "steps:\n  - surface.echo: {value: 1}\n", "b.chain.yaml")
    write_chain(chains, "steps:\n  - surface.echo: {value: 2}\n", "a.chain.yaml")
    (chains / "x.hooks.yaml").write_text("hooks: []\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    first = cli_here(tmp_path, "run", "chains/a.chain.yaml", "--tools", SURFACE_TOOLS, "--transcript",
                     "runs/one.jsonl")
    assert first.returncode == 0, show(first)
    run_dir = cli_here(tmp_path, "run", "chains/", "--tools", SURFACE_TOOLS)
    run_empty = cli_here(tmp_path, "run", "empty", "--tools", SURFACE_TOOLS)
    resume_dir = cli_here(tmp_path, "resume", "runs/")
    resume_empty = cli_here(tmp_path, "resume", "empty")
    transcript_dir = cli_here(tmp_path, "run", "chains/a.chain.yaml", "--tools", SURFACE_TOOLS, "--transcript", "runs")
    line = one_error_line(run_dir)
    assert line.startswith("chainlang: error: chains/: is a directory, not a chain file"), line
    assert "chains/a.chain.yaml" in line and "(2 chain files there)" in line, line
    line = one_error_line(run_empty)
    assert "empty: is a directory, not a chain file" in line and "none directly in it" in line, line
    line = one_error_line(resume_dir)
    assert "runs/: is a directory, not a transcript" in line and "chainlang resume runs/one.jsonl" in line, line
    assert "empty: is a directory, not a transcript" in one_error_line(resume_empty)
    assert "transcript runs: is a directory" in one_error_line(transcript_dir)

