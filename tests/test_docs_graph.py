"""The graph shown in docs/reference/cli.md is the real output for that example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_cli_docs_show_the_real_graph() -> None:
    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(flowchart TD\n.*?)```", page, re.S)
    assert shown, "the mermaid example is missing from docs/reference/cli.md"
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "graph", "examples/morning-routine.chain.yaml"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown.group(1)
