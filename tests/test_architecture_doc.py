"""docs/contributing/architecture.md describes the house as the code has it: its table of
floors is tools/package_graph.py's, and the names it gives exist where it says."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "contributing" / "architecture.md"
sys.path.insert(0, str(ROOT / "tools"))

import package_graph  # noqa: E402  (tools/, not a package)


def _floors_in_page() -> dict[int, set[str]]:
    floors: dict[int, set[str]] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*(\d+)\s*\|[^|]*\|(?P<packages>[^|]*)\|$", line)
        if match:
            floors[int(match.group(1))] = set(re.findall(r"`([a-z_]+)`", match.group("packages")))
    return floors


def test_the_page_s_floors_are_the_code_s() -> None:
    assert _floors_in_page() == {number: set(members) for number, (_, members) in enumerate(package_graph.FLOORS)}


@pytest.mark.parametrize("module, names", [
    ("chainlang.runtime.host", ["RunSpec", "RunHost", "RunEnd", "open_run", "begin", "drive", "limits_graph"]),
    ("chainlang.runtime.engine", ["Engine", "RunJob", "FireJob", "embedded_only"]),
    ("chainlang.runtime.embedded", ["EmbeddedEngine", "EMBEDDED"]),
    ("chainlang.runtime.session", ["Session"]),
    ("chainlang.runtime.admission", ["new_run_id", "take_lock", "project_key", "run_secrets"]),
    ("chainlang.engine", ["engine_for"]),
    ("chainlang.engine.entry", ["run_async", "emit_async", "resume_async"]),
    ("chainlang.config.engine_kind", ["engine_kind"]),
    ("chainlang.status", ["retryable", "EXIT_CODES"]),
    ("chainlang.errors", ["UsageError", "RunInUse"]),
])
def test_the_names_the_page_gives_exist(module: str, names: list[str]) -> None:
    loaded = importlib.import_module(module)
    assert [name for name in names if not hasattr(loaded, name)] == []


def test_the_engine_protocol_has_the_methods_the_page_lists() -> None:
    from chainlang.runtime.embedded import EmbeddedEngine
    from chainlang.runtime.engine import Engine

    listed = re.findall(r"^\| `(\w+)\(", PAGE.read_text(encoding="utf-8"), re.M)
    assert listed == ["decider", "run", "fire", "resume", "ended"]
    for name in listed:
        assert callable(getattr(Engine, name)) and callable(getattr(EmbeddedEngine, name))
    try:
        from chainlang.engine.temporal.engine import TemporalEngine
    except ImportError:  # the Temporal SDK is an extra
        return
    for name in listed:
        assert callable(getattr(TemporalEngine, name))
