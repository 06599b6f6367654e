"""Tools for the interpreter tests: each records what it did, so tests can count side effects."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from chainlang import event


def _log(ctx: Any, entry: dict[str, Any]) -> None:
    """Append one line to calls.jsonl in the run's state directory (the side effect tests count)."""
    path = Path(ctx.state_dir) / "calls.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": ctx.step, "event": ctx.event, "attempt": ctx.attempt, **entry}) + "\n")


@event("test.echo", description="Return the value given", idempotent=True)
def echo(value: Any = None, ctx: Any = None) -> Any:
    _log(ctx, {"value": value})
    return value


@event("test.add", description="Add two numbers", result={"type": "number"}, idempotent=True)
async def add(a: float, b: float) -> float:
    return a + b


@event("test.sleep", description="Sleep, then return the label", idempotent=True)
async def sleep(seconds: float, label: str = "", ctx: Any = None) -> str:
    _log(ctx, {"phase": "start", "label": label})
    await asyncio.sleep(seconds)
    _log(ctx, {"phase": "end", "label": label})
    return label


@event("test.fail", description="Always fail", idempotent=True)
def fail(message: str = "boom", ctx: Any = None) -> None:
    _log(ctx, {"failed": message})
    raise RuntimeError(message)


@event("test.flaky", description="Fail until the given attempt", idempotent=True)
def flaky(succeed_on: int, ctx: Any = None) -> int:
    _log(ctx, {})
    attempt = int(ctx.attempt)
    if attempt < succeed_on:
        raise ValueError(f"attempt {attempt} failed")
    return attempt


@event("test.send", description="A side effect that is not idempotent")
def send(to: str, ctx: Any = None) -> dict[str, Any]:
    _log(ctx, {"to": to, "key": ctx.idempotency_key})
    return {"sent": to}


@event("test.pid", description="Write the process id to a file, then sleep (for kill tests)", idempotent=True)
async def pid(path: str, seconds: float = 30.0) -> bool:
    Path(path).write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    return True


@event("test.progress", description="Report progress twice", idempotent=True)
async def progress(ctx: Any = None) -> str:
    ctx.progress("half way", 0.5)
    ctx.progress("done", 1.0)
    return "ok"


@event("test.not_json", description="Return a value that is not JSON", idempotent=True)
def not_json() -> Any:
    return {"when": object()}


@event("test.wrong_result", description="Return a result its schema rejects",
       result={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, idempotent=True)
def wrong_result() -> Any:
    return {"n": "three"}


@event("test.now", description="Read the run's clock twice", idempotent=True)
def now(ctx: Any = None) -> list[str]:
    return [ctx.now().isoformat(), ctx.now().isoformat()]


def _write_pid(path: Path) -> None:
    """Write this process's id to `path` in one step, so a test polling for the file reads it whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(str(os.getpid()), encoding="utf-8")
    os.replace(partial, path)


@event("test.pid_once", description="Write a pid file in the state directory, then sleep; return at once when "
                                    "the file was there already (a resumed attempt)", idempotent=True)
async def pid_once(name: str, seconds: float = 30.0, ctx: Any = None) -> str:
    marker = Path(ctx.state_dir) / name
    first = not marker.exists()
    _log(ctx, {"pid_file": name, "first": first, "key": ctx.idempotency_key})
    _write_pid(marker)
    if first:
        await asyncio.sleep(seconds)
    return "awake"


@event("test.slow_send", description="A slow side effect that is not idempotent: write a pid file in the state "
                                     "directory, then sleep (unless the file was there already), then send")
async def slow_send(to: str, name: str, seconds: float = 30.0, ctx: Any = None) -> dict[str, Any]:
    marker = Path(ctx.state_dir) / name
    first = not marker.exists()
    _log(ctx, {"to": to, "phase": "start", "key": ctx.idempotency_key})
    _write_pid(marker)
    if first:
        await asyncio.sleep(seconds)
    _log(ctx, {"to": to, "phase": "end", "key": ctx.idempotency_key})
    return {"sent": to}
