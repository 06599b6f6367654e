"""End-to-end tests of the `chainlang` command (LANGUAGE.md §10-§11).

Most tests run the real CLI in a subprocess (`python -m chainlang.cli ...`),
the way users and CI run it: exit codes, stdout/stderr, environment
variables. The per-golden exit-code tests use click's CliRunner in-process,
because they run once per golden case.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft4Validator

import chainlang
from chainlang.cli import main
from tests import helpers

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CHAINS = REPO / "tests" / "chains"
GOLDEN_TOOLS = CHAINS / "golden_tools.py"

ESC = "\x1b["

# 2 errors and 1 warning, in this order, at known positions.
MIXED = textwrap.dedent(
    """\
    steps:
      - tools.nwo
      - user.notfy: {message: hi}
      - user.notify
    """
)
MIXED_EXPECTED = [  # (line, column, severity, rule)
    (2, 5, "error", "CL014"),
    (3, 5, "error", "CL014"),
    (4, 5, "warning", "CL016"),
]
CLEAN = "steps:\n  - tools.now\n  - user.notify: {message: 'It is {tools.now.time}'}\n"
ONLY_WARNING = "steps:\n  - user.notify\n"
ONE_ERROR = "steps:\n  - nope.event\n"

TOOLS_MODULE = textwrap.dedent(
    """\
    from chainlang import event


    @event("acme.ping", description="Ping the acme server")
    def ping(host: str, count: int = 1) -> dict:
        return {"ok": True}
    """
)
PING_CHAIN = "steps:\n  - acme.ping: {host: example.org}\n"


# -- helpers ------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that changes colour or error reporting: colour is
    each test's to set (no NO_COLOR), and the import path is the user's (PYTHONPATH as is)."""
    return helpers.clean_env(**{"NO_COLOR": None, "PYTHONPATH": os.environ.get("PYTHONPATH"), **extra})


