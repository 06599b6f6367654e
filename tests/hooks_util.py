"""Helpers shared by the end-to-end tests of hooks at run time (tests/test_hooks_run.py)
and of `chainlang emit` (tests/test_emit.py).

Every test builds a project of its own in `tmp_path`: chain and hooks files, and the
tools module `TOOLS_SOURCE` written as `hk_tools.py`. The tools log what they do to
`.chainlang/state/log.jsonl` (one JSON object a line: step path, event, label, phase, a
wall-clock time and a counter), so a test can count side effects and see their order.
`t.wait` blocks until a file appears in the state directory: a test (or a later step,
`t.touch`) decides when it goes on, so nothing depends on sleeps being long enough.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.helpers import records_so_far as records  # here a transcript may be being written
from tests.helpers import show

WAIT = 30  # seconds for a background command to reach the point a test waits for

TOOLS_SOURCE = '''\
"""Tools for the hooks tests: each logs to .chainlang/state/log.jsonl."""

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from chainlang import event


def _log(ctx: Any, **entry: Any) -> None:
    path = Path(ctx.state_dir) / "log.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"step": ctx.step, "event": ctx.event, "t": time.time(), "pid": os.getpid(), **entry})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\\n")


@event("t.log", description="Log a label", idempotent=True,
       result={"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]})
def log(label: str, ctx: Any = None) -> dict:
    _log(ctx, label=label)
    return {"label": label}


@event("t.num", description="Log an integer", idempotent=True,
       result={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
def num(n: int, ctx: Any = None) -> dict:
    _log(ctx, label=f"num {n}", n=n)
    return {"n": n}


@event("t.quick", description="Log an integer without ever suspending (an async tool that returns at once: "
                               "the event loop runs nothing else meanwhile)", idempotent=True,
       result={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
async def quick(n: int, ctx: Any = None) -> dict:
    _log(ctx, label=f"quick {n}", n=n)
    return {"n": n}


@event("t.pair", description="An integer, and a value of any type", idempotent=True,
       result={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
def pair(n: int, extra: Any = None, ctx: Any = None) -> dict:
    _log(ctx, label=f"pair {n!r}", n=n)
    return {"n": n}


@event("t.say", description="Print a message on stdout", idempotent=True,
       result={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
def say(message: str, ctx: Any = None) -> dict:
    _log(ctx, label=message)
    print(message, flush=True)
    return {"message": message}


@event("t.sleep", description="Sleep, logging the start and the end", idempotent=True)
async def sleep(seconds: float, label: str, ctx: Any = None) -> dict:
    _log(ctx, label=label, phase="start")
    await asyncio.sleep(seconds)
    _log(ctx, label=label, phase="end")
    return {"label": label}


@event("t.wait", description="Wait until a file appears in the state directory", idempotent=True)
async def wait(name: str, label: str, ctx: Any = None) -> dict:
    _log(ctx, label=label, phase="start")
    marker = Path(ctx.state_dir) / name
    deadline = time.monotonic() + 60
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not appear")
        await asyncio.sleep(0.01)
    _log(ctx, label=label, phase="end")
    return {"label": label}


@event("t.touch", description="Create a file in the state directory", idempotent=True)
def touch(name: str, ctx: Any = None) -> dict:
    _log(ctx, label=f"touch {name}")  # first: whatever the file lets go on is logged after this
    marker = Path(ctx.state_dir) / name
    marker.write_text("go", encoding="utf-8")
    return {"name": name}


@event("t.fail", description="Always fail", idempotent=True)
def fail(message: str = "boom", ctx: Any = None) -> None:
    _log(ctx, label="fail", message=message)
    raise RuntimeError(message)
'''


# -- a project ---------------------------------------------------------------------------


def write(directory: Path, name: str, text: str) -> Path:
    """Write a (dedented) file of the project."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def write_tools(directory: Path) -> Path:
    return write(directory, "hk_tools.py", TOOLS_SOURCE)


def log(project: Path) -> list[dict[str, Any]]:
    """What the tools did, in order (empty when nothing ran)."""
    path = project / ".chainlang" / "state" / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def labels(project: Path) -> list[str]:
    return [entry["label"] + (f":{entry['phase']}" if "phase" in entry else "") for entry in log(project)]


# -- commands -----------------------------------------------------------------------------


def assert_clean(proc: Any, out: str | None = None, err: str | None = None) -> None:
    """No Python traceback, whatever happened."""
    out = proc.stdout if out is None else out
    err = proc.stderr if err is None else err
    assert "Traceback" not in out and "Traceback" not in err, show(proc, out, err)


def wait_for(proc: "subprocess.Popen[str]", what: str, ready: Callable[[], bool]) -> None:
    """Poll until `ready()`; fail the test (with the command's output) when the command
    ends first or WAIT passes."""
    deadline = time.monotonic() + WAIT
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"never reached: {what}\n" + show(proc, out, err))
        time.sleep(0.02)


def kill(proc: "subprocess.Popen[str]") -> tuple[str, str]:
    """SIGKILL the command (a crash: nothing of it runs after this); its output."""
    proc.kill()
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == -9, show(proc, out, err)
    return out, err


# -- transcripts --------------------------------------------------------------------------


def of_type(recs: list[dict[str, Any]], kind: str, **members: Any) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == kind and all(r.get(k) == v for k, v in members.items())]


def one(recs: list[dict[str, Any]], kind: str, **members: Any) -> dict[str, Any]:
    found = of_type(recs, kind, **members)
    assert len(found) == 1, f"{len(found)} {kind} records with {members}:\n" + "\n".join(map(str, recs))
    return found[0]


def seq(recs: list[dict[str, Any]], kind: str, **members: Any) -> int:
    return int(one(recs, kind, **members)["seq"])


def has(path: Path, kind: str, **members: Any) -> Callable[[], bool]:
    """For `wait_for`: the transcript at `path` has such a record."""
    return lambda: bool(of_type(records(path), kind, **members))


def validated(path: Path, root: Path) -> list[dict[str, Any]]:
    """The transcript read with the project's reader, its seals verified with the project's
    key, and every record decoded by the journal's schema (the reader types each line); the
    records, as JSON objects."""
    from chainlang.journal.integrity import load_key
    from chainlang.journal.jsonl import read_transcript

    transcript = read_transcript(path, key=load_key(root, create=False))
    assert not transcript.torn_tail
    return [entry.as_dict() for entry in transcript.records]


def transcript_of(stderr: str, cwd: Path) -> Path:
    """The transcript a command announced on stderr (`transcript: PATH`)."""
    found = re.findall(r"^transcript: (.+)$", stderr, re.MULTILINE)
    assert len(found) == 1, stderr
    path = Path(found[0])
    return path if path.is_absolute() else cwd / path


def runs(project: Path) -> list[Path]:
    """The transcripts in the project's default place."""
    return sorted((project / ".chainlang" / "runs").glob("*.jsonl"))
