"""chainlang's editor schemas in the YAML language server users install (yaml-language-server
from npm, pinned below): a misspelt key gets exactly one diagnostic, on the key, naming the keys
allowed there; a file that is right gets none. The files point at their schema with the
documented first-line comment (docs/guides/editors.md). Without npm or the registry the test is
skipped and says why."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.lsp_util import Client
from tests.npm_tools import npm_package

pytestmark = pytest.mark.slow

PACKAGE = "yaml-language-server@1.25.0"
REPO = Path(__file__).resolve().parent.parent

CHAIN = """\
# yaml-language-server: $schema=chain.schema.json
chain: demo.keys
stpes:
  - tools.now
steps:
  - event: user.notify
    parms: {message: hi}
  - email.search: {query: x}
    tiemout: 3s
limits: {max_step: 3}
"""

HOOKS = """\
# yaml-language-server: $schema=hooks.schema.json
- id: loud
  trigger: pre:user.notify
  condtion: "title == 'x'"
  set: {title: Note}
"""

GOOD = """\
# yaml-language-server: $schema=chain.schema.json
chain: demo.good
description: A chain the schema accepts.
steps:
  - tools.now
  - user.notify: {message: "It is {tools.now.time}."}
    timeout: 5s
    description: says the time
"""


@pytest.fixture(scope="module")
def server() -> list[str]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: yaml-language-server runs on Node.js")
    where = npm_package(PACKAGE)
    binary = where / "node_modules" / ".bin" / "yaml-language-server"
    if not binary.exists():
        pytest.skip(f"npm installed {PACKAGE} without its yaml-language-server command")
    return [str(binary), "--stdio"]


def diagnostics(server: list[str], folder: Path, name: str, text: str) -> list[dict[str, object]]:
    for schema in ("chain.schema.json", "hooks.schema.json"):
        shutil.copy(REPO / "schemas" / schema, folder / schema)
    client = Client(folder, argv=server, timeout=60)
    try:
        client.request("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {
            "textDocument": {"publishDiagnostics": {}}}})
        client.notify("initialized", {})
        uri = client.open(folder / name, text)
        return client.diagnostics(uri)
    finally:
        client.proc.kill()


def keys_at(text: str, found: list[dict[str, object]]) -> list[str]:
    """The word each diagnostic's range starts on."""
    lines = text.splitlines()
    out = []
    for d in found:
        start = d["range"]["start"]  # type: ignore[index]
        word = re.match(r"[\w.-]+", lines[start["line"]][start["character"]:])  # type: ignore[index]
        out.append(word.group(0) if word else "")
    return sorted(out)


def test_a_misspelt_key_gets_one_diagnostic_naming_the_keys_allowed(server: list[str], tmp_path: Path) -> None:
    found = diagnostics(server, tmp_path, "c.chain.yaml", CHAIN)
    assert keys_at(CHAIN, found) == ["max_step", "parms", "stpes", "tiemout"], found
    by_key = dict(zip(keys_at(CHAIN, found), sorted(found, key=lambda d: keys_at(CHAIN, [d])[0])))
    assert '"steps"' in str(by_key["stpes"]["message"]) and '"limits"' in str(by_key["stpes"]["message"])
    assert '"params"' in str(by_key["parms"]["message"])
    assert '"timeout"' in str(by_key["tiemout"]["message"])
    assert '"max_steps"' in str(by_key["max_step"]["message"])


def test_a_misspelt_hook_key_gets_one_diagnostic(server: list[str], tmp_path: Path) -> None:
    found = diagnostics(server, tmp_path, "h.hooks.yaml", HOOKS)
    assert keys_at(HOOKS, found) == ["condtion"], found
    assert '"condition"' in str(found[0]["message"])


def test_a_right_file_gets_no_diagnostic(server: list[str], tmp_path: Path) -> None:
    assert diagnostics(server, tmp_path, "g.chain.yaml", GOOD) == []
