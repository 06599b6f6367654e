"""The README's set-up, done as a newcomer does it: a fresh clone, a clean environment (no
virtualenv active, no PYTHONPATH, a PATH with only the system and the Python to use), then
the commands of its "Set up" section, then the ways it gives to reach `chainlang` after them.

`make test` is not run here (it is the suite this test belongs to); every other command of the
section is, exactly as written. The clone is of the repository's HEAD: uncommitted changes are
not in it (CI tests a clean clone anyway). Installing the project into the clone's `.venv`
takes the packages from the registry or the machine's pip configuration, as `make run` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
KEPT = ("HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def sh_blocks(readme: Path, section: str) -> list[list[str]]:
    """The commands of each ```sh block of the README's `section` (comments and blanks dropped)."""
    text = readme.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"the README has no '## {section}' section"
    blocks = re.findall(r"^```sh\n(.*?)^```", match.group(1), re.S | re.M)
    return [[line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]
            for block in blocks]


def clean_env() -> dict[str, str]:
    """What a new shell has: no virtualenv, no PYTHONPATH; PATH is the system's and the Python
    this suite runs on (the README asks for Python 3.11+ as `python3`)."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve().parent
    env = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith("PIP_")}
    env["PATH"] = os.pathsep.join([str(base), "/usr/local/bin", "/usr/bin", "/bin"])
    return env


def test_the_readme_commands_work_from_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None or shutil.which("make") is None or not (REPO / ".git").exists():
        pytest.skip("needs git, make and a git checkout of the project")
    clone = tmp_path / "chainlang"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=300)
    env = clean_env()
    set_up, reach = sh_blocks(clone / "README.md", "Set up")[:2]
    assert set_up == ["make run", "make test"], set_up  # the two commands, and nothing else
    assert any(line.startswith(". .venv/bin/activate") for line in reach), reach

    run = subprocess.run(["make", "run"], cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "no problems found" in run.stdout and "run ok" in (run.stdout + run.stderr)

    # the README's ways to reach chainlang, each in a new shell of the same clean environment
    bare = subprocess.run(["bash", "-c", "chainlang --help"], cwd=clone, env=env, capture_output=True, text=True)
    assert bare.returncode != 0, "chainlang is on the clean PATH: the test's environment is not clean"
    for line in reach:
        script = f"{line} && chainlang check examples/" if line.startswith(". ") else line
        done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (script, done.stdout[-2000:], done.stderr[-2000:])
        assert "no problems found" in done.stdout or "Usage:" in done.stdout, (script, done.stdout[-2000:])
