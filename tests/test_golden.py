"""Golden tests as data: tests/chains/ok/* check clean; tests/chains/err/X.* match X.out exactly.

A case is a file (X.chain.yaml, X.hooks.yaml, ...) or a directory X/ checked as one
project. Regenerate the .out files with UPDATE_GOLDENS=1 (then read the diff!).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from chainlang.pipeline import check_files, default_registry
from chainlang.diagnostics import Diagnostic

HERE = Path(__file__).parent / "chains"
TOOLS = str(HERE / "golden_tools.py")


@pytest.fixture(scope="module")
def registry():
    return default_registry([TOOLS])


def cases(kind: str) -> list[Path]:
    folder = HERE / kind
    return sorted(p for p in folder.iterdir() if p.suffix != ".out" and not p.name.startswith((".", "_")))


def case_id(path: Path) -> str:
    return path.name


def render(diags: list[Diagnostic]) -> str:
    lines = []
    for d in diags:
        lines.append(str(d))
        if d.hint:
            lines.append(f"    hint: {d.hint}")
    return "\n".join(lines) + ("\n" if lines else "")


def run_case(path: Path, registry, tmp_path: Path) -> str:
    """Check one case as a project of its own: the cases of a folder are independent (every
    hooks file of a project is in force for each of its files, LANGUAGE.md §6.1), so each is
    copied alone into an empty directory, under the same name."""
    alone = tmp_path / "case"
    alone.mkdir()
    if path.is_dir():
        shutil.copytree(path, alone / path.name)
    else:
        shutil.copyfile(path, alone / path.name)
    cwd = os.getcwd()
    os.chdir(alone)
    try:
        return render(check_files([path.name], registry=registry).diagnostics)
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("path", cases("ok"), ids=case_id)
def test_ok(path: Path, registry, tmp_path: Path) -> None:
    assert run_case(path, registry, tmp_path) == ""


@pytest.mark.parametrize("path", cases("err"), ids=case_id)
def test_err(path: Path, registry, tmp_path: Path) -> None:
    out_file = path.parent / (path.name.split(".")[0] + ".out")
    got = run_case(path, registry, tmp_path)
    if os.environ.get("UPDATE_GOLDENS"):
        out_file.write_text(got, encoding="utf-8")
    assert out_file.exists(), f"missing golden {out_file.name}; run with UPDATE_GOLDENS=1"
    assert got.strip(), "an error golden must produce diagnostics"
    assert got == out_file.read_text(encoding="utf-8")


def test_goldens_have_cases() -> None:
    outs = {p.name.split(".")[0] for p in (HERE / "err").glob("*.out")}
    inputs = {p.name.split(".")[0] for p in cases("err")}
    assert outs == inputs, f"orphan goldens: {sorted(outs ^ inputs)}"
