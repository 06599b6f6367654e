"""The Python examples of docs/guides/python.md run as they are written.

The guide's fenced blocks follow these conventions (tests/test_docs.py checks its yaml
blocks as it does every page's):

- a block with a title (```python title="app_tools.py"```, ```toml title="chainlang.toml"```)
  is a FILE of the guide's project, written at that path;
- a ```python block without a title is a SCRIPT: it runs with this Python in a new
  directory holding every file of the guide, and must exit 0; the ```text block right after
  it (blank lines between at most) is what it must print, exactly;
- a file named test_*.py is a pytest module: it runs with pytest in that directory;
- a ```python block right after a `<!-- not run: REASON -->` line is not run (it needs a
  package chainlang does not depend on, FastAPI say); it must still say why.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import clean_env

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guides" / "python.md"

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<info>[^`]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")


@dataclass
class DocBlock:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    title: str | None = None
    not_run: str | None = None  # the reason, for a block that is not run
    output: str | None = None  # for a script: the ```text block after it

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def read_blocks(path: Path) -> list[DocBlock]:
    """The fenced blocks of a page (top-level fences only), with the text block after each script."""
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[DocBlock] = []
    i = 0
    last_end = -1
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        title = _TITLE.search(fence.group("info"))
        before = lines[i - 1] if i > 0 else ""
        not_run = _NOT_RUN.match(before)
        block = DocBlock(page, i + 1, fence.group("lang"), "\n".join(lines[i + 1:j]) + "\n",
                         title.group("title") if title else None, not_run.group("reason") if not_run else None)
        previous = blocks[-1] if blocks else None
        adjacent = all(not text.strip() for text in lines[last_end + 1:i])
        if (block.lang == "text" and previous is not None and adjacent and previous.lang == "python"
                and previous.title is None):
            previous.output = block.text
        blocks.append(block)
        last_end = j
        i = j + 1
    return blocks


def files_of(blocks: list[DocBlock]) -> dict[str, str]:
    return {b.title: b.text for b in blocks if b.title is not None}


def scripts_of(blocks: list[DocBlock]) -> list[DocBlock]:
    """The python blocks that are run (not files, not marked `not run`)."""
    return [b for b in blocks if b.lang == "python" and b.title is None and b.not_run is None]


def write_project(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


BLOCKS = read_blocks(GUIDE)
SCRIPTS = scripts_of(BLOCKS)
PYTEST_FILES = [b for b in BLOCKS if b.title is not None and Path(b.title).name.startswith("test_")]


def test_the_guide_has_runnable_examples() -> None:
    assert len(SCRIPTS) >= 6, [b.id for b in SCRIPTS]
    assert all(b.output is not None for b in SCRIPTS), [b.id for b in SCRIPTS if b.output is None]
    assert PYTEST_FILES, "the guide's pytest example (a block titled test_*.py)"
    not_run = [b for b in BLOCKS if b.not_run is not None]
    assert all(b.lang == "python" for b in not_run), [b.id for b in not_run]


@pytest.mark.parametrize("block", SCRIPTS, ids=[b.id for b in SCRIPTS])
def test_example_runs_and_prints_what_the_guide_shows(block: DocBlock, tmp_path: Path) -> None:
    write_project(tmp_path, files_of(BLOCKS))
    (tmp_path / "example.py").write_text(block.text, encoding="utf-8")
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    assert done.stdout == block.output, f"{block.id} printed:\n{done.stdout}"
    assert done.stderr == "", f"{block.id} wrote to stderr (the library is quiet):\n{done.stderr}"


@pytest.mark.parametrize("block", PYTEST_FILES, ids=[b.id for b in PYTEST_FILES])
def test_pytest_example_passes(block: DocBlock, tmp_path: Path) -> None:
    assert block.title is not None
    write_project(tmp_path, files_of(BLOCKS))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", block.title],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.id}:\n{done.stdout}{done.stderr}"
    tests = len(re.findall(r"^(?:async )?def test_", block.text, re.M))
    assert re.search(rf"\b{tests} passed\b", done.stdout), done.stdout
