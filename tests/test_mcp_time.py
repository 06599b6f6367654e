"""A real MCP server from PyPI, not written for chainlang: `mcp-server-time`, the reference
time server. Its schemas are open, as pydantic writes them; `chainlang check` treats the
properties they list as closed, and a run starts the server once for all its steps."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import cli

pytest.importorskip("mcp", reason="the MCP Python SDK is not installed (pip install 'chainlang[mcp]')")
pytest.importorskip("mcp_server_time", reason="mcp-server-time (a test extra) is not installed")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp_time")
    args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    (root / "chainlang.toml").write_text(
        f"[mcp.servers.time]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n", encoding="utf-8")
    return root


def test_check_reports_misspelt_params_and_result_paths(project: Path) -> None:
    (project / "typo.yaml").write_text(
        textwrap.dedent(
            """\
            steps:
              - time.get_current_time: {timezon: Europe/Paris}
              - time.convert_time: {source_timezone: UTC, time: "12:00", target_timezone: Asia/Tokyo}
            outputs:
              diff: "{time.convert_time.result.time_diference}"
            """
        ),
        encoding="utf-8",
    )
    done = cli(project, "check", "typo.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "typo.yaml:2:29: error: time.get_current_time has no param 'timezon' [CL015 param-schema]" in done.stdout
    assert "hint: did you mean 'timezone'?" in done.stdout
    assert ("typo.yaml:5:36: error: the result of time.convert_time has no 'time_diference' [CL026 ref-path]"
            in done.stdout)
    assert "hint: did you mean 'time_difference'?" in done.stdout


def test_a_run_starts_the_server_once_for_all_its_steps(project: Path) -> None:
    (project / "times.yaml").write_text(
        textwrap.dedent(
            """\
            steps:
              - time.get_current_time: {timezone: Europe/Paris}
              - time.convert_time: {source_timezone: UTC, time: "12:00", target_timezone: Asia/Tokyo}
            outputs:
              zone: "{time.get_current_time.result.timezone}"
              target: "{time.convert_time.result.target.datetime}"
              diff: "{time.convert_time.result.time_difference}"
            """
        ),
        encoding="utf-8",
    )
    assert cli(project, "check", "times.yaml").returncode == 0
    done = cli(project, "run", "times.yaml", "--json", "--progress", "plain")
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout)
    assert outputs["zone"] == "Europe/Paris"
    assert outputs["diff"] == "+9.0h"
    assert "T21:00:00+09:00" in outputs["target"]
    assert done.stderr.count("MCP server 'time' started (") == 1, done.stderr
    assert "started again" not in done.stderr
