"""The CI integrations, driven as their users drive them.

* SARIF: every rule of `chainlang check --format sarif` links its docs page
  (`helpUri`), under $CHAINLANG_DOCS_URL or the documented default.
* .pre-commit-hooks.yaml: the hook's fields as pre-commit reads them; its
  `files` pattern picks the chain and hooks files (with `re.search`, as
  pre-commit does); its `entry` run on a good and a bad file, with the file
  names appended as pre-commit appends them.
* action.yml: the composite action's structure; its `run:` steps run locally by
  bash the way the runner does (`bash --noprofile --norc -eo pipefail`), with
  the `${{ }}` expressions substituted. The steps that `uses:` another action
  (setup-python, upload-sarif) and the install step (it would reinstall this
  very package into the test's environment) are checked by their structure only.

The commands run through a directory of shims: `chainlang` and `python` are the
test's interpreter, so the commands are exactly the ones the files hold.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from chainlang.diagnostics.rules import ALL_RULES
from chainlang.output.sarif import DOCS_URL, DOCS_URL_ENV

from tests.helpers import sarif_validator

ROOT = Path(__file__).resolve().parent.parent

GOOD_CHAIN = """\
description: Say good morning with today's date.
steps:
  - tools.now
  - user.notify: {message: "Good morning! Today is {tools.now.date}."}
"""
BAD_CHAIN = """\
description: A typo in an event name.
steps:
  - tools.now
  - user.notfy: {message: "Good morning! Today is {tools.now.date}."}
"""
GOOD_HOOKS = """\
hooks:
  - id: greet
    trigger: post:tools.now
    action:
      - user.notify: {message: "It is {date}."}
"""
BAD_HOOKS = """\
hooks:
  - id: greet-late
    trigger: post:tools.nw
    action:
      - user.notify: {message: "hello"}
"""


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `chainlang` and `python` that run the test's interpreter."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, command in (("chainlang", f"exec {shlex.quote(sys.executable)} -m chainlang.cli \"$@\""),
                          ("python", f"exec {shlex.quote(sys.executable)} \"$@\"")):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{command}\n", encoding="utf-8")
        shim.chmod(0o755)
    return bin_dir


def clean_env(shims: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAINLANG_", "GITHUB_"))}
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def valid_sarif(text: str) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(text)
    errors = sorted(sarif_validator().iter_errors(log), key=str)
    assert not errors, "\n".join(str(e) for e in errors[:3])
    return log


# -- SARIF helpUri --------------------------------------------------------------


def sarif_rules(shims: Path, tmp_path: Path, **env: str) -> list[dict[str, Any]]:
    (tmp_path / "bad.chain.yaml").write_text(BAD_CHAIN, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "check", "--format", "sarif", "bad.chain.yaml"],
                          cwd=tmp_path, env=clean_env(shims, **env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    log = valid_sarif(proc.stdout)
    run = log["runs"][0]
    rules: list[dict[str, Any]] = run["tool"]["driver"]["rules"]
    (result,) = run["results"]
    assert rules[result["ruleIndex"]]["helpUri"].endswith("/checks/unknown-event/")
    return rules


def test_sarif_rules_link_their_docs_pages(shims: Path, tmp_path: Path) -> None:
    pytest.importorskip("rfc3986_validator")  # else the schema's `uri` format goes unchecked
    rules = sarif_rules(shims, tmp_path)
    assert [r["id"] for r in rules] == [rule.id for rule in ALL_RULES]
    for r, rule in zip(rules, ALL_RULES, strict=True):
        assert r["helpUri"] == f"{DOCS_URL}checks/{rule.slug}/"
        # mkdocs builds docs/checks/<slug>.md as <site>/checks/<slug>/
        assert (ROOT / "docs" / "checks" / f"{rule.slug}.md").is_file()


@pytest.mark.parametrize(
    ("value", "base"),
    [
        ("https://example.org/chainlang", "https://example.org/chainlang/"),
        ("https://example.org/chainlang/", "https://example.org/chainlang/"),
        ("file:///srv/site/", "file:///srv/site/"),
        ("site/", DOCS_URL),  # relative: SARIF requires an absolute URI, so the default
        ("", DOCS_URL),
    ],
)
def test_sarif_docs_url_from_the_environment(shims: Path, tmp_path: Path, value: str, base: str) -> None:
    rules = sarif_rules(shims, tmp_path, **{DOCS_URL_ENV: value})
    assert [r["helpUri"] for r in rules] == [f"{base}checks/{rule.slug}/" for rule in ALL_RULES]


# -- pre-commit ------------------------------------------------------------------


def test_pre_commit_hook_fields() -> None:
    hooks = load_yaml(ROOT / ".pre-commit-hooks.yaml")
    assert isinstance(hooks, list) and [h["id"] for h in hooks] == ["chainlang-check"]
    (hook,) = hooks
    assert hook["entry"] == "chainlang check"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True
    assert hook["name"] and hook["description"]
    pattern = re.compile(hook["files"])
    for name in ("a.chain.yaml", "chains/a.chain.yml", "x/b.hooks.yaml", "b.hooks.yml"):
        assert pattern.search(name), name
    for name in ("a.yaml", "chain.yaml", "a.chain.yaml.bak", "a.chainXyaml", "hooks.yml", "a.chain.json", "README.md"):
        assert not pattern.search(name), name


def test_pre_commit_reads_the_manifest() -> None:
    """pre-commit's own schema of .pre-commit-hooks.yaml accepts the file."""
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is not installed (pip install pre-commit)")
    (hook,) = clientlib.load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert hook["id"] == "chainlang-check" and hook["language"] == "python"
    assert hook["exclude"] == "^$" and hook["args"] == []  # nothing unexpected filled in


