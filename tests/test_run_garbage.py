"""A finished run leaves no reference cycles behind (runtime/walk.py `ChainRun.release`).

Its objects (state, chain, step pipeline, hook actions, transcript writer, model service)
are then freed by reference counting the moment it ends. Left in cycles, they wait for the
garbage collector, whose passes over many runs in flight at once cost more CPU than the
runs themselves (benchmarks/runs_bench.py's burst, about 40 % of it before). Each case
runs once to warm up, then again with the collector saving what it finds unreachable:
it must find nothing.
"""

from __future__ import annotations

import asyncio
import gc
import textwrap
from pathlib import Path
from typing import Any

import pytest

import chainlang

CHAIN = """\
chainlang: 1
chain: app.tidy
inputs:
  n: {type: integer, default: 2}
steps:
  - {id: first, event: app.double, params: {n: "{inputs.n}"}}
  - id: each
    foreach: "[1, 2]"
    steps:
      - app.double: {n: "{item}"}
  - [{id: left, event: app.double, params: {n: 3}}, {id: right, event: app.double, params: {n: 4}}]
outputs:
  doubled: "{first.result}"
  each: "{each.result}"
"""

HOOKS = """\
events:
  app.pinged:
    description: Something happened.
    payload: {type: object, properties: {n: {type: integer}}, required: [n]}
hooks:
  - id: on-ping
    trigger: post:app.pinged
    action:
      - app.double: {n: "{n}"}
  - id: after-double
    trigger: post:app.double
    condition: event.result > 100
    action:
      - app.note: {text: "big: {event.result}"}
"""


def app_double(n: int) -> int:
    """Double a number (the event app.double)."""
    return n * 2


async def app_double_async(n: int) -> int:
    """Double a number, awaited (the event app.double)."""
    await asyncio.sleep(0)
    return n * 2


def app_note(text: str) -> str:
    """Note something down (the event app.note)."""
    return text


app_double_async.__name__ = "app_double"  # the same event's name (it comes from the function's)


def unreachable_after(root: Path, tool: Any, transcripts: str) -> list[str]:
    """The types of what the collector finds unreachable once a run of the chain and an emit
    ended, in a project opened once (after a first round to warm up: caches, schemas)."""
    kw = {"transcripts": "memory"} if transcripts == "memory" else {}

    async def round_(project: Any) -> None:
        ran = await project.chain("app.tidy").run({"n": 60})
        assert ran.status == "ok" and ran.outputs == {"doubled": 120, "each": [2, 4]}, ran
        emitted = await project.emit("app.pinged", {"n": 5})
        assert emitted.status == "ok" and emitted.fired, (emitted.fired, emitted.errors)

    async def body() -> None:
        async with await chainlang.open_project(root, tools=[tool, app_note], notify=lambda text: None, **kw) as project:
            await round_(project)
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                await round_(project)
                gc.collect()
            finally:
                gc.set_debug(0)

    gc.collect()
    gc.garbage.clear()
    asyncio.run(body())
    found = sorted({type(o).__name__ for o in gc.garbage})
    gc.garbage.clear()
    return found


def project_at(root: Path) -> Path:
    (root / "chainlang.toml").write_text('chains = ["chains"]\n', encoding="utf-8")
    (root / "chains").mkdir()
    (root / "chains" / "tidy.chain.yaml").write_text(CHAIN, encoding="utf-8")
    (root / "app.hooks.yaml").write_text(textwrap.dedent(HOOKS), encoding="utf-8")
    return root


@pytest.mark.parametrize("transcripts", ["memory", "files"])
@pytest.mark.parametrize("tool", [app_double, app_double_async], ids=["sync", "async"])
def test_a_run_and_an_emit_leave_no_cycles(tmp_path: Path, transcripts: str, tool: Any) -> None:
    """The chain's first step's post hook and the emit's hook run an action each."""
    assert unreachable_after(project_at(tmp_path), tool, transcripts) == []
