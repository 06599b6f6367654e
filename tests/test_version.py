"""`chainlang --version`: the version and the commit it comes from (a checkout asks git; an
installed wheel carries its commit: tests/test_wheel.py), and the version is the same
everywhere it is written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from chainlang.version import __version__, describe
from tests.helpers import cli, show

REPO = Path(__file__).resolve().parent.parent


def test_version_names_the_checkouts_commit(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the commit comes from the wheel (tests/test_wheel.py)")
    head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%H %cs"], capture_output=True, text=True,
                          check=True).stdout.split()
    done = cli(tmp_path, "--version")
    assert done.returncode == 0, show(done)
    assert re.fullmatch(rf"chainlang {re.escape(__version__)} \(commit {head[0][:12]} {head[1]}( \+changes)?\)\n",
                        done.stdout), done.stdout
    assert done.stdout.strip() == describe()


def test_the_version_is_written_once_everywhere() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"$', pyproject, re.M).group(1) == __version__  # type: ignore[union-attr]
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {__version__}" in changelog or "## Unreleased" in changelog