def test_pre_commit_hook_entry_runs(shims: Path, tmp_path: Path) -> None:
    (hook,) = load_yaml(ROOT / ".pre-commit-hooks.yaml")
    files = {"good.chain.yaml": GOOD_CHAIN, "good.hooks.yml": GOOD_HOOKS,
             "bad.chain.yml": BAD_CHAIN, "bad.hooks.yaml": BAD_HOOKS}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    pattern = re.compile(hook["files"])

    def run(*names: str) -> subprocess.CompletedProcess[str]:
        assert all(pattern.search(n) for n in names)
        return subprocess.run([*shlex.split(hook["entry"]), *names], cwd=tmp_path, env=clean_env(shims),
                              capture_output=True, text=True, timeout=60)

    good = run("good.chain.yaml", "good.hooks.yml")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = run("good.chain.yaml", "bad.chain.yml", "bad.hooks.yaml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.chain.yml:4:5: error: unknown event 'user.notfy'" in bad.stdout
    assert "bad.hooks.yaml" in bad.stdout and "CL041" in bad.stdout
    assert "good.chain.yaml:" not in bad.stdout


# -- the GitHub Action -----------------------------------------------------------


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(ROOT / "action.yml")
    return data


def step(action: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in action["runs"]["steps"] if s.get("name") == name]
    assert isinstance(found, dict)
    return found


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_IF = re.compile(r"^inputs\.([\w-]+) (==|!=) ''$")


def substitute(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match[1] in context, f"unknown expression {match[0]}"
        return context[match[1]]

    return _EXPR.sub(value, text)


def enabled(s: dict[str, Any], inputs: dict[str, str]) -> bool:
    if "if" not in s:
        return True
    match = _IF.match(s["if"])
    assert match, f"condition this test cannot evaluate: {s['if']}"
    empty = inputs[match[1]] == ""
    return empty if match[2] == "==" else not empty


def run_action(action: dict[str, Any], shims: Path, workspace: Path, **given: str) -> list[subprocess.CompletedProcess[str]]:
    """The action's `run:` steps, from the check onwards, as the runner runs them (until one fails)."""
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs.update(given)
    context = {f"inputs.{k}": v for k, v in inputs.items()} | {"github.action_path": str(ROOT)}
    procs = []
    for s in action["runs"]["steps"]:
        if "run" not in s or s["name"] == "Install chainlang" or not enabled(s, inputs):
            continue
        assert s["shell"] == "bash"
        env = clean_env(shims, **{k: substitute(str(v), context) for k, v in s.get("env", {}).items()})
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", substitute(s["run"], context)],
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
        procs.append(proc)
        if proc.returncode != 0:
            break
    return procs


def test_action_structure(action: dict[str, Any]) -> None:
    assert action["name"] and action["description"]
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert inputs["paths"]["default"] == "."
    assert {"python-version", "sarif", "tools", "docs-url"} <= set(inputs)
    assert inputs["sarif"]["default"] == ""
    assert all(spec["description"] for spec in inputs.values())
    steps = action["runs"]["steps"]
    assert [s["name"] for s in steps] == ["Set up Python", "Install chainlang", "Write SARIF", "Upload SARIF", "Check"]
    setup = step(action, "Set up Python")
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    install = step(action, "Install chainlang")
    assert install["env"]["CHAINLANG_ACTION_PATH"] == "${{ github.action_path }}"
    assert 'pip install' in install["run"] and '"$CHAINLANG_ACTION_PATH"' in install["run"]
    upload = step(action, "Upload SARIF")
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["if"] == "inputs.sarif != ''"
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif }}"
    assert step(action, "Write SARIF")["if"] == "inputs.sarif != ''"
    # inputs reach the scripts through env only, never spliced into the shell text
    for s in steps:
        assert "run" not in s or "${{" not in s["run"], s["name"]
    assert "chainlang check --format github" in step(action, "Check")["run"]


