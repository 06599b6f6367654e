"""Packages as floors (issue 22, item 4): the import graph of chainlang's packages, read by
tools/package_graph.py, has no cycle of more than three packages and no import that goes up
a floor; the leaves import nothing of chainlang; the run does not import the engines, serve
or the CLI; and the check pipeline does not import the task system: stored hooks reach it
as data, which `chainlang check` still passes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "package_graph.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("package_graph", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["package_graph"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


package_graph = _tool()


@pytest.fixture(scope="module")
def graph() -> object:
    return package_graph.build_graph(REPO)


def _sites(graph: object, pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"  {src} -> {dst}: " + "; ".join(str(s) for s in graph.sites[(src, dst)][:5])  # type: ignore[attr-defined]
                     for src, dst in pairs)


def test_no_import_cycle_spans_more_than_three_packages(graph: object) -> None:
    cycles = graph.cycles()  # type: ignore[attr-defined]
    too_large = [c for c in cycles if len(c) > 3]
    assert not too_large, (
        f"a cycle of {len(too_large[0])} packages: {', '.join(too_large[0])}; its imports:\n"
        + _sites(graph, [(a, b) for a in too_large[0] for b in too_large[0] if (a, b) in graph.sites]))  # type: ignore[attr-defined]


def test_every_package_is_on_a_floor_and_no_import_goes_up(graph: object) -> None:
    upward = graph.upward()  # type: ignore[attr-defined]
    assert not upward, ("imports that go up a floor (move what they need down, or pass it in as data; a new "
                        "package goes on a floor of tools/package_graph.py's FLOORS):\n"
                        + _sites(graph, [(src, dst) for src, dst, _ in upward]))


def test_the_leaves_import_nothing_from_chainlang(graph: object) -> None:
    leaves = package_graph.FLOORS[0][1]
    assert {"errors", "redaction", "version", "durations"} <= leaves
    found = {(src, dst) for (src, dst) in graph.sites if src in leaves}  # type: ignore[attr-defined]
    assert not found, _sites(graph, sorted(found))
    errors = [m for m in graph.module_imports["chainlang.errors"]]  # type: ignore[attr-defined]
    assert errors == [], errors


def test_the_run_imports_nothing_from_the_engines_serve_or_the_cli(graph: object) -> None:
    found = [("runtime", dst) for dst in ("engine", "serve", "cli") if ("runtime", dst) in graph.sites]  # type: ignore[attr-defined]
    assert not found, _sites(graph, found)


def _reachable(graph: object, start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph.module_imports.get(todo.pop(), ()):  # type: ignore[attr-defined]
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_check_pipeline_reaches_neither_the_task_system_nor_the_store(graph: object) -> None:
    """Every module the check pipeline imports, lazily or not, directly or through others."""
    reached = _reachable(graph, "chainlang.pipeline")
    assert "chainlang.checks" in reached and "chainlang.model.files" in reached
    behind = sorted(m for m in reached if m.split(".")[1] in {"tasks", "store", "runtime", "stdlib", "engine",
                                                                "journal", "serve", "cli"})
    assert not behind, behind


def test_the_command_prints_the_imports_the_floors_and_the_cycles() -> None:
    proc = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("  runtime -> journal ") for line in lines), proc.stdout
    assert "imports that go up a floor: 0" in lines and "cycles: 0" in lines
    assert lines[-1] == "largest: 1 package(s) (no cycle)"
    sites = subprocess.run([sys.executable, str(TOOL), "--sites", "runtime", "nowhere"], capture_output=True,
                           text=True, timeout=60, check=False)
    assert sites.returncode == 2 and "unknown package 'nowhere'" in sites.stderr


def test_the_tool_sees_a_cycle_through_lazy_and_type_only_imports(tmp_path: Path) -> None:
    """A tree of its own: a -> b at the top, b -> c inside a function, c -> a under
    TYPE_CHECKING, d -> a (outside the cycle); the cycle is found, the --max-cycle gate fails."""
    package = tmp_path / "chainlang"
    for name in ("a", "b", "c", "d"):
        (package / name).mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "a" / "__init__.py").write_text("from chainlang.b import thing\n", encoding="utf-8")
    (package / "b" / "__init__.py").write_text("def f():\n    from chainlang import c\n", encoding="utf-8")
    (package / "c" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n", encoding="utf-8")
    (package / "d" / "__init__.py").write_text("import chainlang.a.sub\n", encoding="utf-8")
    graph = package_graph.build_graph(tmp_path)
    assert graph.cycles() == [["a", "b", "c"]]
    assert [(s.target, s.lazy) for s in graph.sites[("b", "c")]] == [("chainlang.c", True)]
    assert [(s.target, s.lazy) for s in graph.sites[("c", "a")]] == [("chainlang.a", True)]
    assert graph.imports("d") == {"a": 1}
    gate = subprocess.run([sys.executable, str(TOOL), "--root", str(tmp_path), "--max-cycle", "2"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert gate.returncode == 1 and "a cycle spans more than 2 packages: a, b, c" in gate.stderr
    assert "3: a, b, c" in gate.stdout


def test_the_version_leaf_is_the_package_s_version() -> None:
    import chainlang
    from chainlang.version import __version__

    assert __version__ == chainlang.__version__


# -- stored hooks reach the check as data --------------------------------------------------

ORDERED = """\
hooks:
  - id: log-after-the-stored-one
    trigger: post:user.notify
    after: [tag-notices]
    action:
      - tools.now
