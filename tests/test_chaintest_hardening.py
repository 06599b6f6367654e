"""chaintest files that would hang pytest or write outside their project (issue 21), run by a
real pytest (pytester, in a subprocess) as their users run them:

- a `command:` step is one of the commands that end by themselves: `serve`, `worker` and
  `lsp` are refused with a clear error when the file is collected;
- every path a test names stays in its project: `project:`, `models:`, `expect.transcript`
  (which `--chaintest-update` writes), `chain:`, `expect.files` and a command's paths;
  absolute paths, `..` escapes and links that point out are refused;
- a test that does not end within its `timeout:` (60 s unless the file says) fails, naming
  the step it was at, and its process (and what it started) is killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.test_chaintest import run, shop, write  # noqa: F401 - `shop` is the fixture of the project

pytest_plugins = ["pytester"]

# a tool that sleeps for as long as it is asked, writing its pid first (to see it killed)
SLOW_TOOLS = '''
import os
import time
from pathlib import Path

from chainlang import event


@event("slow.wait", params={"type": "object", "properties": {"seconds": {"type": "number"}, "pidfile": {"type": "string"}},
                            "required": ["seconds", "pidfile"]},
       result={"type": "object"})
def wait(seconds, pidfile):
    Path(pidfile).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(seconds)
    return {}
'''

SLOW_CHAIN = '''
chainlang: 1
chain: slow.one
inputs:
  seconds: {type: number}
  pidfile: {type: string}
steps:
  - slow.wait: {seconds: "{inputs.seconds}", pidfile: "{inputs.pidfile}"}
'''


@pytest.mark.parametrize("command", ["serve", "serve --port 0", "chainlang worker", "lsp"])
def test_a_long_running_command_is_refused_when_the_file_is_collected(shop: pytest.Pytester, command: str) -> None:
    write(shop, "served.chaintest.yaml", f"""
        steps:
          - command: "{command}"
    """)
    result = run(shop)  # before the change: serve started, and pytest never ended
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    name = command.removeprefix("chainlang ").split()[0]
    assert f"served.chaintest.yaml:3:" in out and f"command: {name}: it runs until it is stopped" in out, out
    assert "a test step gives one of check, describe, emit" in out
    assert "Traceback" not in out


def test_the_short_lived_commands_still_run(shop: pytest.Pytester) -> None:
    write(shop, "commands.chaintest.yaml", """
        tools: {shop.price: {returns: {price: 2}}}
        steps:
          - name: quote
            chain: quote.chain.yaml
            inputs: {item: apple}
          - command: "report .chainlang/runs/{quote.run_id}.jsonl -o quote.html"
            expect: {output: quote.html, files: {quote.html: shop.quote}}
          - command: "check quote.chain.yaml"
          - command: "events"
            expect: {output: shop.price}
    """)
    run(shop).assert_outcomes(passed=1)


@pytest.mark.parametrize(("expect", "message"), [
    ("transcript: {outside}/golden.jsonl", "expect.transcript: {outside}/golden.jsonl is an absolute path"),
    ("transcript: ../outside/golden.jsonl", "expect.transcript: ../outside/golden.jsonl is outside the test's project"),
    ("transcript: goldens/link/golden.jsonl", "expect.transcript: goldens/link/golden.jsonl is outside the test's project"),
])
def test_update_never_writes_a_golden_outside_the_project(pytester: pytest.Pytester, expect: str,
                                                          message: str) -> None:
    """--chaintest-update writes the golden: one outside the project is refused, nothing is written."""
    project = pytester.path / "proj"
    outside = pytester.path / "outside"
    outside.mkdir()
    (project / "goldens").mkdir(parents=True)
    (project / "goldens" / "link").symlink_to(outside, target_is_directory=True)
    (project / "chainlang.toml").write_text("", encoding="utf-8")
    (project / "hello.chain.yaml").write_text("steps:\n  - test.echo: {value: hi}\n", encoding="utf-8")
    (project / "hello.chaintest.yaml").write_text(
        "chain: hello.chain.yaml\nexpect:\n  " + expect.format(outside=outside) + "\n", encoding="utf-8")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "--chaintest-update",
                                           str(project))
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert message.format(outside=outside) in out, out
    assert "hello.chaintest.yaml:3:" in out
    assert list(outside.iterdir()) == [], "a golden was written outside the project"
    assert "Traceback" not in out


@pytest.mark.parametrize(("text", "message"), [
    ("project: /\nchain: quote.chain.yaml\n", "project: / is an absolute path"),
    ("project: ..\nchain: quote.chain.yaml\n", "project: .. is outside the test's project"),
    ("chain: quote.chain.yaml\nmodels: /etc/passwd\n", "models: /etc/passwd is an absolute path"),
    ("chain: quote.chain.yaml\nmodels: ../rules.yaml\n", "models: ../rules.yaml is outside the test's project"),
    ("chain: /etc/passwd\n", "chain: /etc/passwd is an absolute path"),
    ("chain: ../x.chain.yaml\n", "chain: ../x.chain.yaml leads out of the project"),
    ("chain: quote.chain.yaml\nexpect: {files: {../../etc/passwd: root}}\n", "expect.files.../../etc/passwd: "
                                                                              "../../etc/passwd leads out"),
])
def test_every_path_a_test_names_stays_in_its_project(shop: pytest.Pytester, text: str, message: str) -> None:
    (shop.path / "paths.chaintest.yaml").write_text(text, encoding="utf-8")
    result = run(shop)
    result.assert_outcomes(errors=1)
    assert message in result.stdout.str(), result.stdout.str()
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(("command", "message"), [
    ("report quote.jsonl -o /tmp/escaped.html", "command: /tmp/escaped.html: an absolute path"),
    ("report quote.jsonl --output=../escaped.html", "command: --output=../escaped.html: outside the project"),
    ("check link/secret.chain.yaml", "command: link/secret.chain.yaml: outside the project"),
])
def test_a_commands_paths_stay_in_the_project(shop: pytest.Pytester, tmp_path: Path, command: str,
                                              message: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.chain.yaml").write_text("steps:\n  - test.echo: {value: hi}\n", encoding="utf-8")
    (shop.path / "link").symlink_to(outside, target_is_directory=True)
    write(shop, "cmd.chaintest.yaml", f"""
        steps:
          - command: "{command}"
    """)
    result = run(shop)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert message in out, out
    assert not (shop.path.parent / "escaped.html").exists()


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie of an ended process is gone too (its parent, pytest's subprocess, has ended)
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


@pytest.mark.slow
def test_a_test_past_its_timeout_fails_naming_the_step_and_its_process_is_killed(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", chainlang='tools = ["tools.py"]\n')
    (pytester.path / "tools.py").write_text(SLOW_TOOLS, encoding="utf-8")
    (pytester.path / "slow.chain.yaml").write_text(SLOW_CHAIN, encoding="utf-8")
    pidfile = pytester.path / "tool.pid"
    write(pytester, "slow.chaintest.yaml", f"""
        timeout: 60
        tests:
          - name: hangs
            timeout: 15
            steps:
              - chain: slow.chain.yaml
                inputs: {{seconds: 0, pidfile: {pytester.path / "first.pid"}}}
              - chain: slow.chain.yaml
                inputs: {{seconds: 600, pidfile: {pidfile}}}
          - name: quick
            chain: slow.chain.yaml
            inputs: {{seconds: 0, pidfile: {pytester.path / "quick.pid"}}}
    """)
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", timeout=120)
    took = time.monotonic() - started
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "the test did not end within 15 s (timeout: in the test file; the default is 60 s)" in out, out
    assert "step run slow.chain.yaml (line 9)" in out, out
    assert took < 100, took  # 15 s, not the 600 s the tool sleeps
    pid = int(pidfile.read_text(encoding="utf-8"))
    deadline = time.monotonic() + 10
    while not _pid_gone(pid):
        assert time.monotonic() < deadline, f"the hanging test's process {pid} is still running"
        time.sleep(0.05)


# a tool that leaves a thread that is not a daemon running for a moment after it returns:
# the CLI ends its own process at once then (`os._exit`), but a `command:` step runs the
# CLI inside the test's process, which must go on to its next step
LINGERING_TOOLS = '''
import threading
import time

from chainlang import event


@event("linger.start", params={"type": "object"}, result={"type": "object"})
def start():
    threading.Thread(target=time.sleep, args=(3,), daemon=False).start()
    return {}
'''


def test_a_command_step_that_leaves_a_thread_running_does_not_end_the_test(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", chainlang='tools = ["tools.py"]\n')
    (pytester.path / "tools.py").write_text(LINGERING_TOOLS, encoding="utf-8")
    (pytester.path / "linger.chain.yaml").write_text("chain: linger.twice\nsteps:\n  - linger.start: {}\n", encoding="utf-8")
    write(pytester, "linger.chaintest.yaml", """
        tests:
          - name: two runs
            steps:
              - command: run linger.chain.yaml
                expect: {exit: 0}
              - command: run linger.chain.yaml
                expect: {output: run ok}
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1)