def test_action_annotates_a_bad_chain(action: dict[str, Any], shims: Path, tmp_path: Path) -> None:
    (tmp_path / "chains").mkdir()
    (tmp_path / "chains" / "good.chain.yaml").write_text(GOOD_CHAIN, encoding="utf-8")
    (tmp_path / "chains" / "bad.chain.yaml").write_text(BAD_CHAIN, encoding="utf-8")
    (check,) = run_action(action, shims, tmp_path)  # no sarif: only the check step runs
    assert check.returncode == 1, check.stderr
    assert check.stdout.startswith(
        "::error file=./chains/bad.chain.yaml,line=4,col=5,endLine=4,endColumn=15,title=CL014 unknown-event::unknown event 'user.notfy'"
    ), check.stdout
    assert all(line.startswith(("::error ", "::warning ")) for line in check.stdout.splitlines())


def test_action_clean_checkout_passes(action: dict[str, Any], shims: Path, tmp_path: Path) -> None:
    (tmp_path / "chains").mkdir()
    (tmp_path / "chains" / "good.chain.yaml").write_text(GOOD_CHAIN, encoding="utf-8")
    (tmp_path / "x.hooks.yaml").write_text(GOOD_HOOKS, encoding="utf-8")
    (tmp_path / "ignored.chain.yaml").write_text(BAD_CHAIN, encoding="utf-8")
    # several paths, one per line as a YAML block scalar gives them; a `*` is a file name, not a glob
    (check,) = run_action(action, shims, tmp_path, paths="x.hooks.yaml\nchains\n")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout == ""
    (check,) = run_action(action, shims, tmp_path, paths="*.chain.yaml")
    assert check.returncode == 2 and "*.chain.yaml" in check.stderr


def test_action_writes_sarif(action: dict[str, Any], shims: Path, tmp_path: Path) -> None:
    pytest.importorskip("rfc3986_validator")
    (tmp_path / "bad.chain.yaml").write_text(BAD_CHAIN, encoding="utf-8")
    (tmp_path / "good.hooks.yaml").write_text(GOOD_HOOKS, encoding="utf-8")
    procs = run_action(action, shims, tmp_path, paths="bad.chain.yaml good.hooks.yaml",
                       sarif="reports/chainlang.sarif", **{"docs-url": "https://example.org/cl"})
    write, check = procs  # the SARIF step passes on errors; the check step fails the job
    assert write.returncode == 0, write.stderr
    assert check.returncode == 1 and "title=CL014 unknown-event" in check.stdout
    log = valid_sarif((tmp_path / "reports" / "chainlang.sarif").read_text(encoding="utf-8"))
    run = log["runs"][0]
    (result,) = run["results"]
    assert result["ruleId"] == "CL014"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "bad.chain.yaml", "uriBaseId": "%SRCROOT%"}
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["helpUri"] == "https://example.org/cl/checks/unknown-event/"


def test_action_usage_error_fails_the_sarif_step(action: dict[str, Any], shims: Path, tmp_path: Path) -> None:
    (write,) = run_action(action, shims, tmp_path, paths="missing.chain.yaml", sarif="out.sarif")
    assert write.returncode == 2, write.stdout + write.stderr
