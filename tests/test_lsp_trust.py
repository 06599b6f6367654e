"""`chainlang lsp` runs no project code until the workspace is trusted.

The project of these tests has a tools file, a tools module and an MCP server,
each of which leaves a marker file when it runs: opening a chain in an
untrusted workspace must leave none of them, and say once how to trust it."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from tests.lsp_util import TRUSTED, Client, finish, started

TOOLS_FILE = textwrap.dedent('''\
    from pathlib import Path
    from chainlang import event

    Path(__file__).with_name("marker-tools-file").write_text("imported")


    @event("crm.lookup", description="Look a customer up")
    def lookup(email: str) -> dict:
        return {}
    ''')

TOOLS_MODULE = textwrap.dedent('''\
    from pathlib import Path
    from chainlang import event

    Path(__file__).with_name("marker-tools-module").write_text("imported")


    @event("billing.charge", description="Charge a customer")
    def charge(amount: int) -> dict:
        return {}
    ''')

# a real MCP server (the SDK's), so that a trusted project loads cleanly
MCP_SERVER = textwrap.dedent('''\
    from pathlib import Path

    Path(__file__).with_name("marker-mcp").write_text("started")

    from mcp.server.mcpserver import MCPServer

    server = MCPServer("notes")


    @server.tool()
    def add(text: str) -> str:
        """Add a note."""
        return text


    server.run()
    ''')

CHAIN = "steps:\n  - crm.lookup: {email: a@b.c}\n  - billing.charge: {amount: 3}\n  - notes.add: {text: hi}\n"
MARKERS = ("marker-tools-file", "marker-tools-module", "marker-mcp")
SLOW = 60.0  # starting an MCP server on a loaded machine takes a while


def project(root: Path, *, tools: bool = True, mcp: bool = True) -> Path:
    toml = ""
    if tools:
        toml += 'tools = ["crm_tools.py", "billing_tools"]\n'
        (root / "crm_tools.py").write_text(TOOLS_FILE)
        (root / "billing_tools.py").write_text(TOOLS_MODULE)
    if mcp:
        toml += f"[mcp.servers.notes]\ncommand = {json.dumps(sys.executable)}\nargs = [\"notes_server.py\"]\n"
        (root / "notes_server.py").write_text(MCP_SERVER)
    (root / "chainlang.toml").write_text(toml)
    return root


def markers(root: Path) -> list[str]:
    return [name for name in MARKERS if (root / name).exists()]


def test_untrusted_workspace_runs_no_project_code(tmp_path: Path) -> None:
    root = project(tmp_path)
    c = started(root, env={"CHAINLANG_LSP_TRUST": "maybe"})  # not a yes: trusts nothing, and says so
    try:
        log = c.wait_note("window/logMessage", lambda p: "CHAINLANG_LSP_TRUST" in p["message"])
        assert log["type"] == 2 and "not understood" in log["message"]
        uri = c.open(root / "a.chain.yaml", CHAIN + "  - tools.nwo\n")
        notice, *rest = c.diagnostics(uri, 1)
        assert notice["range"]["start"] == {"line": 0, "character": 0} and notice["severity"] == 3
        message = notice["message"]
        assert "not trusted" in message and '"trustProject": true' in message and "CHAINLANG_LSP_TRUST=1" in message
        assert "tools file 'crm_tools.py'" in message and "tools module 'billing_tools'" in message
        assert "MCP server 'notes'" in message
        # the events the tools could provide are information, not errors (a tools module may name any event)
        assert [(d["code"], d["severity"]) for d in rest] == [("CL014", 3)] * 4
        assert all("untrusted workspace" in d["message"] for d in rest)
        # completion and hover work with the standard events, and still run nothing
        assert "tools.now" in c.complete(uri, 1, len("  - "))
        c.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 6}})
        # said once: a second document has no notice
        other = c.open(root / "b.chain.yaml", "steps:\n  - tools.now\n")
        assert c.diagnostics(other, 1) == []
        c.notify("textDocument/didSave", {"textDocument": {"uri": uri}})  # a save rebuilds the project view
        assert [d["code"] for d in c.diagnostics(uri, 1)][0] == "untrusted"
        assert markers(root) == []
        assert c.close() == 0
        assert markers(root) == []
    finally:
        finish(c)


def test_untrusted_mcp_only_project_keeps_other_unknown_events_errors(tmp_path: Path) -> None:
    root = project(tmp_path, tools=False)
    c = started(root)
    try:
        uri = c.open(root / "a.chain.yaml", "steps:\n  - notes.add: {text: hi}\n  - tools.nwo\n")
        notice, server_event, typo = c.diagnostics(uri, 1)
        assert notice["code"] == "untrusted" and "MCP server 'notes'" in notice["message"]
        assert (server_event["code"], server_event["severity"], server_event["range"]["start"]["line"]) == ("CL014", 3, 1)
        # only the server's namespace is the project's: a typo elsewhere is still an error
        assert (typo["code"], typo["severity"]) == ("CL014", 1) and "did you mean 'tools.now'?" in typo["message"]
        hooks = c.open(root / "h.hooks.yaml", "- trigger: pre:notes.add\n  cancel: true\n")
        [hook] = c.diagnostics(hooks, 1)  # no second notice
        assert (hook["code"], hook["severity"]) == ("CL041", 3)
        assert markers(root) == []
    finally:
        finish(c)


def test_a_project_without_code_has_no_notice(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n')
    c = started(tmp_path)
    try:
        uri = c.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.nwo\n")
        [diag] = c.diagnostics(uri, 1)
        assert (diag["code"], diag["severity"]) == ("CL014", 1)  # nothing held back: checked as before
    finally:
        finish(c)


def _trusted_loads_everything(c: Client, root: Path) -> None:
    uri = c.open(root / "a.chain.yaml", CHAIN + "  - tools.nwo\n")
    [typo] = c.diagnostics(uri, 1)  # no notice; the project's three events resolve
    assert (typo["code"], typo["severity"], typo["range"]["start"]["line"]) == ("CL014", 1, 4)
    assert markers(root) == list(MARKERS)
    assert {"crm.lookup", "billing.charge", "notes.add"} <= set(c.complete(uri, 1, len("  - ")))
    assert c.close() == 0


@pytest.mark.slow
def test_trusted_by_initialization_option(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = project(tmp_path)
    c = started(root, TRUSTED, timeout=SLOW)
    try:
        _trusted_loads_everything(c, root)
    finally:
        finish(c)


@pytest.mark.slow
def test_trusted_by_environment(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = project(tmp_path)
    c = started(root, env={"CHAINLANG_LSP_TRUST": "1"}, timeout=SLOW)
    try:
        _trusted_loads_everything(c, root)
    finally:
        finish(c)


def test_a_malformed_trust_option_trusts_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, mcp=False)
    c = started(root, {"chainlang": {"trustProject": "yes"}})
    try:
        log = c.wait_note("window/logMessage", lambda p: "initializationOptions" in p["message"])
        assert log["type"] == 2 and "not trusted" in log["message"]
        uri = c.open(root / "a.chain.yaml", CHAIN)
        assert c.diagnostics(uri, 1)[0]["code"] == "untrusted"
        assert markers(root) == []
    finally:
        finish(c)


def test_a_module_of_the_workspace_does_not_shadow_the_standard_library(tmp_path: Path) -> None:
    # started as `python -m chainlang lsp` in the workspace, whose directory Python puts first on sys.path;
    # the checker imports difflib (for "did you mean") only when it first needs it
    (tmp_path / "difflib.py").write_text("from pathlib import Path\nPath(__file__).with_name('marker-difflib').write_text('x')\n")
    c = started(tmp_path)
    try:
        uri = c.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.nwo\n")
        [diag] = c.diagnostics(uri, 1)
        assert "did you mean 'tools.now'?" in diag["message"]
        assert not (tmp_path / "marker-difflib").exists()
    finally:
        finish(c)
