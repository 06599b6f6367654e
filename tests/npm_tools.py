"""Programs from the npm registry that tests drive as their users run them (the SARIF
multitool; later editors' language servers).

`npm_package(name)` installs one package, once, into a cache directory kept between test
runs (`$CHAINLANG_NPM_CACHE`, else `~/.cache/chainlang-tests/npm`) and returns the
directory holding its node_modules. Where npm is missing or the install fails (no
registry), the test is skipped and says why: these tests check chainlang against the
real third-party programs, which a machine without them cannot run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["npm_package"]

INSTALL_TIMEOUT = 600.0  # seconds; the multitool is about 100 MB


def npm_package(spec: str) -> Path:
    """The directory whose node_modules holds `spec` (`name` or `name@version`)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: the test needs {spec} from the npm registry")
    cache = Path(os.environ.get("CHAINLANG_NPM_CACHE") or Path.home() / ".cache" / "chainlang-tests" / "npm")
    where = cache / spec.replace("/", "+").replace("@", "_")
    done = where / ".installed"
    if done.is_file():
        return where
    where.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(where), spec],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {spec} took over {INSTALL_TIMEOUT:g} s (no registry?)")
    if proc.returncode != 0:
        pytest.skip(f"npm install {spec} failed (no registry?): {(proc.stderr or proc.stdout).strip()[-300:]}")
    done.write_text(spec + "\n", encoding="utf-8")
    return where
