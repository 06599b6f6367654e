"""Cold start (issue 27): what `chainlang --help` and `chainlang check` import, and that what
was made cheaper still gives the same answers. Behaviour, not timing: the figures are
benchmarks/check_bench.py's.

Every command's help is compared with tests/cli_help.golden, so that moving imports or
commands around cannot change a help text unnoticed. Regenerate it with UPDATE_GOLDENS=1
(then read the diff!)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from chainlang.cli.main import main

GOLDEN = Path(__file__).parent / "cli_help.golden"

_CHAIN = "steps:\n  - tools.now\n  - demo.echo: {text: \"{tools.now.weekday}\"}\n"
_TOOLS = ("from chainlang import event\n\n\n"
          "@event('demo.echo', idempotent=True)\n"
          "def echo(text: str, ctx=None) -> str:\n"
          "    \"\"\"Echo the text.\"\"\"\n"
          "    return text\n")

# runs the CLI's entry point in a new process, then lists what it imported
_PROBE = """
import sys
from chainlang.cli.main import main
sys.argv = ["chainlang", *sys.argv[1:]]
try:
    code = main() or 0
except SystemExit as exc:
    code = exc.code or 0
sys.stdout.flush()
print()
print("MODULES", " ".join(sorted(sys.modules)))
print("CODE", code)
"""


def _imports(cwd: Path, *args: str) -> tuple[set[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINLANG_")}
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True,
                          env=env, check=False)
    lines = proc.stdout.splitlines()
    modules = next(line for line in lines if line.startswith("MODULES ")).split()[1:]
    code = next(line for line in lines if line.startswith("CODE ")).split()[1]
    assert code == "0", proc.stdout + proc.stderr
    return set(modules), proc.stdout


def test_help_imports_only_the_cli_of_chainlang_and_neither_subprocess_nor_pathlib(tmp_path: Path) -> None:
    modules, out = _imports(tmp_path, "--help")
    assert out.startswith("Usage: ")
    assert sorted(m for m in modules if m.split(".")[0] == "chainlang") == [
        "chainlang", "chainlang.cli", "chainlang.cli.commands_check", "chainlang.cli.commands_runs",
        "chainlang.cli.commands_servers", "chainlang.cli.commands_store", "chainlang.cli.guard", "chainlang.cli.main",
        "chainlang.cli.options", "chainlang.dataclass_methods", "chainlang.version"]
    # chainlang.version asks git for the commit only for --version; the dataclass methods' table
    # waits for the first dataclass, which --help does not make; the help's width is found
    # without shutil (and its compression modules)
    assert not modules & {"subprocess", "pathlib", "hashlib", "dataclasses", "chainlang.dataclass_methods._table",
                          "shutil", "lzma"}


def test_check_with_a_tools_file_does_not_load_hashlib_and_names_the_module_as_before(tmp_path: Path) -> None:
    (tmp_path / "demo.chain.yaml").write_text(_CHAIN, encoding="utf-8")
    (tmp_path / "my_tools.py").write_text(_TOOLS, encoding="utf-8")
    modules, out = _imports(tmp_path, "check", "demo.chain.yaml", "--tools", "my_tools.py")
    assert "no problems found in 1 file" in out
    # hashlib would load OpenSSL: the grammar's digest and the tools module's name use the
    # interpreter's built-in SHA modules instead
    assert not modules & {"hashlib", "_hashlib", "subprocess"}
    # the name of a tools file's module is what it was with hashlib (the language server and
    # pickling find it by that name)
    digest = hashlib.sha1(str((tmp_path / "my_tools.py").resolve()).encode("utf-8")).hexdigest()[:12]
    assert f"_chainlang_tools_{digest}_my_tools" in modules


def test_grammar_digest_is_sha256() -> None:
    from chainlang.expr import _lalr

    text = _lalr.grammar_text()
    assert _lalr.grammar_sha256(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert _lalr.grammar_sha256("é{x}") == hashlib.sha256("é{x}".encode("utf-8")).hexdigest()


def _shapes() -> list[Any]:
    def keyword(a: str, ctx: Any = None) -> None: ...
    def keyword_only(a: str, *, ctx: Any) -> None: ...
    def positional_only(ctx: Any, /, a: str = "") -> None: ...
    def without(a: str) -> None: ...
    def var_keyword(a: str, **ctx: Any) -> None: ...
    async def coroutine(ctx: Any = None) -> None: ...
    return [keyword, keyword_only, positional_only, without, var_keyword, coroutine]


@pytest.mark.parametrize("fn", _shapes(), ids=lambda fn: fn.__name__)
def test_event_reads_ctx_from_the_signature_it_already_read(fn: Any) -> None:
    """`@event` judges `ctx` from the signature it read with evaluated annotations; the
    answer is `accepts_ctx`'s, which reads the signature again."""
    from chainlang.registry.decorator import build_spec
    from chainlang.registry.spec import accepts_ctx

    spec = build_spec(fn, "demo.shape")
    assert spec.accepts_ctx is accepts_ctx(fn)
    assert spec.accepts_ctx is (fn.__name__ in ("keyword", "keyword_only", "coroutine"))


