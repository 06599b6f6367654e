"""Labelled Prometheus counters exist at 0 from serve's start (issue 21): a series that
appears only with its first increment makes `increase(chainlang_failures_total[15m]) > 0`
miss the first failure. Scraped from a fresh serve; and the docs' metrics table lists every
label value the code counts, and the code starts every one the docs list.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from chainlang.serve import metrics as serve_metrics
from tests.hooks_util import write, write_tools
from tests.serve_util import Servers, servers  # noqa: F401  (servers: a fixture)

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guides" / "tasks-and-serve.md"
LABELLED = {  # metric -> (label, the values it starts with)
    "chainlang_events_rejected_total": ("reason", serve_metrics.REJECT_REASONS),
    "chainlang_hook_firings_total": ("status", serve_metrics.HOOK_STATUSES),
    "chainlang_task_runs_total": ("status", serve_metrics.RUN_STATUSES),
    "chainlang_failures_total": ("kind", serve_metrics.FAILURE_KINDS),
    "chainlang_steps_total": ("status", serve_metrics.STEP_STATUSES),
}


def _documented(metric: str) -> set[str]:
    """The label values the guide's metrics table gives for `metric` (in backticks)."""
    (row,) = [line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{metric}{{")]
    what = row.split("|")[3]
    return set(re.findall(r"`([a-z_]+)`", what)) - {"kind", "event"} | set(re.findall(r'kind="([a-z]+)"', what))


def _counted_reasons() -> set[str]:
    """Every reason serve's code counts a refusal under."""
    found: set[str] = set()
    for source in (REPO / "chainlang" / "serve").glob("*.py"):
        text = source.read_text(encoding="utf-8")
        found |= set(re.findall(r'reason="([a-z_]+)"', text))
        found |= set(re.findall(r'Refusal\(\d{3}, "([a-z_]+)"', text))
        found |= set(re.findall(r'refused\("([a-z_]+)"', text))
    return found


def test_every_counted_reason_starts_at_zero_and_is_documented() -> None:
    counted = _counted_reasons()
    assert counted, "no reason found in chainlang/serve: the pattern above is out of date"
    assert counted <= set(serve_metrics.REJECT_REASONS), counted - set(serve_metrics.REJECT_REASONS)
    for metric, (_, values) in LABELLED.items():
        assert set(values) <= _documented(metric), (metric, set(values) - _documented(metric))


@pytest.mark.slow
def test_a_fresh_serve_has_every_labelled_counter_at_zero(tmp_path: Path, servers: Servers) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    write_tools(tmp_path)
    write(tmp_path, "chainlang.toml", 'tools = ["hk_tools.py"]\n')
    server = servers.start(tmp_path)
    text = server.get("/metrics").text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    for metric, (label, values) in LABELLED.items():
        for value in values:
            assert samples.get((metric, ((label, value),))) == 0.0, f"{metric}{{{label}={value!r}}} missing:\n{text}"
    assert samples.get(("chainlang_tasks_quarantined", ())) == 0.0
    if shutil.which("promtool"):  # the exposition as Prometheus' own linter reads it
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                                 timeout=30, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert server.stop() == 0, server.describe()
