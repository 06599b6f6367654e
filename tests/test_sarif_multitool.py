"""`chainlang check --format sarif` through Microsoft's SARIF multitool, as a code-scanning
user would check it: `validate` with its SARIF rules and the GitHub Advanced Security rule
set (the GH* rules: what github.com's upload requires, e.g. GH2012, a rule's fullDescription
and help). The log must draw no error and no warning; the notes it still draws are listed
below with the reason each is kept. The multitool comes from the npm registry
(@microsoft/sarif-multitool); without npm or the registry the test is skipped.
"""

from __future__ import annotations

import json
import os
import platform
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.npm_tools import npm_package

pytestmark = pytest.mark.slow

# notes the log draws, and why they stay:
KEPT_NOTES = {
    "SARIF2002",  # message ids and arguments instead of text: chainlang's messages are composed text
    "SARIF2003",  # versionControlProvenance: the upload step (github/codeql-action) sends the commit
    "SARIF2006",  # the $schema URI is not reachable: the test machine has no network
    "SARIF2012",  # rule names in PascalCase: chainlang's rules are named by their slug (unknown-event)
}

CHAIN = """\
name: scan
steps:
  - emial.send: {to: bob}
  - event: user.notify
    params: {mesage: hi}
    timeout: 30
"""


def multitool() -> Path:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the npm package ships the multitool for linux-x64 here (sarif-multitool-linux)")
    where = npm_package("@microsoft/sarif-multitool@5.7.0")
    binary = where / "node_modules" / "@microsoft" / "sarif-multitool-linux" / "Sarif.Multitool"
    if not binary.is_file():
        pytest.skip(f"the multitool's linux binary is not where npm put the package: {binary}")
    # npm may not run the package's postinstall (chmod u+x) when scripts are not allowed
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def test_the_sarif_log_passes_the_multitool_with_the_github_rules(tmp_path: Path) -> None:
    tool = multitool()
    (tmp_path / "scan.chain.yaml").write_text(CHAIN, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    check = subprocess.run([sys.executable, "-m", "chainlang.cli", "check", "--format", "sarif", "scan.chain.yaml"],
                           cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert check.returncode == 1, check.stderr
    log = tmp_path / "check.sarif"
    log.write_text(check.stdout, encoding="utf-8")
    results = json.loads(check.stdout)["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"CL014", "CL019"}, results

    report = tmp_path / "validation.sarif"
    proc = subprocess.run([str(tool), "validate", "--rule-kind", "Gh;Sarif", "--level", "Error;Warning;Note",
                           "--output", str(report), str(log)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**env, "DOTNET_CLI_TELEMETRY_OPTOUT": "1"})
    assert report.is_file(), proc.stdout + proc.stderr
    found = json.loads(report.read_text(encoding="utf-8"))["runs"][0]["results"]
    levels = Counter((r["ruleId"], r.get("level", "warning")) for r in found)
    serious = {key: n for key, n in levels.items() if key[1] in ("error", "warning")}
    assert not serious, "\n".join(r["message"].get("text") or json.dumps(r["message"]) for r in found
                                  if r.get("level", "warning") in ("error", "warning"))
    assert {rule for rule, _ in levels} <= KEPT_NOTES, levels
