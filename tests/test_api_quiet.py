"""chainlang as a library is quiet (issue 26, §11 "The Python API"): what a run tells
(user.notify) and what a resume notes go to the caller's `notify=` or to the `chainlang`
logger, never to stdout/stderr; the sync wrappers refuse to run inside an event loop with
a clear error and no "never awaited" noise; the `chain_project` fixture has async methods."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, clean_env, cli, records

pytest_plugins = ["pytester"]

NOTIFY = """
chainlang: 1
chain: demo.hello
steps:
  - user.notify: {message: "hello there"}
outputs:
  done: "yes"
"""

WAIT = """
chainlang: 1
chain: demo.approve
events:
  order.approved:
    payload: {type: object}
steps:
  - wait: {event: order.approved, timeout: 1d}
    id: approval
"""

TOOLS = """
from chainlang import event


@event("demo.double", params={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
       result={"type": "integer"})
def double(n):
    return n * 2
"""


def python(cwd: Path, script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`script` run by this Python in `cwd`, as an app embedding chainlang would."""
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(script)], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def chainlang_log() -> Iterator[list[logging.LogRecord]]:
    """The records of the `chainlang` logger, as an app's handler gets them (INFO and up)."""
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    logger = logging.getLogger("chainlang")
    handler, level = Keep(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield got
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_run_from_python_writes_nothing_to_stdout_or_stderr(tmp_path: Path) -> None:
    (tmp_path / "hello.chain.yaml").write_text(NOTIFY, encoding="utf-8")
    ran = python(tmp_path, """
        import chainlang
        result = chainlang.run("hello.chain.yaml")
        assert result.status == "ok", result
    """)
    assert ran.returncode == 0, ran.stderr
    assert (ran.stdout, ran.stderr) == ("", "")


def test_notifications_go_to_notify_or_else_to_the_chainlang_logger(
        tmp_path: Path, chainlang_log: list[logging.LogRecord]) -> None:
    import chainlang

    (tmp_path / "hello.chain.yaml").write_text(NOTIFY, encoding="utf-8")
    told: list[str] = []
    assert chainlang.run(tmp_path / "hello.chain.yaml", notify=told.append).status == "ok"
    assert [t for t in told if "hello there" in t] and not chainlang_log  # given notify=: the logger is not used

    assert chainlang.run(tmp_path / "hello.chain.yaml").status == "ok"
    [record] = [r for r in chainlang_log if "hello there" in r.getMessage()]
    assert record.levelno == logging.INFO and record.name.startswith("chainlang")


def test_with_no_logging_configured_a_warning_of_chainlang_is_not_printed(tmp_path: Path) -> None:
    """Python's last-resort handler prints WARNING records when no handler is found: the
    library's NullHandler on `chainlang` keeps a resume's note off stderr."""
    ran = python(tmp_path, """
        import logging
        import chainlang.runtime.session
        logging.getLogger("chainlang.run").warning("note: should not be printed")
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""


def test_a_resume_from_python_logs_its_note_instead_of_printing_it(
        tmp_path: Path, chainlang_log: list[logging.LogRecord]) -> None:
    import chainlang

    (tmp_path / "approve.chain.yaml").write_text(WAIT, encoding="utf-8")
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    started = cli(tmp_path, "run", "approve.chain.yaml", "--tools", "tools.py", "--detach")
    assert started.returncode == 4, started.stderr  # waits for order.approved
    [transcript] = (tmp_path / ".chainlang" / "runs").glob("*.jsonl")
    assert records(transcript)[-1]["type"] != "run_finished" or records(transcript)[-1]["status"] == "waiting"

    # the resume is given no tools: it notes that the run was started with tools.py
    resumed = python(tmp_path, f"""
        import chainlang
        result = chainlang.resume({str(transcript)!r}, detach=True)
        assert result.status == "waiting", result
    """)
    assert resumed.returncode == 0, resumed.stderr
    assert (resumed.stdout, resumed.stderr) == ("", "")

    told: list[str] = []
    assert chainlang.resume(transcript, detach=True, notify=told.append).status == "waiting"
    assert [t for t in told if "tools.py" in t] and not chainlang_log
    assert chainlang.resume(transcript, detach=True).status == "waiting"
    [note] = [r for r in chainlang_log if "the run was started with" in r.getMessage()]
    assert note.levelno == logging.WARNING and "tools.py" in note.getMessage()


def test_the_cli_still_prints_the_notifications(tmp_path: Path) -> None:
    (tmp_path / "hello.chain.yaml").write_text(NOTIFY, encoding="utf-8")
    ran = cli(tmp_path, "run", "hello.chain.yaml", "--progress", "plain")
    assert ran.returncode == 0, ran.stderr
    assert "hello there" in ran.stderr


@pytest.mark.parametrize(("call", "said"), [
    ('chainlang.run("hello.chain.yaml")', "chainlang.run() was called inside a running event loop"),
    ('chainlang.emit("order.approved", {})', "chainlang.emit() was called inside a running event loop"),
])
def test_a_sync_wrapper_inside_a_running_loop_says_to_await_the_async_form(
        tmp_path: Path, call: str, said: str) -> None:
    (tmp_path / "hello.chain.yaml").write_text(NOTIFY, encoding="utf-8")
    name = call.split("(")[0]
    ran = python(tmp_path, f"""
        import asyncio
        import chainlang

        async def handler():
            # -X dev reports a callback slower than 0.1 s on stderr: a loaded machine is not what
            # this test is about (it asserts that stderr holds no warning of the coroutine's own)
            asyncio.get_running_loop().slow_callback_duration = 1e9
            try:
                {call}
            except chainlang.errors.UsageError as exc:
                print(exc)
            else:
                raise SystemExit("no error")

        asyncio.run(handler())
    """, "-W", "error::RuntimeWarning", "-X", "dev")
    assert ran.returncode == 0, ran.stderr
    assert said in ran.stdout and f"use `await {name}_async(...)`" in ran.stdout
    # the coroutine was closed: no "never awaited", no "Task was destroyed", no traceback
    assert ran.stderr == ""
    assert not (tmp_path / ".chainlang" / "runs").exists() or not list((tmp_path / ".chainlang" / "runs").iterdir())


def test_the_sync_wrapper_of_a_method_names_the_method_to_await() -> None:
    import asyncio

    from chainlang.errors import UsageError
    from chainlang.runtime.calls import run_loop

    class Chain:
        async def run(self) -> int:
            return 1

    async def inside() -> str:
        with pytest.raises(UsageError) as raised:
            run_loop(Chain().run())
        return str(raised.value)

    said = asyncio.run(inside())
    assert "Chain.run_sync() was called inside a running event loop" in said and "`await chain.run(...)`" in said
    assert run_loop(Chain().run()) == 1  # outside a loop it runs


# -- the pytest fixture in an async test ---------------------------------------------------

GUIDE = REPO / "docs" / "guides" / "testing.md"


def test_the_guides_async_example_runs_under_anyio(pytester: pytest.Pytester) -> None:
    """The async example of docs/guides/testing.md (an anyio test awaiting the project's
    `*_async` methods) passes as written, on the examples project."""
    import shutil

    shutil.copytree(REPO / "examples", pytester.path / "examples",
                    ignore=shutil.ignore_patterns(".chainlang", "__pycache__", "tests", "assistant"))
    [example] = re.findall(r'^```python title="test_async_quote.py"\n(.*?)^```$', GUIDE.read_text(encoding="utf-8"),
                           re.S | re.M)
    (pytester.path / "test_async_quote.py").write_text(example, encoding="utf-8")
    pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_an_async_test_can_run_resume_and_emit_on_its_own_loop(pytester: pytest.Pytester) -> None:
    (pytester.path / "approve.chain.yaml").write_text(WAIT, encoding="utf-8")
    (pytester.path / "hello.chain.yaml").write_text(NOTIFY, encoding="utf-8")
    pytester.makefile(".toml", chainlang='chains = ["."]\n')
    pytester.makepyfile(test_async_project='''
        import asyncio

        import pytest


        @pytest.fixture
        def anyio_backend():
            return "asyncio"


        @pytest.mark.anyio
        async def test_steps(chain_project):
            loop = asyncio.get_running_loop()
            project = chain_project(".")
            hello = await project.run_async("hello.chain.yaml")
            assert hello.status == "ok" and any("hello there" in n for n in hello.notes)
            waiting = await project.run_async("approve.chain.yaml")
            assert waiting.status == "waiting"
            fired = await project.emit_async("order.approved", {"ok": True})
            assert fired.status == "ok", fired.error
            done = await project.resume_async(waiting.transcript)
            assert done.status == "ok", done.error
            assert asyncio.get_running_loop() is loop


        @pytest.mark.anyio
        async def test_the_sync_form_in_an_async_test_says_what_to_await(chain_project):
            from chainlang.errors import UsageError

            project = chain_project(".")
            with pytest.raises(UsageError, match=r"ChainProject.run\\(\\) was called inside a running event loop; "
                                                 r".*await ChainProject.run_async"):
                project.run("hello.chain.yaml")
    ''')
    outcome = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-W", "error::RuntimeWarning")
    outcome.assert_outcomes(passed=2)
