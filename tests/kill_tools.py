"""Tools of the project tests/test_serve_kill.py builds: side effects a test can count.

`k.record` is declared NOT idempotent: its effect (one line appended to
`.chainlang/state/effects.jsonl`: kind, ref, the step's idempotency key, the run id and the
pid) must happen at most once per step attempt, and a resume that finds its step started
without an end must stop (LANGUAGE.md §9) instead of running it again. It pauses before and
after the write (`before_ms`, `after_ms`), so that a SIGKILL can land on either side of the
effect. `k.pause` is idempotent: a pause a SIGKILL may cut, run again by a resume.

Each line goes to the file in one `write(2)` with O_APPEND, so a SIGKILL never leaves half
a line (a line is written, or it is not).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from chainlang import event

EFFECTS = "effects.jsonl"


@event("k.record", description="Record a side effect once (one line of the effects log)", idempotent=False,
       result={"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]})
async def record(kind: str, ref: str, before_ms: int = 0, after_ms: int = 0, ctx: Any = None) -> dict[str, Any]:
    if before_ms > 0:
        await asyncio.sleep(before_ms / 1000)
    path = Path(ctx.state_dir) / EFFECTS
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"kind": kind, "ref": ref, "key": ctx.idempotency_key, "run": ctx.run_id,
                       "step": ctx.step, "attempt": ctx.attempt, "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    if after_ms > 0:
        await asyncio.sleep(after_ms / 1000)
    return {"ref": ref}


@event("k.pause", description="Wait a moment (idempotent: nothing happens)", idempotent=True,
       result={"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]})
async def pause(ms: int = 0) -> dict[str, Any]:
    if ms > 0:
        await asyncio.sleep(ms / 1000)
    return {"ms": ms}