def cli(*args: str | os.PathLike[str], cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`chainlang ARGS`, the arguments first: most of these run in the checkout."""
    return helpers.cli(cwd, *args, env=env if env is not None else clean_env())


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def check_json(*args: str | os.PathLike[str], cwd: Path = REPO) -> tuple[int, list[dict[str, Any]]]:
    proc = cli("check", "--format", "json", *args, cwd=cwd)
    assert_no_traceback(proc)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def golden_cases(kind: str) -> list[Path]:
    folder = CHAINS / kind
    return sorted(p for p in folder.iterdir() if p.suffix not in (".out", ".py") and not p.name.startswith((".", "_")))


# -- exit codes of check ------------------------------------------------------------


def test_check_examples_exits_0() -> None:
    proc = cli("check", "examples/")
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines()[-1].startswith("no problems found in ")


@pytest.mark.parametrize("case", golden_cases("ok"), ids=lambda p: p.name)
def test_check_ok_golden_exits_0(case: Path) -> None:
    # in this process (the command's own entry point): a process per case would be most of
    # the time; the tests above and below start real processes
    proc = helpers.cli_here(case.parent, "check", "--tools", GOLDEN_TOOLS, case.name, env={"NO_COLOR": None})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("no problems found in "), proc.stdout


def test_check_all_ok_goldens_at_once() -> None:
    proc = cli("check", "--tools", GOLDEN_TOOLS, "tests/chains/ok")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("no problems found in ")


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("case", golden_cases("err"), ids=lambda p: p.name)
def test_check_err_golden_exit_code_and_diagnostics(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On every error golden, `check --format json` prints what the API finds (test_golden
    owns the expected diagnostics), and exits 1 exactly when one of them is an error."""
    from chainlang.pipeline import check_files

    monkeypatch.chdir(case.parent)
    result = CliRunner().invoke(main, ["check", "--tools", str(GOLDEN_TOOLS), "--format", "json", case.name])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    items = json.loads(result.stdout)
    expected = [d.to_json() for d in check_files([case.name], tools=[str(GOLDEN_TOOLS)]).diagnostics]
    assert items == expected
    has_error = any(d["severity"] == "error" for d in items)
    assert result.exit_code == (1 if has_error else 0), result.output


def test_check_error_file_exits_1() -> None:
    proc = cli("check", "tests/chains/err/unknown-event.chain.yaml")
    assert_no_traceback(proc)
    assert proc.returncode == 1
    assert "unknown event 'tools.nwo'" in proc.stdout
    assert proc.stderr == ""


def test_check_warnings_only_exits_0() -> None:
    """A missing required param is a warning (CL016): it does not fail the check."""
    proc = cli("check", "--tools", GOLDEN_TOOLS, "tests/chains/err/missing-param.chain.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[CL016 missing-param]" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "0 errors, 2 warnings in 1 file"


def test_check_one_error_among_clean_files_exits_1(tmp_path: Path) -> None:
    write(tmp_path / "a.chain.yaml", CLEAN)
    write(tmp_path / "b.chain.yaml", ONLY_WARNING)
    write(tmp_path / "c.chain.yaml", ONE_ERROR)
    assert cli("check", "a.chain.yaml", "b.chain.yaml", cwd=tmp_path).returncode == 0
    assert cli("check", ".", cwd=tmp_path).returncode == 1


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("text", ["steps: [\n", "\xff\xfe\x00\x00garbage", "- a: [b\n  - {", "", "!!python/object:os.system {}\n"],
                         ids=["unclosed-flow", "binary", "broken-nesting", "empty", "python-tag"])
def test_malformed_input_exits_1_without_traceback(tmp_path: Path, text: str) -> None:
    (tmp_path / "bad.chain.yaml").write_bytes(text.encode("latin-1"))
    proc = cli("check", "bad.chain.yaml", cwd=tmp_path)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.chain.yaml:" in proc.stdout


def test_huge_hex_integer_param_is_a_diagnostic_not_an_internal_error(tmp_path: Path) -> None:
    """A 4,000-digit hex literal is a diagnostic (the loader rejects it), not an internal error.

    Fails today: exit 2, `internal error: ValueError: Exceeds the limit (4300 digits)
    for integer string conversion` (jsonschema formats the error message with
    repr(instance); hex literals are not limited at parse time, decimal repr is).
    """
    write(tmp_path / "big.chain.yaml", "steps:\n  - user.notify: {message: 0x" + "f" * 4000 + "}\n")
    proc = cli("check", "--format", "json", "big.chain.yaml", cwd=tmp_path)
    assert_no_traceback(proc)
    assert "internal error" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    # rejected where it is read: not a number JSON can carry
    assert [d["rule"] for d in json.loads(proc.stdout)] == ["CL011"]


# -- usage errors -------------------------------------------------------------------


@pytest.fixture
def raising_tools(tmp_path: Path) -> Path:
    return write(tmp_path / "raising_tools.py", "raise RuntimeError('boom while importing')\n")


USAGE_ERRORS = {
    "no-such-path": ["check", "no/such/dir/x.chain.yaml"],
    "bad-format": ["check", "--format", "xml", "examples"],
    "missing-tools-module": ["check", "--tools", "no_such_chainlang_tools_module", "examples"],
    "missing-tools-file": ["check", "--tools", "no_such_tools_file.py", "examples"],
    "raising-tools-file": ["check", "--tools", "{raising}", "examples"],
    "no-paths": ["check"],
    "events-missing-tools": ["events", "--tools", "no_such_chainlang_tools_module"],
    "events-raising-tools": ["events", "--tools", "{raising}"],
    "describe-raising-tools": ["describe", "tools.now", "--tools", "{raising}"],
    "describe-unknown-event": ["describe", "tools.nwo"],
    "unknown-command": ["chek", "examples"],
}


def usage_args(name: str, raising: Path) -> list[str]:
    return [a.replace("{raising}", str(raising)) for a in USAGE_ERRORS[name]]


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("name", list(USAGE_ERRORS))
def test_usage_errors_exit_2_without_traceback(name: str, raising_tools: Path) -> None:
    proc = cli(*usage_args(name, raising_tools))
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.strip()


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("name", list(USAGE_ERRORS))
def test_usage_errors_print_one_chainlang_error_line(name: str, raising_tools: Path) -> None:
    """Every usage error is one line `chainlang: error: ...` on stderr (the brief's contract).

    Fails today for the errors that click reports itself (bad --format, no PATHS,
    unknown command): click prints `Usage: ...`, `Try ... --help` and `Error: ...`.
    """
    proc = cli(*usage_args(name, raising_tools))
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("chainlang: error: "), proc.stderr


def test_usage_error_messages_are_specific(raising_tools: Path) -> None:
    proc = cli("check", "no/such/dir/x.chain.yaml")
    assert "no/such/dir/x.chain.yaml: no such file or directory" in proc.stderr
    proc = cli("check", "--tools", "no_such_chainlang_tools_module", "examples")
    assert "no_such_chainlang_tools_module" in proc.stderr and "not found" in proc.stderr
    proc = cli("check", "--tools", raising_tools, "examples")
    assert "RuntimeError: boom while importing" in proc.stderr
    proc = cli("check", "--format", "xml", "examples")
    assert "xml" in proc.stderr and "text" in proc.stderr and "sarif" in proc.stderr


# -- output formats -----------------------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    write(tmp_path / "mixed.chain.yaml", MIXED)
    return tmp_path


def test_text_format(mixed: Path) -> None:
    proc = cli("check", "mixed.chain.yaml", cwd=mixed)
    assert proc.returncode == 1
    assert ESC not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0] == "mixed.chain.yaml:2:5: error: unknown event 'tools.nwo' [CL014 unknown-event]"
    assert lines[1] == "  2 |   - tools.nwo"
    assert lines[2] == "    |     ^~~~~~~~~"
    assert lines[3] == "  hint: did you mean 'tools.now'?"
    assert "mixed.chain.yaml:3:5: error: unknown event 'user.notfy' [CL014 unknown-event]" in lines
    assert "  3 |   - user.notfy: {message: hi}" in lines
    assert any(line.startswith("mixed.chain.yaml:4:5: warning: ") and line.endswith("[CL016 missing-param]") for line in lines)
    assert lines[-1] == "2 errors, 1 warning in 1 file"
    assert proc.stdout.endswith("\n")


def test_text_format_clean(tmp_path: Path) -> None:
    write(tmp_path / "clean.chain.yaml", CLEAN)
    proc = cli("check", "--format", "text", "clean.chain.yaml", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == "no problems found in 1 file\n"
    assert proc.stderr == ""


def test_json_format(mixed: Path) -> None:
    proc = cli("check", "--format", "json", "mixed.chain.yaml", cwd=mixed)
    assert proc.returncode == 1
    items = json.loads(proc.stdout)
    assert isinstance(items, list)
    assert [(d["line"], d["column"], d["severity"], d["rule"]) for d in items] == MIXED_EXPECTED
    for d in items:
        assert {"file", "line", "column", "severity", "rule", "message"} <= set(d)
        assert d["file"] == "mixed.chain.yaml"
        assert d["line"] >= 1 and d["column"] >= 1
        assert d["severity"] in ("error", "warning")
        assert re.fullmatch(r"CL\d{3}", d["rule"])
        assert d["message"]
    assert items[0]["message"] == "unknown event 'tools.nwo'"


def test_json_format_clean() -> None:
    proc = cli("check", "--format", "json", "examples/")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == []


def test_github_format(mixed: Path) -> None:
    proc = cli("check", "--format", "github", "mixed.chain.yaml", cwd=mixed)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("::error file=mixed.chain.yaml,line=2,col=5,")
    assert lines[0].endswith("::unknown event 'tools.nwo'%0Ahint: did you mean 'tools.now'?")
    assert lines[1].startswith("::error file=mixed.chain.yaml,line=3,col=5,")
    assert lines[2].startswith("::warning file=mixed.chain.yaml,line=4,col=5,")
    assert "title=CL016 missing-param::" in lines[2]


def test_github_format_clean() -> None:
    proc = cli("check", "--format", "github", "examples/")
    assert proc.returncode == 0
    assert proc.stdout == ""


def assert_valid_sarif(text: str, validator: Draft4Validator) -> dict[str, Any]:
    log = json.loads(text)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    return log  # type: ignore[no-any-return]


def test_sarif_format(mixed: Path, sarif_validator: Draft4Validator) -> None:
    proc = cli("check", "--format", "sarif", "mixed.chain.yaml", cwd=mixed)
    assert proc.returncode == 1
    log = assert_valid_sarif(proc.stdout, sarif_validator)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "chainlang"
    assert run["tool"]["driver"]["version"] == chainlang.__version__
    got = [
        (r["locations"][0]["physicalLocation"]["region"]["startLine"],
         r["locations"][0]["physicalLocation"]["region"]["startColumn"],
         r["level"], r["ruleId"])
        for r in run["results"]
    ]
    assert got == MIXED_EXPECTED
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location["uri"] == "mixed.chain.yaml"


def test_sarif_format_clean_and_absolute_paths(sarif_validator: Draft4Validator, tmp_path: Path) -> None:
    proc = cli("check", "--format", "sarif", "examples/")
    assert proc.returncode == 0
    assert assert_valid_sarif(proc.stdout, sarif_validator)["runs"][0]["results"] == []
    bad = write(tmp_path / "dir with space" / "bad.chain.yaml", ONE_ERROR)
    proc = cli("check", "--format", "sarif", bad.resolve())
    assert proc.returncode == 1
    log = assert_valid_sarif(proc.stdout, sarif_validator)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and uri.endswith("/dir%20with%20space/bad.chain.yaml")


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_output_is_deterministic_and_in_path_order(fmt: str, tmp_path: Path) -> None:
    write(tmp_path / "b.chain.yaml", MIXED)
    write(tmp_path / "a.chain.yaml", MIXED)
    write(tmp_path / "sub" / "c.chain.yaml", ONE_ERROR)
    args = ["check", "--format", fmt, "sub", "b.chain.yaml", "a.chain.yaml"]
    first = cli(*args, cwd=tmp_path)
    second = cli(*args, cwd=tmp_path)
    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout
    assert cli("check", "--format", fmt, "a.chain.yaml", "sub", "b.chain.yaml", cwd=tmp_path).stdout == first.stdout
    if fmt == "json":
        items = json.loads(first.stdout)
        keys = [(d["file"], d["line"], d["column"]) for d in items]
        assert keys == sorted(keys)
        assert [d["file"] for d in items] == ["a.chain.yaml"] * 3 + ["b.chain.yaml"] * 3 + ["sub/c.chain.yaml"]


# -- colour -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "flags", "coloured"),
    [
        ({}, [], False),  # stdout is a pipe
        ({}, ["--color"], True),  # --color forces colour
        ({}, ["--no-color"], False),
        ({"NO_COLOR": "1"}, [], False),
        ({"NO_COLOR": "1"}, ["--color"], True),  # the explicit flag wins over NO_COLOR (cli.py's --help says so)
        ({"FORCE_COLOR": "1"}, [], True),
        ({"FORCE_COLOR": "1"}, ["--no-color"], False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, [], False),  # NO_COLOR wins over FORCE_COLOR
    ],
    ids=["pipe", "flag", "no-flag", "no_color", "no_color+flag", "force_color", "force_color+no-flag", "no_color+force_color"],
)
@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
def test_colour(mixed: Path, env: dict[str, str], flags: list[str], coloured: bool) -> None:
    """stdout here is a pipe: colour only when forced (--color, or FORCE_COLOR without NO_COLOR).

    Fails today for every case that forces colour: cli.py renders the ANSI codes
    but prints with `click.echo(text)`, which strips them whenever stdout is not
    a terminal, so --color and FORCE_COLOR=1 have no effect in CI logs or pipes.
    """
    proc = cli("check", *flags, "mixed.chain.yaml", cwd=mixed, env=clean_env(**env))
    assert proc.returncode == 1
    assert (ESC in proc.stdout) is coloured, proc.stdout
    assert ESC not in proc.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert plain == cli("check", "mixed.chain.yaml", cwd=mixed).stdout


@pytest.mark.parametrize("fmt", ["json", "github", "sarif"])
def test_machine_formats_are_never_coloured(mixed: Path, fmt: str) -> None:
    proc = cli("check", "--color", "--format", fmt, "mixed.chain.yaml", cwd=mixed, env=clean_env(FORCE_COLOR="1"))
    assert ESC not in proc.stdout
    if fmt != "github":
        json.loads(proc.stdout)


def run_on_tty(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "chainlang.cli", *args], cwd=cwd, env=env,
                                stdout=slave, stderr=subprocess.PIPE)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=60)
    assert proc.stderr is not None
    proc.stderr.close()
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_colour_on_a_terminal(mixed: Path) -> None:
    code, out = run_on_tty(["check", "mixed.chain.yaml"], mixed, clean_env())
    assert code == 1
    assert ESC in out
    code, out = run_on_tty(["check", "mixed.chain.yaml"], mixed, clean_env(NO_COLOR="1"))
    assert code == 1
    assert ESC not in out and "2 errors, 1 warning in 1 file" in out


