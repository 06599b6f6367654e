"""`mypy --strict` over the Python API as the docs show it, and over mistakes it must refuse.

The ```python blocks of docs/guides/python.md (its files and its scripts) and of
docs/reference/api.md are written as modules and type-checked with `--strict`: an example
that a user's strict type checker would refuse is a bug of the docs or of the API's types.
Then small modules with the mistakes the API's types exist to catch (a misspelt keyword, a
bare string for `tools=`, the union that `resume` returns, a misspelt status): mypy must
refuse each one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_python import DocBlock, read_blocks

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guides" / "python.md"
API_PAGE = REPO / "docs" / "reference" / "api.md"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for this file's mypy runs: the second reads chainlang's modules from it
    instead of analysing them again (the same settings; nothing shared with other runs)."""
    return tmp_path_factory.mktemp("mypy-cache")


def mypy(directory: Path, files: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` of `files` in `directory`, with this checkout's chainlang (and its
    `py.typed`) on the path."""
    env = {**os.environ, "MYPYPATH": str(REPO)}
    config = directory / "mypy.ini"  # no settings but --strict's (not the project's pyproject.toml)
    config.write_text("[mypy]\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes", "--hide-error-context",
         "--cache-dir", str(cache), "--config-file", str(config), *files],
        cwd=directory, env=env, capture_output=True, text=True, timeout=600)


def errors_in(output: str, files: list[str]) -> list[str]:
    """mypy's error lines about `files` (not about chainlang's own modules, which
    `mypy chainlang` checks in CI with the project's settings)."""
    names = tuple(f"{name}:" for name in files)
    return [line for line in output.splitlines() if line.startswith(names) and ": error:" in line]


def typed_blocks(page: Path) -> list[DocBlock]:
    return [b for b in read_blocks(page) if b.lang == "python" and b.not_run is None]


def test_the_docs_api_examples_pass_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    files: list[str] = []
    for block in typed_blocks(GUIDE):
        name = block.title or f"guide_{block.line}.py"
        (tmp_path / name).write_text(block.text, encoding="utf-8")
        files.append(name)
    for block in typed_blocks(API_PAGE):
        name = f"api_{block.line}.py"
        (tmp_path / name).write_text(block.text, encoding="utf-8")
        files.append(name)
    assert len(files) >= 8, files
    # what the results hold is typed as well as documented: a status is an Outcome, not any str
    (tmp_path / "typed_results.py").write_text(
        "import chainlang\n"
        "from chainlang.status import Outcome\n\n"
        "def outcome_of(result: chainlang.RunResult, emitted: chainlang.EmitResult) -> list[Outcome]:\n"
        "    return [result.status, emitted.status]\n\n"
        "def resumed(path: str) -> chainlang.RunResult:\n"
        "    return chainlang.resume_run(path, rerun=['send'])\n", encoding="utf-8")
    files.append("typed_results.py")
    done = mypy(tmp_path, files, mypy_cache)
    found = errors_in(done.stdout, files)
    assert not found, "\n".join(found)
    assert done.returncode == 0 or not errors_in(done.stdout, files), done.stdout + done.stderr


NEGATIVE = {
    "misspelt_keyword.py": (
        "import chainlang\n"
        "chainlang.run('x.chain.yaml', input={'n': 1})\n",
        r'Unexpected keyword argument "input"'),
    "bare_string_tools.py": (
        "import chainlang\n"
        "chainlang.run('x.chain.yaml', tools='mytools.py')\n",
        r'Argument "tools" to "run" has incompatible type "str"'),
    "resume_union.py": (
        "import chainlang\n"
        "r: chainlang.RunResult = chainlang.resume('run.jsonl')\n",
        r'Incompatible types in assignment \(expression has type "RunResult \| EmitResult"'),
    "misspelt_status.py": (
        "import chainlang\n"
        "result = chainlang.run('x.chain.yaml', {'n': 1})\n"
        "if result.status == 'sucess':\n"
        "    print('done')\n",
        r'Non-overlapping equality check'),
    "loaded_chain_keyword.py": (
        "import chainlang\n"
        "with chainlang.open_project_sync('.') as project:\n"
        "    project.chain('app.welcome').run_sync({'n': 1}, tread='t-1')\n",
        r'Unexpected keyword argument "tread"'),
    "project_tools_string.py": (
        "import chainlang\n"
        "chainlang.open_project_sync('.', tools='mytools.py')\n",
        r'Argument "tools" to "open_project_sync" has incompatible type "str"'),
}


def test_mypy_refuses_the_mistakes_the_types_exist_for(tmp_path: Path, mypy_cache: Path) -> None:
    for name, (text, _) in NEGATIVE.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = mypy(tmp_path, list(NEGATIVE), mypy_cache)
    for name, (_, expected) in NEGATIVE.items():
        found = errors_in(done.stdout, [name])
        assert found, f"mypy accepted {name}:\n{NEGATIVE[name][0]}\n{done.stdout}{done.stderr}"
        assert any(re.search(expected, line) for line in found), f"{name}: {found}"
