"""MCP tools as events: `[mcp.servers.NAME]` in chainlang.toml, driven through the CLI
against a small stdio MCP server (the official `mcp` SDK's MCPServer) the test writes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import cli

pytest.importorskip("mcp", reason="the MCP Python SDK is not installed (pip install 'chainlang[mcp]')")

SERVER = textwrap.dedent(
    '''\
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("calc")


    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b


    @server.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()


    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ToolError("the calculator is broken")


    @server.tool()
    def pid() -> int:
        """The server's process id."""
        import os

        return os.getpid()


    @server.tool()
    def die() -> str:
        """Stops the server without answering."""
        import os

        os._exit(3)


    server.run()
    '''
)


def _toml(command: str, args: list[str]) -> str:
    return f"[mcp.servers.calc]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp_project")
    (root / "server.py").write_text(SERVER, encoding="utf-8")
    (root / "chainlang.toml").write_text(_toml(sys.executable, ["server.py"]), encoding="utf-8")
    return root


def test_events_lists_the_servers_tools_with_their_schemas(project: Path) -> None:
    done = cli(project, "events", "--json")
    assert done.returncode == 0, done.stderr
    events = {event["name"]: event for event in json.loads(done.stdout)}
    assert {"calc.add", "calc.shout", "calc.fail"} <= set(events)
    add = events["calc.add"]
    assert add["kind"] == "tool" and add["implemented"] is True
    assert add["description"] == "Add two numbers."
    assert add["params"]["properties"]["a"]["type"] == "integer"
    assert sorted(add["params"]["required"]) == ["a", "b"]
    assert "MCP server 'calc'" in add["source"]


def test_check_uses_the_servers_schema(project: Path) -> None:
    (project / "bad.yaml").write_text("steps:\n  - calc.add: {a: two, b: 3}\n", encoding="utf-8")
    done = cli(project, "check", "bad.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "param 'a' of calc.add: expected integer" in done.stdout
    assert "CL015" in done.stdout


def test_check_treats_the_listed_properties_as_closed(project: Path) -> None:
    # the SDK publishes open schemas (no additionalProperties): a typo would pass unseen
    (project / "typo.yaml").write_text(
        "steps:\n  - calc.add: {a: 1, bb: 3}\noutputs:\n  sum: '{calc.add.result.reslt}'\n", encoding="utf-8")
    done = cli(project, "check", "typo.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: calc.add has no param 'bb' [CL015 param-schema]" in done.stdout
    assert "hint: did you mean 'b'?" in done.stdout
    assert "error: the result of calc.add has no 'reslt' [CL026 ref-path]" in done.stdout
    assert "hint: did you mean 'result'?" in done.stdout


def test_strict_false_keeps_the_servers_open_schemas(project: Path, tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(
        _toml(sys.executable, [str(project / "server.py")]) + "strict = false\n", encoding="utf-8")
    (tmp_path / "typo.yaml").write_text(
        "steps:\n  - calc.add: {a: 1, b: 2, c: 3}\noutputs:\n  sum: '{calc.add.result.reslt}'\n", encoding="utf-8")
    done = cli(tmp_path, "check", "typo.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CL015" not in done.stdout and "CL026" not in done.stdout


def test_one_server_process_serves_every_step_of_a_run(project: Path) -> None:
    (project / "pids.yaml").write_text(
        textwrap.dedent(
            """\
            steps:
              - {id: first, event: calc.pid}
              - calc.add: {a: 1, b: 2}
              - {id: second, event: calc.pid}
              - {id: together, foreach: [1, 2, 3, 4], max_parallel: 4, event: calc.pid}
            outputs:
              first: "{first.result}"
              second: "{second.result}"
              together: "{together.result}"
            """
        ),
        encoding="utf-8",
    )
    done = cli(project, "run", "pids.yaml", "--json", "--progress", "plain")
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout)
    assert pids["first"] == pids["second"]
    assert pids["together"] == [pids["first"]] * 4  # concurrent calls, one session
    assert done.stderr.count("MCP server 'calc' started (") == 1, done.stderr


def test_a_server_that_stopped_is_started_again_by_the_next_call(project: Path) -> None:
    (project / "die.yaml").write_text(
        textwrap.dedent(
            """\
            steps:
              - {event: calc.die, on_error: continue}
              - calc.add: {a: 40, b: 2}
            outputs:
              sum: "{calc.add.result.result}"
            """
        ),
        encoding="utf-8",
    )
    done = cli(project, "run", "die.yaml", "--json", "--progress", "plain")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": 42}
    assert "MCP server 'calc' started (" in done.stderr
    assert "MCP server 'calc' started again (" in done.stderr


def test_run_calls_the_tools(project: Path) -> None:
    (project / "calc.yaml").write_text(
        textwrap.dedent(
            """\
            steps:
              - calc.add: {a: 2, b: 3}
              - calc.shout: {text: "sum {calc.add.result.result}"}
            outputs:
              sum: "{calc.add.result.result}"
              loud: "{calc.shout.result.result}"
            """
        ),
        encoding="utf-8",
    )
    done = cli(project, "run", "calc.yaml", "--json", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": 5, "loud": "SUM 5"}


def test_a_tool_error_fails_the_step_with_its_message(project: Path) -> None:
    (project / "fail.yaml").write_text("steps:\n  - calc.fail\n", encoding="utf-8")
    done = cli(project, "run", "fail.yaml", "--progress", "plain")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "calc.fail" in done.stderr
    assert "the calculator is broken" in done.stderr


def test_a_server_that_does_not_start_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(_toml("no-such-mcp-server-command", []), encoding="utf-8")
    done = cli(tmp_path, "events")
    assert done.returncode == 2, done.stdout + done.stderr
    message = done.stderr.strip()
    assert "MCP server 'calc'" in message and "no-such-mcp-server-command" in message
    assert "Traceback" not in done.stderr


def test_the_config_needs_one_transport(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(
        '[mcp.servers.calc]\ncommand = "x"\nurl = "http://localhost:1/mcp"\n', encoding="utf-8")
    done = cli(tmp_path, "events")
    assert done.returncode == 2
    assert "exactly one of command" in done.stderr
    (tmp_path / "chainlang.toml").write_text('[mcp.servers.Calc]\ncommand = "x"\n', encoding="utf-8")
    done = cli(tmp_path, "events")
    assert done.returncode == 2
    assert "event namespace" in done.stderr
    (tmp_path / "chainlang.toml").write_text('[mcp.servers.calc]\ncommand = "x"\nargz = []\n', encoding="utf-8")
    done = cli(tmp_path, "events")
    assert done.returncode == 2
    assert "did you mean 'args'" in done.stderr


@pytest.fixture(scope="module")
def http_server(project: Path) -> Iterator[str]:
    """The same server over streamable HTTP, on a free local port."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = project / "http_server.py"
    script.write_text(SERVER.replace("server.run()", f'server.run("streamable-http", port={port})'), encoding="utf-8")
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP MCP server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_url_server_over_http(http_server: str, tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(f"[mcp.servers.calc]\nurl = {json.dumps(http_server)}\n", encoding="utf-8")
    (tmp_path / "add.yaml").write_text("steps:\n  - calc.add: {a: 20, b: 22}\noutputs:\n  sum: '{calc.add.result.result}'\n",
                                       encoding="utf-8")
    done = cli(tmp_path, "run", "add.yaml", "--json", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": 42}