"""


def test_stored_hooks_are_in_force_for_check_files_when_given(tmp_path: Path) -> None:
    """`after` may name a stored hook: check_files sees it when the caller passes the
    project's stored hooks, and does not open any store when it is not given one."""
    from chainlang.pipeline import check_files, load_file

    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "order.hooks.yaml").write_text(ORDERED, encoding="utf-8")
    stored = load_file(".chainlang/store.db#tag-notices", kind="hooks", text=(
        '{"hooks": [{"id": "tag-notices", "trigger": "pre:user.notify", "action": [{"tools.now": {}}]}]}\n'))
    roots: list[Path] = []

    def stored_hooks(root: Path) -> list[object]:
        roots.append(root)
        return [stored]

    given = check_files([tmp_path / "order.hooks.yaml"], stored_hooks=stored_hooks)  # type: ignore[arg-type]
    assert [d.rule for d in given.diagnostics] == [] and roots == [tmp_path]
    alone = check_files([tmp_path / "order.hooks.yaml"])
    assert [(d.rule, d.message) for d in alone.diagnostics] == [("CL042", "'after' names no hook 'tag-notices'")]
    assert not (tmp_path / ".chainlang").exists()


@pytest.mark.slow
def test_chainlang_check_reads_the_project_s_stored_hooks(tmp_path: Path) -> None:
    """End to end: a chain stores a hook (task.register); a hooks file orders itself after it;
    `chainlang check` passes the stored hooks to the pipeline, so the `after` resolves."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "chainlang", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "register.chain.yaml").write_text(
        "steps:\n  - task.register:\n      id: tag-notices\n      trigger: pre:user.notify\n"
        "      action:\n        - tools.now\n", encoding="utf-8")
    ran = cli("run", "register.chain.yaml")
    assert ran.returncode == 0, ran.stderr
    (tmp_path / "order.hooks.yaml").write_text(ORDERED, encoding="utf-8")
    checked = cli("check", "order.hooks.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "order.hooks.yaml").write_text(ORDERED.replace("tag-notices", "tag-notice"), encoding="utf-8")
    wrong = cli("check", "order.hooks.yaml")
    assert wrong.returncode == 1 and "did you mean 'tag-notices'?" in wrong.stdout, wrong.stdout
