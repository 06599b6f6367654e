"""The package ships py.typed: it must stay clean under mypy --strict (configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

REPO = Path(__file__).resolve().parent.parent


def test_package_is_mypy_strict_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "chainlang"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
