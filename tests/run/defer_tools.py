"""Tools for tests/test_deferred_lines.py: idempotent steps whose records may share a write,
a side effect that must happen once, and a step that kills its own process.

`d.count` (idempotent) logs each call in counts.jsonl, so a test sees what a resume ran
again; `d.effect` (NOT idempotent) appends one line to effects.jsonl; `d.die` (idempotent)
SIGKILLs its process the first time (no await before: the event loop never turns between
its step_started and the kill), and returns the next time.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from chainlang import event


def _append(ctx: Any, name: str, entry: dict[str, Any]) -> None:
    path = Path(ctx.state_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode("utf-8"))  # one write(2): whole or not at all
    finally:
        os.close(fd)


@event("d.count", description="Count a call (idempotent)", idempotent=True)
async def count(n: int, ctx: Any = None) -> int:
    _append(ctx, "counts.jsonl", {"n": n, "step": ctx.step})
    return n


@event("d.effect", description="A side effect that must happen once", idempotent=False)
async def effect(ref: str, ctx: Any = None) -> str:
    _append(ctx, "effects.jsonl", {"ref": ref, "step": ctx.step})
    return ref


@event("d.die", description="SIGKILL the process the first time (idempotent)", idempotent=True)
async def die(ctx: Any = None) -> str:
    marker = Path(ctx.state_dir) / "died"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("1", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)
    return "back"
