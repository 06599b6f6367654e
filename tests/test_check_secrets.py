"""`chainlang check` and the language server mask a secret written literally in a
chain, as `run` does: the model tier's API key (the value of its `api_key_env`
variable) and a declared `[secrets]` value become `***` in every format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

API_KEY = "sk-live-4f9a8b7c6d5e"
TOKEN = "crm-token-77aa31"
TOML = f"""\
[models.heavy]
provider = "openai"
model = "gpt-4o"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "TEST_MODEL_KEY"

[secrets]
crm = {{env = "TEST_CRM_TOKEN"}}
"""
# each secret reaches a message (CL030 quotes the value), a hint-bearing diagnostic's
# source line (CL015, CL014) and a line shown for another diagnostic
CHAIN = f"""\
steps:
  - tools.date_calc: {{from: "x", api_key: "{API_KEY}"}}
  - http.request: {{url: "https://x", headers: {{Authorization: "{TOKEN}"}}}}
limits: {{max_steps: "{API_KEY}"}}
"""
SECRET_FILE_VALUE = "file-secret-0042"


def _project(root: Path) -> Path:
    (root / "chainlang.toml").write_text(TOML)
    (root / "a.chain.yaml").write_text(CHAIN)
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "TEST_MODEL_KEY": API_KEY, "TEST_CRM_TOKEN": TOKEN, "NO_COLOR": "1"}


def _check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chainlang", "check", *args], cwd=root, env=_env(),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_check_masks_literal_secrets_in_every_format(tmp_path: Path, fmt: str) -> None:
    root = _project(tmp_path)
    done = _check(root, "--format", fmt, "a.chain.yaml")
    assert done.returncode == 1, done.stderr
    out = done.stdout + done.stderr
    assert API_KEY not in out and TOKEN not in out
    assert "***" in out
    if fmt == "json":
        [limit] = [d for d in json.loads(done.stdout) if d["rule"] == "CL030"]
        assert limit["message"].endswith("not the string '***'")


def test_text_format_masks_source_lines_and_keeps_the_caret(tmp_path: Path) -> None:
    root = _project(tmp_path)
    done = _check(root, "a.chain.yaml")
    lines = done.stdout.splitlines()
    at = lines.index('  2 |   - tools.date_calc: {from: "x", api_key: "***"}')
    assert lines[at + 1] == "    |                                  ^~~~~~~"  # still under `api_key`
    assert '  3 |   - http.request: {url: "https://x", headers: {Authorization: "***"}}' in lines
    at = lines.index('  4 | limits: {max_steps: "***"}')
    assert lines[at + 1] == "    |                     ^~~~~"  # the quoted `***`


def test_a_secret_read_from_a_file_is_masked(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('[secrets]\nsigning = {file = "signing.key"}\n')
    (tmp_path / "signing.key").write_text(SECRET_FILE_VALUE + "\n")
    (tmp_path / "a.chain.yaml").write_text(f'steps:\n  - tools.now\nlimits: {{max_steps: "{SECRET_FILE_VALUE}"}}\n')
    done = _check(tmp_path, "--format", "json", "a.chain.yaml")
    assert done.returncode == 1 and SECRET_FILE_VALUE not in done.stdout
    [diag] = json.loads(done.stdout)
    assert diag["message"].endswith("not the string '***'")


def test_the_language_server_masks_literal_secrets(tmp_path: Path) -> None:
    pytest.importorskip("pygls")
    from tests.lsp_util import finish, started

    root = _project(tmp_path)
    c = started(root, env={"TEST_MODEL_KEY": API_KEY, "TEST_CRM_TOKEN": TOKEN})
    try:
        uri = c.open(root / "a.chain.yaml", CHAIN)
        diagnostics = c.diagnostics(uri, 1)
        assert {d["code"] for d in diagnostics} == {"CL015", "CL014", "CL030"}
        text = json.dumps(diagnostics)
        assert API_KEY not in text and TOKEN not in text
        [limit] = [d for d in diagnostics if d["code"] == "CL030"]
        assert limit["message"].endswith("not the string '***'")
    finally:
        finish(c)


@pytest.mark.parametrize("command", [["run"], ["graph"]])
def test_run_and_graph_mask_the_diagnostics_they_print(tmp_path: Path, command: list[str]) -> None:
    root = _project(tmp_path)
    done = subprocess.run([sys.executable, "-m", "chainlang", *command, "a.chain.yaml"], cwd=root, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "CL030" in done.stderr
    assert API_KEY not in done.stdout + done.stderr and TOKEN not in done.stdout + done.stderr
