"""chainlang's version, in a leaf module: the output formats (SARIF's tool version) and the
CLI read it without importing the package's public API (`chainlang/__init__.py`, which
sits above every layer).

`describe()` is what `chainlang --version` prints: the version and the commit it was built
from. A wheel carries its commit in `_commit.txt` (written by the build hook, hatch_build.py);
a checkout (an editable install) asks git, and says when files differ from that commit.
"""

from __future__ import annotations

__version__ = "0.1.0"  # keep equal to pyproject.toml's [project] version

COMMIT_FILE = "_commit.txt"  # in the package of a built wheel: "<sha> <ISO date>"


def commit() -> str | None:
    """The commit this chainlang comes from (`sha date`, `+changes` when a checkout differs from
    it), or None when neither the wheel nor git can tell."""
    # imported here: every command imports this module, and subprocess + pathlib cost ~10-15 ms
    # of a cold `chainlang --help`, which never asks for the commit
    import subprocess
    from pathlib import Path

    package = Path(__file__).resolve().parent
    try:
        return (package / COMMIT_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        pass
    if not (package.parent / ".git").exists():
        return None
    import subprocess  # here, not at import: this module is read by every command

    try:
        head = subprocess.run(["git", "-C", str(package.parent), "log", "-1", "--format=%H %cs"],
                              capture_output=True, text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "-C", str(package.parent), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or not head.stdout.strip():
        return None
    return head.stdout.strip() + (" +changes" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def describe() -> str:
    """`chainlang 0.1.0 (commit 1a2b3c4d5e6f 2026-11-28)`, or without the commit when unknown."""
    found = commit()
    if found is None:
        return f"chainlang {__version__} (commit unknown)"
    sha, _, rest = found.partition(" ")
    return f"chainlang {__version__} (commit {sha[:12]}{' ' + rest if rest else ''})"