# -- finding files ------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ["top.chain.yaml", "sub/deep/er/nested.chain.yml", "sub/w.hooks.yaml"]:
        text = "- trigger: post:nope.event\n  action: [tools.now]\n" if name.endswith(".hooks.yaml") else ONE_ERROR
        write(tmp_path / "root" / name, text)
    for name in ["sub/config.yaml", "sub/notes.chain.txt", "sub/chain.yaml", ".hidden/h.chain.yaml",
                 "sub/.git/x.chain.yaml", "node_modules/n.chain.yaml", "sub/__pycache__/p.chain.yaml"]:
        write(tmp_path / "root" / name, ONE_ERROR)
    write(tmp_path / "other.yaml", ONE_ERROR)
    return tmp_path


def test_directories_are_searched_recursively(tree: Path) -> None:
    code, items = check_json("root", cwd=tree)
    assert code == 1
    assert sorted({d["file"] for d in items}) == [
        "root/sub/deep/er/nested.chain.yml",
        "root/sub/w.hooks.yaml",
        "root/top.chain.yaml",
    ]
    hooks = [d for d in items if d["file"].endswith(".hooks.yaml")]
    assert [d["rule"] for d in hooks] == ["CL041"]  # checked as a hooks file, not as a chain
    assert cli("check", "root", cwd=tree).stdout.splitlines()[-1] == "3 errors, 0 warnings in 3 files"