def _help_pages() -> str:
    """`chainlang --help` and every command's and subcommand's, 80 columns wide."""
    pages: list[str] = []

    def visit(command: click.Command, path: list[str]) -> None:
        result = CliRunner().invoke(main, [*path, "--help"], prog_name="chainlang", terminal_width=80,
                                    env={"COLUMNS": "80", "NO_COLOR": "1"})
        assert result.exit_code == 0, (path, result.output)
        pages.append(f"=== {' '.join(['chainlang', *path, '--help'])}\n{result.output}")
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                visit(command.commands[name], [*path, name])

    visit(main, [])
    return "".join(pages)


def test_every_help_text_is_the_golden_one() -> None:
    text = _help_pages()
    if os.environ.get("UPDATE_GOLDENS"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.exists(), f"missing golden {GOLDEN.name}; run with UPDATE_GOLDENS=1"
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_a_run_outside_a_project_imports_neither_pydantic_nor_dateutil_nor_jsonschema(tmp_path: Path) -> None:
    # pydantic is for a chainlang.toml (none here), dateutil for date arithmetic (tools.now needs
    # none), jsonschema for params the checker could not prove: each costs a cold run tens of ms
    (tmp_path / "now.chain.yaml").write_text("steps:\n  - tools.now\noutputs:\n  day: \"{tools.now.weekday}\"\n",
                                             encoding="utf-8")
    modules, out = _imports(tmp_path, "run", "now.chain.yaml", "--json", "--transcript", str(tmp_path / "t.jsonl"))
    assert '"day"' in out
    assert not {m.split(".")[0] for m in modules} & {"pydantic", "dateutil", "jsonschema"}


def test_a_run_in_a_project_with_a_full_chainlang_toml_imports_no_pydantic(tmp_path: Path) -> None:
    # chainlang.toml is read by config/fields.py: importing pydantic for it was ~40 % of a cold
    # command in a project; and a run that finds no file at `[store] url` opens no store, so it
    # imports neither SQLAlchemy nor jsonschema (the store's)
    (tmp_path / "chainlang.toml").write_text(
        'tools = []\nchains = ["chains"]\n[store]\nurl = "sqlite:///state/s.db"\n'
        '[serve]\ngrace = "10s"\nhosts = ["chains.example.com"]\n[serve.events."deploy.done"]\ntoken_env = "T"\n'
        '[runs]\nkeep = "30d"\n[secrets]\ncrm = {env = "CRM_TOKEN"}\n'
        '[decide]\nfallback = "skip"\ntimeout = "30s"\n[engine]\nkind = "embedded"\n',
        encoding="utf-8")
    (tmp_path / "chains").mkdir()
    (tmp_path / "now.chain.yaml").write_text("steps:\n  - tools.now\noutputs:\n  day: \"{tools.now.weekday}\"\n",
                                             encoding="utf-8")
    modules, out = _imports(tmp_path, "run", "now.chain.yaml", "--json", "--transcript", str(tmp_path / "t.jsonl"))
    assert '"day"' in out
    assert not {m.split(".")[0] for m in modules} & {"pydantic", "dateutil", "sqlalchemy", "jsonschema"}
    assert not (tmp_path / "state").exists()


def test_date_arithmetic_still_finds_dateutil_when_it_runs(tmp_path: Path) -> None:
    (tmp_path / "calc.chain.yaml").write_text(
        "steps:\n  - tools.date_calc: {from: \"2026-11-27\", add: 1 week, find: next Monday}\n"
        "outputs:\n  day: \"{tools.date_calc.result}\"\n", encoding="utf-8")
    modules, out = _imports(tmp_path, "run", "calc.chain.yaml", "--json", "--transcript", str(tmp_path / "t.jsonl"))
    assert '"day": "2026-12-07"' in out and "dateutil" in modules


_SHOP = "events:\n  shop.order:\n    description: An order came in.\n    payload: {type: object}\n"
_REGISTER = ("steps:\n  - task.register:\n      id: greet\n      trigger: post:shop.order\n"
             "      action:\n        - user.notify: {message: greeted}\n")


def test_a_store_without_an_active_hook_is_not_opened_and_an_active_hook_still_fires(tmp_path: Path) -> None:
    # every run and emit reads the store's active hooks (LANGUAGE.md §12); the store's module
    # imports SQLAlchemy and jsonschema (~0.5 s cold), so store/peek.py asks the file first
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "shop.hooks.yaml").write_text(_SHOP, encoding="utf-8")
    (tmp_path / "register.chain.yaml").write_text(_REGISTER, encoding="utf-8")
    _imports(tmp_path, "run", "register.chain.yaml")
    modules, out = _imports(tmp_path, "emit", "shop.order", "--data", "{}")
    assert "1 hook fired" in out and "sqlalchemy" in modules  # an active hook: the store is opened, as before
    _imports(tmp_path, "tasks", "cancel", "greet")
    modules, out = _imports(tmp_path, "emit", "shop.order", "--data", "{}")
    assert "no hook fired" in out
    assert not {m.split(".")[0] for m in modules} & {"sqlalchemy", "jsonschema"}
    assert sorted(p.name for p in (tmp_path / ".chainlang").glob("store.db*")) == ["store.db"]  # no log left behind


@pytest.mark.parametrize("columns", [None, "60", "200", "30", "0", "abc"])
def test_the_help_s_width_is_the_one_click_finds_with_shutil(monkeypatch: pytest.MonkeyPatch,
                                                             columns: str | None) -> None:
    import shutil

    from chainlang.cli.main import _help_width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert _help_width() == max(min(shutil.get_terminal_size().columns, 80) - 2, 50)
