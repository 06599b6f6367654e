"""The entry points of every run, emit and resume — the CLI's, serve's and the Python
API's (`chainlang.run`, `chainlang.emit`, `chainlang.resume`): the runtime's, with the
project's engine (chainlang.engine.engine_for)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.engine import engine_for

if TYPE_CHECKING:
    from chainlang.runtime.emit import EmitResult
    from chainlang.runtime.runner import RunResult

__all__ = ["emit", "emit_async", "resume", "resume_async", "run", "run_async"]


async def run_async(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None,
                    **options: Any) -> "RunResult":
    """Run the chain at `path` on its project's engine (see chainlang.runtime.runner.run_async)."""
    from chainlang.runtime.runner import run_async as run_here

    return await run_here(path, inputs, engine_for=engine_for, **options)


async def emit_async(name: str, data: Any, **options: Any) -> "EmitResult":
    """Fire external event `name` on the project's engine (see chainlang.runtime.emit.emit_async)."""
    from chainlang.runtime.emit import emit_async as emit_here

    return await emit_here(name, data, engine_for=engine_for, **options)


async def resume_async(transcript: str | os.PathLike[str], **options: Any) -> "RunResult | EmitResult":
    """Continue the run or emit recorded in `transcript` — on the embedded engine; a project
    on Temporal refuses (its runs continue on the workers by themselves)."""
    from chainlang.runtime.resume import project_config, recorded_start, resume_async as resume_here

    where = Path(transcript)
    if not where.is_file():  # resume says what is wrong with the path
        return await resume_here(transcript, **options)
    file, emitted = recorded_start(where)
    engine = engine_for(project_config(Path(file) if emitted else Path(file).parent))
    result: "RunResult | EmitResult" = await engine.resume(where, **options)
    return result


def run(path: str | os.PathLike[str], inputs: dict[str, Any] | None = None, **options: Any) -> "RunResult":
    """`run_async` for code that has no event loop running (see calls.run_loop)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(run_async(path, inputs, **options))


def emit(name: str, data: Any, **options: Any) -> "EmitResult":
    """`emit_async` for code that has no event loop running."""
    from chainlang.runtime.calls import run_loop

    return run_loop(emit_async(name, data, **options))


def resume(transcript: str | os.PathLike[str], **options: Any) -> "RunResult | EmitResult":
    """`resume_async` for code that has no event loop running."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_async(transcript, **options))
