"""The params check (CL015/CL016) says the same with and without its jsonschema shortcuts.

Steps whose params are all literal skip jsonschema when the exact fast check accepts them;
steps with templated params skip it when the schema is a plain object, every required param is
given and the literal ones pass the fast check of their property schemas
(`_fast_valid_with_templates`). Either way the diagnostics must be those jsonschema gives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlang.pipeline import check_text, default_registry
from chainlang.checks import params

REPO = Path(__file__).resolve().parent.parent
GOLDEN_TOOLS = str(REPO / "tests" / "chains" / "golden_tools.py")
REGISTRY = default_registry([GOLDEN_TOOLS])
CHAINS = sorted(p for root in ("tests/chains", "examples", "docs") for p in (REPO / root).rglob("*.yaml")
                if p.name.endswith((".chain.yaml", ".hooks.yaml")))


def both_ways(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    fast = [str(d) for d in check_text(text, registry=REGISTRY)]
    with monkeypatch.context() as m:
        m.setattr(params, "_fast_valid_with_templates", lambda *args: False)
        m.setattr(params, "_fast_valid", lambda *args: False)
        slow = [str(d) for d in check_text(text, registry=REGISTRY)]
    return fast, slow


@pytest.mark.parametrize("path", CHAINS, ids=lambda p: str(p.relative_to(REPO)))
def test_chain_files(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = both_ways(path.read_text(encoding="utf-8", errors="replace"), monkeypatch)
    assert fast == slow


def test_there_are_chain_files() -> None:
    assert len(CHAINS) > 20


_TOOLS = sorted(spec.name for spec in REGISTRY.specs() if spec.kind == "tool" and spec.name != "chain.run")
_TEMPLATES = ["{tools.now.time}", "{tools.now.hour}", "{inputs.n}", "x {tools.now.weekday}", "{inputs.items}"]
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=5,
)


@st.composite
def _steps(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(_TOOLS))
    spec = REGISTRY.get(name)
    assert spec is not None
    known = list((spec.params_schema or {}).get("properties") or {})
    keys = draw(st.lists(st.sampled_from(known + ["other", "x"]) if known else st.sampled_from(["other", "x"]),
                         max_size=4, unique=True))
    values = {key: draw(st.one_of(_json, st.sampled_from(_TEMPLATES))) for key in keys}
    return name + ": " + json.dumps(values, ensure_ascii=False)


@pytest.mark.slow  # hypothesis-generated: the full suite runs it, make test-fast does not
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(step=_steps())
def test_generated_steps(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = f"inputs:\n  n: {{type: integer, default: 1}}\n  items: {{type: array, default: []}}\nsteps:\n  - tools.now\n  - {step}\n"
    fast, slow = both_ways(text, monkeypatch)
    assert fast == slow, text


def test_generated_steps_have_tools() -> None:
    assert len(_TOOLS) > 10


def test_a_small_check_does_not_import_jsonschema(tmp_path: Path) -> None:
    chain = tmp_path / "small.chain.yaml"
    chain.write_text("steps:\n  - tools.now\n  - user.notify: {message: \"It is {tools.now.time}\"}\n"
                     "  - memory.search: {query: \"{tools.now.weekday}\", scope: recent}\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from chainlang.pipeline import check_files\n"
        f"result = check_files([{str(chain)!r}])\n"
        "assert not result.diagnostics, result.diagnostics\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'pydantic')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "[]\n", proc.stdout + proc.stderr


def test_templated_params_still_find_literal_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "steps:\n  - tools.now\n  - memory.search: {query: \"{tools.now.time}\", scope: 3}\n"
    fast, slow = both_ways(text, monkeypatch)
    assert fast == slow and any("scope" in d for d in fast), fast
    text = "steps:\n  - tools.now\n  - user.notify: {level: \"{tools.now.time}\"}\n"
    fast, slow = both_ways(text, monkeypatch)
    assert fast == slow and any("message" in d for d in fast), fast
