"""Every version the docs tell users to pin names something that exists in this repository:
the `rev:` of the pre-commit configuration and the `@REF` of the GitHub Action
(`OWNER/chainlang@REF`), each a tag or a commit (`pathspec 'v0.1.0' did not match` was what a
pin of a tag never made gave). And the pinned commit has the hook and the action the docs
describe."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^\s*rev:\s*(\S+)|OWNER/chainlang@([\w./-]+)", re.M)


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)


def pins() -> list[tuple[str, str]]:
    found = []
    for page in sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md", REPO / "action.yml"]:
        for match in PIN.finditer(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(REPO)), match.group(1) or match.group(2)))
    return found


def test_the_docs_pin_something_at_all() -> None:
    assert len(pins()) >= 4, pins()


@pytest.mark.parametrize(("page", "ref"), pins())
def test_every_pin_in_the_docs_exists_in_the_repository(page: str, ref: str) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the pins can only be looked up in one")
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone lacks older commits: the pins are looked up in a full clone")
    kind = git("cat-file", "-t", ref).stdout.strip()
    assert kind in ("commit", "tag"), f"{page}: the pin {ref!r} names nothing in the repository ({kind or 'missing'})"
    if kind == "commit":
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{page}: pin a commit by its full SHA (GitHub Actions needs it): {ref}"
    for needed in (".pre-commit-hooks.yaml", "action.yml"):
        assert git("cat-file", "-e", f"{ref}:{needed}").returncode == 0, f"{page}: {ref} has no {needed}"
