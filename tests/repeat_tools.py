"""Tools of tests/test_repeat.py's resume-after-SIGKILL tests: an effect that happens at most
once per step attempt, and a gate a step waits at until the test opens it.

`gate.note` is NOT idempotent: it appends one line (its ref, step path and pid) to
`.chainlang/state/notes.jsonl` in one `write(2)` with O_APPEND, so a resumed run that ran a
finished pass again would show it twice. `gate.wait` is idempotent: it writes
`NAME.waiting` in the state directory and waits until `NAME.open` exists there, so a test
knows where the run is when it kills it.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from chainlang import event

NOTES = "notes.jsonl"


@event("gate.note", description="Note a ref once (one line of notes.jsonl)", idempotent=False,
       result={"type": "string"})
def note(ref: str, ctx: Any = None) -> str:
    path = Path(ctx.state_dir) / NOTES
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"ref": ref, "step": ctx.step, "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return ref


@event("gate.wait", description="Wait until the file NAME.open exists in the state directory", idempotent=True,
       result={"type": "string"})
async def wait(name: str, ctx: Any = None) -> str:
    state = Path(ctx.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / f"{name}.waiting").write_text(str(os.getpid()), encoding="utf-8")
    while not (state / f"{name}.open").exists():
        await asyncio.sleep(0.02)
    return name