def test_explicit_files_are_checked_whatever_their_name(tree: Path) -> None:
    code, items = check_json("other.yaml", "root/.hidden/h.chain.yaml", "root/sub/notes.chain.txt", cwd=tree)
    assert code == 1
    assert [d["file"] for d in items] == ["other.yaml", "root/.hidden/h.chain.yaml", "root/sub/notes.chain.txt"]


def test_a_directory_with_no_chain_files(tmp_path: Path) -> None:
    """A usage error: a mistyped path must not pass in CI (tests/test_surfaces.py has more)."""
    (tmp_path / "empty").mkdir()
    proc = cli("check", "empty", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("chainlang: error: empty: no chain or hooks files found")


def test_same_file_given_twice_is_checked_once(tmp_path: Path) -> None:
    """A file reached through a directory and given again explicitly is one file.

    Fails today when the spellings differ (`chains` and `./chains/x.chain.yaml`):
    the file is loaded twice, its chain name collides with itself (a false
    CL018 error) and the summary counts 2 files.
    """
    write(tmp_path / "chains" / "x.chain.yaml", "chain: acme.report\nsteps:\n  - tools.now\n")
    assert cli("check", "chains", "chains/x.chain.yaml", cwd=tmp_path).stdout == "no problems found in 1 file\n"
    proc = cli("check", "chains", "./chains/x.chain.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout == "no problems found in 1 file\n"


# -- chainlang.toml -----------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root / "tools.py", TOOLS_MODULE)
    write(root / "chainlang.toml", 'tools = ["tools.py"]\n')
    write(root / "chains" / "ping.chain.yaml", PING_CHAIN)
    return root


def test_toml_tools_are_seen_by_check(project: Path) -> None:
    proc = cli("check", "chains", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "no problems found in 1 file\n"
    # from a subdirectory: the toml is found by walking up, its paths are relative to it
    proc = cli("check", ".", cwd=project / "chains")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_without_toml_the_tools_are_unknown(project: Path) -> None:
    (project / "chainlang.toml").unlink()
    code, items = check_json("chains", cwd=project)
    assert code == 1
    assert [d["rule"] for d in items] == ["CL014"]
    # --tools adds them back
    proc = cli("check", "--tools", "tools.py", "chains", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_toml_tools_are_seen_by_events_and_describe(project: Path) -> None:
    proc = cli("events", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("acme.ping ") for line in proc.stdout.splitlines())
    proc = cli("describe", "acme.ping", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "host: string, required" in proc.stdout


WEEKLY_CHAIN = textwrap.dedent(
    """\
    chain: reports.weekly
    description: The weekly report
    inputs:
      topic: {type: string}
    steps:
      - tools.now
    outputs:
      count: 3
    """
)


def test_toml_named_chains_are_seen_by_check(project: Path) -> None:
    write(project / "chainlang.toml", 'tools = ["tools.py"]\nchains = ["library"]\n')
    write(project / "library" / "weekly.chain.yaml", WEEKLY_CHAIN)
    write(project / "main.chain.yaml", "steps:\n  - reports.weekly: {topic: launch}\n")
    proc = cli("check", "main.chain.yaml", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "no problems found in 1 file\n"


def test_toml_named_chains_are_listed_by_events_and_describe(project: Path) -> None:
    """LANGUAGE.md §7: a named chain in the project's chain directories is an event, and all
    events "share one registry, listed by `chainlang events` and described by `chainlang describe NAME`".

    Fails today: `check` resolves reports.weekly through chainlang.toml's `chains`,
    but `events` does not list it and `describe reports.weekly` exits 2 (unknown event).
    """
    write(project / "chainlang.toml", 'tools = ["tools.py"]\nchains = ["library"]\n')
    write(project / "library" / "weekly.chain.yaml", WEEKLY_CHAIN)
    proc = cli("events", cwd=project)
    assert any(line.startswith("reports.weekly ") for line in proc.stdout.splitlines()), proc.stdout
    proc = cli("describe", "reports.weekly", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "topic: string" in proc.stdout


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('tool = ["tools.py"]\n', "unknown key 'tool'"),
        ('tools = "tools.py"\n', "tools"),
        ("tools = [\n", "invalid TOML"),
        ('tools = ["missing_tools.py"]\n', "missing_tools.py"),
    ],
    ids=["typo-key", "wrong-type", "bad-toml", "missing-tools-file"],
)
@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
def test_bad_toml_is_a_usage_error(project: Path, toml: str, expected: str) -> None:
    write(project / "chainlang.toml", toml)
    for args in (["check", "chains"], ["events"], ["describe", "tools.now"]):
        proc = cli(*args, cwd=project)
        assert_no_traceback(proc)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("chainlang: error: ")
        assert "chainlang.toml" in proc.stderr
        assert expected in proc.stderr
        assert len(proc.stderr.splitlines()) == 1


def test_toml_typo_suggests_the_key(project: Path) -> None:
    write(project / "chainlang.toml", 'tool = ["tools.py"]\n')
    proc = cli("check", "chains", cwd=project)
    assert "did you mean 'tools'?" in proc.stderr


# -- events and describe ------------------------------------------------------------


def stdlib_event_names() -> list[str]:
    from ruamel.yaml import YAML

    from chainlang.resources import data_dir

    yaml = YAML(typ="safe", pure=True)
    names = []
    for path in sorted(data_dir("stdlib").glob("*.yaml")):
        names.extend(yaml.load(path.read_text(encoding="utf-8"))["events"])
    return names


def test_stdlib_declares_the_contract_events() -> None:
    names = set(stdlib_event_names())
    for name in ("tools.now", "tools.date_calc", "user.notify", "memory.search", "memory.append",
                 "thread.match", "thread.summarize", "task.schedule", "task.register",
                 "agent.think", "agent.chain", "agent.decide"):
        assert name in names


IMPLEMENTED = {"tools.now", "tools.date_calc", "user.notify", "chain.run", "task.register", "task.list", "task.cancel", "task.schedule", "thread.match", "thread.summarize", "thread.list", "memory.append", "memory.search", "memory.digest", "agent.think", "agent.chain", "agent.decide", "agent.reply", "model.ask", "user.ask"}  # every standard event now (user.ask: a wait)
EXTERNAL = {"task.due", "user.answered"}  # standard events fired from outside or by serve, never called by a step


def test_events_lists_every_stdlib_event() -> None:
    """Every stdlib event is listed; those not implemented yet say so."""
    proc = cli("events")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    listed = {line.split()[0]: line for line in lines if line and not line[0].isdigit()}
    names = stdlib_event_names()
    assert set(listed) == set(names)
    for name in names:
        assert listed[name].endswith("(not implemented yet)") is (name not in IMPLEMENTED | EXTERNAL), listed[name]
    assert lines[-1].startswith(f"{len(names)} events")


def test_events_json() -> None:
    proc = cli("events", "--json")
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    assert isinstance(items, list)
    assert [i["name"] for i in items] == sorted(i["name"] for i in items)
    assert {i["name"] for i in items} == set(stdlib_event_names())
    for item in items:
        assert {"name", "description", "params", "result"} <= set(item)
        assert item["description"]
        assert item["params"]["type"] == "object"
        assert item["implemented"] is (item["name"] in IMPLEMENTED), item["name"]
    now = next(i for i in items if i["name"] == "tools.now")
    assert "weekday" in now["result"]["properties"]


def test_events_text_and_json_agree_on_implementation() -> None:
    proc = cli("events", "--tools", GOLDEN_TOOLS)
    items = json.loads(cli("events", "--json", "--tools", GOLDEN_TOOLS).stdout)
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line and not line[0].isdigit()}
    assert set(lines) == {i["name"] for i in items}
    for item in items:
        expected = not item["implemented"] and item.get("kind") != "external"  # fired by chainlang, not called
        assert lines[item["name"]].endswith("(not implemented yet)") is expected, item["name"]


def test_events_with_tools() -> None:
    proc = cli("events", "--tools", GOLDEN_TOOLS)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line and not line[0].isdigit()}
    assert "email.search" in lines and "team.members" in lines
    assert "not implemented" not in lines["email.search"]
    assert "Search the mailbox" in lines["email.search"]
    assert set(stdlib_event_names()) < set(lines)
    items = json.loads(cli("events", "--json", "--tools", GOLDEN_TOOLS).stdout)
    search = next(i for i in items if i["name"] == "email.search")
    assert search["implemented"] is True
    assert search["params"]["properties"]["days"] == {"type": "integer", "default": 7}


def test_describe_text() -> None:
    proc = cli("describe", "tools.now")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("tools.now\n=========\n")
    assert "status:     implemented" in out
    assert "status:     implemented" in cli("describe", "agent.think").stdout
    params = out.split("\nparams:\n", 1)[1].split("\n\n", 1)[0]
    assert params == "  (none)"
    result = out.split("\nresult:\n", 1)[1].split("\n\n", 1)[0]
    assert "  weekday: " in result and "\"Friday\"" in result
    assert "  hour: integer, required" in result
    assert "\nresult schema:\n" in out


def test_describe_json() -> None:
    proc = cli("describe", "tools.now", "--json")
    assert proc.returncode == 0, proc.stderr
    item = json.loads(proc.stdout)
    assert item["name"] == "tools.now"
    assert item["params"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert item["result"]["required"][:3] == ["iso", "date", "time"]
    events = json.loads(cli("events", "--json").stdout)
    assert item == next(e for e in events if e["name"] == "tools.now")


def test_describe_unknown_event_suggests() -> None:
    proc = cli("describe", "tools.nwo")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "chainlang: error: unknown event 'tools.nwo'; did you mean 'tools.now'?\n"
    proc = cli("describe", "zzz.qqq")
    assert proc.returncode == 2
    assert "chainlang events" in proc.stderr


def test_describe_with_tools() -> None:
    assert cli("describe", "email.search").returncode == 2
    proc = cli("describe", "email.search", "--tools", GOLDEN_TOOLS)
    assert proc.returncode == 0, proc.stderr
    assert "status:     implemented" in proc.stdout
    assert "  days: integer, optional (default 7)" in proc.stdout
    item = json.loads(cli("describe", "email.search", "--json", "--tools", GOLDEN_TOOLS).stdout)
    assert item["name"] == "email.search"
    assert item["result"]["required"] == ["matches"]


# -- help and version ---------------------------------------------------------------


@pytest.mark.slow  # a CLI process per case: the full suite runs it, make test-fast does not
@pytest.mark.parametrize("args", [[], ["check"], ["schema"], ["events"], ["describe"]], ids=lambda a: a[0] if a else "main")
def test_help(args: list[str]) -> None:
    for flag in ("--help", "-h"):
        proc = cli(*args, flag)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Usage: ")
        assert proc.stderr == ""
    if not args:
        for command in ("check", "schema", "events", "describe"):
            assert command in proc.stdout
    if args == ["check"]:
        assert "--format" in proc.stdout and "--tools" in proc.stdout and "[text|json|github|sarif]" in proc.stdout


def test_help_in_process() -> None:
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    assert "PATHS" in result.output


def test_version() -> None:
    from importlib.metadata import version

    from chainlang.version import describe

    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout == describe() + "\n"  # `chainlang X.Y.Z (commit SHA DATE)`: tests/test_version.py
    assert proc.stdout.startswith(f"chainlang {chainlang.__version__} (commit ")
    result = CliRunner().invoke(main, ["--version"], prog_name="chainlang")
    assert result.output == describe() + "\n"
    assert version("chainlang") == chainlang.__version__


def test_console_script_matches_module() -> None:
    """The installed `chainlang` entry point is the same CLI."""
    script = Path(sys.executable).with_name("chainlang")
    if not script.exists():
        pytest.skip("no chainlang console script beside the interpreter")
    proc = subprocess.run([str(script), "check", "examples"], cwd=REPO, env=clean_env(), capture_output=True, check=False, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == cli("check", "examples").stdout
    proc = subprocess.run([str(script), "--version"], env=clean_env(), capture_output=True, check=False, text=True, timeout=60)
    assert proc.stdout == cli("--version").stdout


# -- the Python API -----------------------------------------------------------------


def test_check_text_returns_diagnostics() -> None:
    from chainlang import Diagnostic, check_text

    diags = check_text(MIXED)
    assert all(isinstance(d, Diagnostic) for d in diags)
    assert [(d.line, d.column, d.severity, d.rule) for d in diags] == MIXED_EXPECTED
    assert diags[0].hint == "did you mean 'tools.now'?"
    assert check_text(CLEAN) == []
    assert chainlang.check_text("- tools.now\n") == []


def test_check_text_with_tools() -> None:
    assert [d.rule for d in chainlang.check_text(PING_CHAIN)] == ["CL014"]
    assert chainlang.check_text("steps:\n  - email.search: {days: 3}\n", tools=[str(GOLDEN_TOOLS)]) == []


def test_public_names_import() -> None:
    from chainlang import Diagnostic, check_files, check_text, event  # noqa: F401

    for name in chainlang.__all__:
        assert getattr(chainlang, name) is not None


def test_event_decorator_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """`from chainlang import event` in a user's tools module; `check_text` sees the tool."""
    write(tmp_path / "acme_tools.py", textwrap.dedent(
        """\
        from chainlang import event


        @event("acme.greet", description="Greet someone")
        def greet(name: str, loud: bool = False) -> str:
            return name
        """
    ))
    script = textwrap.dedent(
        """\
        import json
        from chainlang import check_text

        good = check_text("steps:\\n  - acme.greet: {name: Ada, loud: true}\\n", tools=["acme_tools.py"])
        bad = check_text("steps:\\n  - acme.greet: {name: Ada, loud: very}\\n", tools=["acme_tools"])
        print(json.dumps([[d.rule for d in good], [(d.rule, d.severity, d.line, d.column) for d in bad]]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True, check=False, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    good, bad = json.loads(proc.stdout)
    assert good == []
    assert bad == [["CL015", "error", 2, 35]]  # the literal 'very' is not a boolean


def test_a_nested_project_is_its_own(tmp_path: Path) -> None:
    """A directory below a project with a chainlang.toml of its own is another project: `check`
    of the parent checks its files with its own tools, and the parent's runs, emits and
    events neither see its named chains nor its hooks files."""
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "top.chain.yaml").write_text("chain: top.main\nsteps:\n  - tools.now\n", encoding="utf-8")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "tt.py").write_text(textwrap.dedent('''\
        from chainlang import event

        @event("inner.hello", idempotent=True)
        def hello() -> dict:
            return {"said": "hello"}
        '''), encoding="utf-8")
    (inner / "chainlang.toml").write_text('tools = ["tt.py"]\nchains = ["."]\n', encoding="utf-8")
    (inner / "hi.chain.yaml").write_text("chain: inner.main\nsteps:\n  - inner.hello\n", encoding="utf-8")
    (inner / "mail.hooks.yaml").write_text(textwrap.dedent("""\
        events:
          mail.in:
            payload: {type: object, properties: {body: {type: string}}, required: [body]}
        hooks:
          - trigger: post:mail.in
            action: [inner.hello]
        """), encoding="utf-8")
    checked = cli("check", tmp_path, cwd=tmp_path)
    assert checked.returncode == 0 and "no problems found in 3 files" in checked.stdout, checked.stdout + checked.stderr
    listed = cli("events", cwd=tmp_path).stdout
    assert "top.main" in listed and "inner.main" not in listed and "mail.in" not in listed
    # the parent has no mail.in: an emit there is refused, not run against the nested project's schema
    emitted = cli("emit", "mail.in", "--data", "{}", cwd=tmp_path)
    assert emitted.returncode != 0 and "inner.hello" not in emitted.stdout + emitted.stderr
