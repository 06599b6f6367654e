"""Build hook: the wheel carries the commit it was built from (chainlang/_commit.txt), so that
`chainlang --version` of an installed wheel names it (chainlang/version.py). Outside a git
checkout (an sdist), or without git, nothing is written and --version says "commit unknown"."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CommitBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        # an editable install reads the checkout itself (git): a file would only go stale
        if self.target_name != "wheel" or version == "editable" or not (root / ".git").exists():
            return
        try:
            head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%H %cs"],
                                  capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return
        if head.returncode != 0 or not head.stdout.strip():
            return
        target = Path(tempfile.mkdtemp(prefix="chainlang-build-")) / "_commit.txt"
        target.write_text(head.stdout.strip() + "\n", encoding="utf-8")
        build_data["force_include"][str(target)] = "chainlang/_commit.txt"
