"""The built wheel works on its own (ARCHITECTURE.md: grammar/, schemas/ and
stdlib/ ship inside the package; a wheel in a clean venv must work).

Slow: one wheel build and one fresh venv per session (module-scoped
fixtures), about half a minute. Set CHAINLANG_SKIP_WHEEL=1 to skip.

The wheel is installed into a plain venv with pip, dependencies from the
package index. Without network access, pip cannot fetch the dependencies: the
fixture then installs the wheel with --no-deps and makes the running
environment's site-packages visible to the venv *after* its own (so chainlang
itself still comes from the wheel, and missing package data is still caught;
only a missing dependency declaration would go unnoticed), and says so with a
warning. CHAINLANG_WHEEL_OFFLINE=1 forces that path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.skipif(bool(os.environ.get("CHAINLANG_SKIP_WHEEL")), reason="CHAINLANG_SKIP_WHEEL is set"),
              pytest.mark.slow]  # the fast tier (make test-fast) leaves it out

DATA_FILES = [
    "chainlang/_data/grammar/expr.lark",
    "chainlang/_data/schemas/chain.schema.json",
    "chainlang/_data/stdlib/tools.yaml",
]


def chainlang_version() -> str:
    from chainlang.version import __version__

    return __version__


def run(cmd: list[str], cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NO_COLOR", "FORCE_COLOR", "CHAINLANG_DEBUG")}
    env["PYTHONIOENCODING"] = "utf-8"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False, text=True, encoding="utf-8", timeout=timeout)


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"$ {' '.join(map(str, proc.args))}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("wheel")
    proc = run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)])
    if proc.returncode != 0:  # an isolated build needs hatchling from the index: build with the one installed here
        try:
            import hatchling  # noqa: F401
        except ImportError:
            pytest.fail("building the wheel failed:\n" + describe(proc))
        proc = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)])
    assert proc.returncode == 0, describe(proc)
    (found,) = out.glob("chainlang-*.whl")
    return found


@dataclass(frozen=True)
class Venv:
    root: Path
    python: Path
    chainlang: Path


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("venv") / "env"
    proc = run([sys.executable, "-m", "venv", str(root)])
    assert proc.returncode == 0, describe(proc)
    bindir = root / ("Scripts" if sys.platform == "win32" else "bin")
    python = bindir / ("python.exe" if sys.platform == "win32" else "python")
    offline = bool(os.environ.get("CHAINLANG_WHEEL_OFFLINE"))
    if not offline:
        # --no-compile: the dependencies' bytecode is written as the tests import them, not all
        # of it up front (a third of the install's time)
        proc = run([str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)])
        if proc.returncode != 0:
            warnings.warn("pip could not install the wheel with its dependencies (offline?); "
                          "falling back to --no-deps + the running environment's packages:\n" + describe(proc))
            offline = True
    if offline:
        proc = run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
        assert proc.returncode == 0, describe(proc)
        site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
        (Path(site) / "zz_host_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    script = bindir / ("chainlang.exe" if sys.platform == "win32" else "chainlang")
    assert script.exists(), "the wheel installed no `chainlang` console script"
    return Venv(root, python, script)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory outside the repository, with a copy of examples/."""
    work = tmp_path_factory.mktemp("outside")
    shutil.copytree(REPO / "examples", work / "examples")
    return work


# -- the wheel's contents -----------------------------------------------------------


def test_wheel_contains_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in DATA_FILES:
        assert name in names
    for folder, pattern in (("grammar", "*.lark"), ("schemas", "*.json"), ("stdlib", "*.yaml")):
        expected = {f"chainlang/_data/{folder}/{p.name}" for p in (REPO / folder).glob(pattern)}
        assert expected and expected <= names, sorted(expected - names)
    # the rules' docs pages: the help of `check --format sarif` (output/rule_docs.py)
    pages = {f"chainlang/_data/checks/{p.name}" for p in (REPO / "docs" / "checks").glob("*.md")}
    assert pages and pages <= names, sorted(pages - names)
    assert "chainlang/py.typed" in names
    assert "chainlang/cli/main.py" in names
    assert not any(n.startswith(("tests/", "examples/", "chainlang/tests/")) for n in names)


