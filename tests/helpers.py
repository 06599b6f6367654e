"""What the end-to-end tests share: the `chainlang` command in a subprocess (`cli`) or
through the CLI's entry point in the test's own process (`cli_here`), and the transcripts it
writes, read back.

Import these from here (`from tests.helpers import cli, records`); tests/conftest.py
holds the fixtures every test file may ask for by name (`spawned`, `sarif_validator`).
Topic helpers stay with their topic: hooks and their tools in tests/hooks_util.py, serve
in tests/serve_util.py, cut transcripts in tests/journal_util.py.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest
from jsonschema import Draft4Validator, FormatChecker

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120  # seconds for one command: a command that has not ended by then fails its test
SARIF_SCHEMA_FILE = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"

# what would change a command's colours or error reports, or send its requests off the machine
# (the tests' model servers are on loopback: a proxy from the environment must not take their calls)
_NOT_INHERITED = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "CHAINLANG_DEBUG", "TERM",
                  "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


# -- the command --------------------------------------------------------------------------


def clean_env(**extra: str | None) -> dict[str, str]:
    """The environment a test runs chainlang in: this one without colour, debug and proxy
    settings, with NO_COLOR=1, UTF-8 output and this checkout first on the import path;
    then `extra` (a value of None removes the variable: `clean_env(NO_COLOR=None)`)."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env["NO_COLOR"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def command(*args: str | os.PathLike[str]) -> list[str]:
    """The argv of `chainlang ARGS`, with this interpreter."""
    return [sys.executable, "-m", "chainlang", *map(str, args)]


def show(proc: Any, out: str | None = None, err: str | None = None) -> str:
    """What a failed assertion prints about a command (a finished one, or a Popen whose
    output the caller has read: `out` and `err`)."""
    out = proc.stdout if out is None else out
    err = proc.stderr if err is None else err
    return f"exit code {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


def output_text(data: str | bytes | None) -> str:
    """A command's output as text (what TimeoutExpired holds may be bytes, or None)."""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data or ""


def cli(cwd: Path, *args: str | os.PathLike[str], env: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT, merged: bool = False,
        traceback_ok: bool = False) -> "subprocess.CompletedProcess[str]":
    """Run `chainlang ARGS` in `cwd` and wait for it, stdin closed.

    `env`: the whole environment (default: `clean_env()`). `merged`: stderr goes into
    stdout, in the order written (`.stderr` is None). The test fails when the command has
    not ended within `timeout` s, or printed a Python traceback (never a traceback, §10)
    unless `traceback_ok`."""
    try:
        proc = subprocess.run(command(*args), cwd=cwd, env=dict(env) if env is not None else clean_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                              text=True, encoding="utf-8", timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"chainlang {' '.join(map(str, args))} did not end within {timeout} s\n"
                    f"--- stdout\n{output_text(exc.stdout)}\n--- stderr\n{output_text(exc.stderr)}")
    if not traceback_ok:
        assert "Traceback" not in proc.stdout + (proc.stderr or ""), show(proc)
    return proc


def cli_here(cwd: Path, *args: str | os.PathLike[str], merged: bool = False,
             env: Mapping[str, str | None] | None = None) -> "subprocess.CompletedProcess[str]":
    """`chainlang ARGS` as `cli` runs it, but in this process (click's CliRunner, in `cwd`,
    the environment `clean_env()` makes): for tests of what a command does rather than of
    the process, where a cold start (~0.5 s with the store's imports) a command is most of
    the test's time. The test fails when the command raised (a traceback, §10). Not for
    runs on Temporal (the command ends its process after talking to Temporal: cli/main.py)
    nor for runs a tool kills. `merged`: as for `cli`, stdout is both, in the order written.
    `env`: variables set (None: removed) for the command, beside `clean_env()`'s."""
    from click.testing import CliRunner

    from chainlang.cli import run as cli_run
    from chainlang.cli.main import main

    changed: dict[str, str | None] = {name: None for name in _NOT_INHERITED}
    changed.update(NO_COLOR="1", PYTHONIOENCODING="utf-8")
    changed.update(env or {})
    before, stay = os.getcwd(), cli_run.IN_PROCESS
    os.chdir(cwd)
    cli_run.IN_PROCESS = True  # a tool's thread left running must not make the command end this process
    # a command that hangs ends this process (a crashed worker, every thread's stack printed) after
    # TIMEOUT, as `cli` fails it: never a suite that hangs
    faulthandler.dump_traceback_later(TIMEOUT, exit=True)
    try:
        outcome = CliRunner(env=changed).invoke(main, [str(a) for a in args], catch_exceptions=True)
    finally:
        faulthandler.cancel_dump_traceback_later()
        cli_run.IN_PROCESS = stay
        os.chdir(before)
    if outcome.exception is not None and not isinstance(outcome.exception, SystemExit):
        import traceback

        pytest.fail(f"chainlang {' '.join(map(str, args))} raised:\n"
                    + "".join(traceback.format_exception(outcome.exception)))
    proc = subprocess.CompletedProcess(["chainlang", *map(str, args)], outcome.exit_code,
                                       outcome.output if merged else outcome.stdout, None if merged else outcome.stderr)
    assert "Traceback" not in outcome.output, show(proc)
    return proc


def cli_many(*calls: tuple[Path, Sequence[str | os.PathLike[str]]],
             **options: Any) -> list["subprocess.CompletedProcess[str]"]:
    """Independent commands at the same time: (cwd, args) each, `options` as for `cli`;
    the results in order."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: cli(call[0], *call[1], **options), calls))


class Spawned(list["subprocess.Popen[str]"]):
    """Commands a test starts in the background (`start`, or `append` a Popen of its own);
    `close` kills any still running (the `spawned` fixture does, whatever the test did)."""

    def start(self, cwd: Path, *args: str | os.PathLike[str]) -> "subprocess.Popen[str]":
        proc = subprocess.Popen(command(*args), cwd=cwd, env=clean_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                start_new_session=True)
        self.append(proc)
        return proc

    def close(self) -> None:
        for proc in self:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.communicate(timeout=10)
            except (subprocess.TimeoutExpired, ValueError):
                pass


# -- transcripts --------------------------------------------------------------------------


def records(path: Path, transcript: str | None = None) -> list[dict[str, Any]]:
    """Every record of the finished transcript at `path` (or `path / transcript`): the file
    exists, its last line is ended, and `seq` runs 1, 2, 3, ..."""
    return _read(path / transcript if transcript is not None else path, so_far=False)


def records_so_far(path: Path) -> list[dict[str, Any]]:
    """The records of a transcript that may be being written: none while there is no file,
    a torn last line left out; `seq` checked as by `records`."""
    return _read(path, so_far=True)


def _read(path: Path, so_far: bool) -> list[dict[str, Any]]:
    if so_far and not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")  # only \n ends a record: JSON may hold U+2028
    if lines.pop():  # what follows the last \n: a line not ended
        assert so_far, f"{path}: the last line is not terminated"  # else: being written, left out
    out = [json.loads(line) for line in lines]
    assert [r["seq"] for r in out] == list(range(1, len(out) + 1)), path
    return out


# -- SARIF --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def sarif_validator() -> Draft4Validator:
    """A validator of the SARIF 2.1.0 schema (tests/data), formats checked; the schema is
    checked first."""
    schema = json.loads(SARIF_SCHEMA_FILE.read_text(encoding="utf-8"))
    Draft4Validator.check_schema(schema)
    return Draft4Validator(schema, format_checker=FormatChecker())
