"""The `ctx` a tool gets (chainlang/runtime/tool_context.py, one builder for both engines;
the Temporal side: tests/test_temporal_messages.py): progress reports cleaned up the same
way from a sync tool (in a worker thread) and an async one, called as the reference says."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import cli, show

TOOLS = '''
from typing import Any

from chainlang import event


def _report(ctx: Any) -> None:
    ctx.progress("beyond the end", 2.0)
    ctx.progress("not a number", "half")
    ctx.progress("x" * 1500, 0.5)
    ctx.progress("by keyword", fraction=0.25)
    ctx.progress(42)


@event("t.sync_progress", description="report progress from a worker thread", idempotent=True)
def sync_progress(ctx: Any = None) -> str:
    _report(ctx)
    return ctx.idempotency_key


@event("t.async_progress", description="report progress on the event loop", idempotent=True)
async def async_progress(ctx: Any = None) -> str:
    _report(ctx)
    return ctx.idempotency_key
'''

CHAIN = """
steps:
  - t.sync_progress
  - t.async_progress
"""

REPORTS = [("beyond the end", None), ("not a number", None), ("x" * 1000, 0.5), ("by keyword", 0.25), ("42", None)]


def test_a_tool_s_progress_is_recorded_the_same_from_a_thread_and_the_loop(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "progress.chain.yaml").write_text(CHAIN, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
    proc = cli(tmp_path, "run", "progress.chain.yaml", "--transcript", "t.jsonl")
    assert proc.returncode == 0, show(proc)
    recs = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    for event in ("t.sync_progress", "t.async_progress"):
        reports = [(rec["message"], rec.get("fraction")) for rec in recs
                   if rec["type"] == "step_progress" and rec["event"] == event]
        assert reports == REPORTS, event
    keys = [rec["result"] for rec in recs if rec["type"] == "step_finished"]
    assert len(set(keys)) == 2 and all(isinstance(key, str) and key for key in keys)