def test_wheel_declares_the_console_script_and_dependencies(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        dist_info = next(n.split("/")[0] for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
    assert "chainlang = chainlang.cli:main" in entry_points
    requires = {
        re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", line.split(":", 1)[1].strip()).group().lower())  # type: ignore[union-attr]
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    assert {"lark", "ruamel-yaml", "jsonschema", "pydantic", "click", "jinja2", "google-re2"} <= requires, requires


# -- the installed wheel ------------------------------------------------------------


def test_installed_package_comes_from_the_wheel(venv: Venv, outside: Path) -> None:
    code = textwrap.dedent(
        """\
        import json, chainlang, chainlang.resources as r
        print(json.dumps({"file": chainlang.__file__, "version": chainlang.__version__,
                          "dirs": [str(r.data_dir(n)) for n in ("grammar", "schemas", "stdlib")]}))
        """
    )
    proc = run([str(venv.python), "-c", code], cwd=outside)
    assert proc.returncode == 0, describe(proc)
    info = json.loads(proc.stdout)
    root = venv.root.resolve()
    assert Path(info["file"]).resolve().is_relative_to(root), info
    for directory in info["dirs"]:
        path = Path(directory).resolve()
        assert path.is_relative_to(root) and path.parent.name == "_data", info


def test_the_installed_wheel_names_its_version_and_commit(venv: Venv, outside: Path) -> None:
    proc = run([str(venv.chainlang), "--version"], cwd=outside)
    assert proc.returncode == 0, describe(proc)
    head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%H %cs"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert proc.stdout == f"chainlang {chainlang_version()} (commit {head[0][:12]} {head[1]})\n", proc.stdout


def test_check_examples_outside_the_repo(venv: Venv, outside: Path) -> None:
    proc = run([str(venv.chainlang), "check", "examples/"], cwd=outside)
    assert proc.returncode == 0, describe(proc)
    assert "no problems" in proc.stdout
    assert proc.stderr == ""
    # the same output as the checkout gives on the same files
    here = run([sys.executable, "-m", "chainlang.cli", "check", "examples/"], cwd=outside)
    assert proc.stdout == here.stdout


def test_check_finds_errors_with_positions(venv: Venv, outside: Path) -> None:
    """Expressions (the grammar) and typed stdlib results (the declarations) work from the wheel."""
    chain = outside / "expr.chain.yaml"
    chain.write_text(
        textwrap.dedent(
            """\
            steps:
              - tools.now
              - if: "tools.now.hour > 12 and tools.now.weekday == 'Friday'"
                event: user.notify
                params: {message: "It is {tools.now.hourr} o'clock"}
              - if: "tools.now.hour >"
                event: user.notify
                params: {message: late}
            """
        ),
        encoding="utf-8",
    )
    proc = run([str(venv.chainlang), "check", "--format", "json", "expr.chain.yaml"], cwd=outside)
    assert proc.returncode == 1, describe(proc)
    items = json.loads(proc.stdout)
    got = [(d["line"], d["column"], d["rule"]) for d in items]
    assert got == [(5, 41, "CL026"), (6, 26, "CL020")], items
    assert items[0]["hint"] == "did you mean 'hour'?"
    here = run([sys.executable, "-m", "chainlang.cli", "check", "--format", "json", "expr.chain.yaml"], cwd=outside)
    assert proc.stdout == here.stdout


def test_schema_from_the_wheel(venv: Venv, outside: Path) -> None:
    proc = run([str(venv.chainlang), "schema"], cwd=outside)
    assert proc.returncode == 0, describe(proc)
    assert json.loads(proc.stdout) == json.loads((REPO / "schemas" / "chain.schema.json").read_text(encoding="utf-8"))


def test_events_and_describe_from_the_wheel(venv: Venv, outside: Path) -> None:
    proc = run([str(venv.chainlang), "events", "--json"], cwd=outside)
    assert proc.returncode == 0, describe(proc)
    names = {item["name"] for item in json.loads(proc.stdout)}
    assert {"tools.now", "tools.date_calc", "user.notify", "agent.decide"} <= names
    here = run([sys.executable, "-m", "chainlang.cli", "events", "--json"], cwd=outside)
    assert proc.stdout == here.stdout
    proc = run([str(venv.chainlang), "events"], cwd=outside)
    assert proc.returncode == 0 and "tools.now" in proc.stdout
    proc = run([str(venv.chainlang), "describe", "tools.now"], cwd=outside)
    assert proc.returncode == 0 and "weekday" in proc.stdout


def test_version_and_help_from_the_wheel(venv: Venv, outside: Path) -> None:
    import chainlang

    proc = run([str(venv.chainlang), "--version"], cwd=outside)
    assert proc.stdout.startswith(f"chainlang {chainlang.__version__} (commit ")  # the commit: test below
    proc = run([str(venv.chainlang), "--help"], cwd=outside)
    assert proc.returncode == 0 and proc.stdout.startswith("Usage: chainlang ")
