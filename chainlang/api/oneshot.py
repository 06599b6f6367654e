"""The one-shot conveniences `chainlang.run`, `emit` and `resume` (and their `_async`
forms): each opens the project, checks the chain or the hooks, and runs once. An
application that runs the same chains again and again opens the project once instead
(`chainlang.open_project`). What they read from disk is read in a worker thread, so the
caller's event loop does not wait on it.

Unlike `project.chain(...)`, a chain with errors is not raised here but returned with
status `invalid` and its `diagnostics` (`raise_on_failure=True` or
`result.raise_for_status()` raise ChainInvalid)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime

    from chainlang.registry.objects import ToolSource
    from chainlang.runtime.emit import EmitResult
    from chainlang.runtime.prepare import Prepared
    from chainlang.runtime.runner import RunResult

__all__ = ["Tools", "emit", "emit_async", "resume", "resume_async", "resume_emit", "resume_emit_async", "resume_run",
           "resume_run_async", "run", "run_async"]

#: `tools=`: a list or tuple (a bare string is refused: `tools=["mytools.py"]`)
Tools = Union[list["ToolSource"], tuple["ToolSource", ...]]
ORIGIN = "given with tools="


def _tools(tools: object) -> list["ToolSource"]:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        shown = f" {tools!r}" if isinstance(tools, str) else ""
        raise UsageError(f"tools= takes a list (e.g. tools=[greet, 'mypkg.tools']), not {type(tools).__name__}{shown}")
    return list(tools)


def _refs(tools: Sequence["ToolSource"]) -> list[str]:
    return [t for t in tools if isinstance(t, str)]


def _prepare(path: str | os.PathLike[str], tools: list["ToolSource"]) -> "Prepared":
    from chainlang.pipeline import load_file
    from chainlang.runtime.prepare import chain_file, prepare_loaded, project_base

    chain_path = chain_file(path)
    base = project_base(chain_path.parent, tools, origin=ORIGIN)
    return prepare_loaded(base, load_file(os.fspath(path)), chain_path)


async def run_async(path: str | os.PathLike[str], inputs: Mapping[str, Any] | None = None, *, tools: Tools = (),
                    now: "datetime | str | None" = None, transcript: str | os.PathLike[str] | None = None,
                    thread: str | None = None, notify: Callable[[str], None] | None = None, decider: Any = None,
                    detach: bool = False, answers: Mapping[str, Any] | None = None,
                    raise_on_failure: bool = False) -> "RunResult":
    """Run the chain file at `path` once with `inputs` and return how it ended (see
    `Chain.run` for the options). `tools`: functions, modules, module names or `.py`
    files, besides those of the project's chainlang.toml. A failing run is a status
    unless `raise_on_failure`; bad inputs raise InputError, a bad path or tools UsageError."""
    from chainlang.engine import engine_for
    from chainlang.runtime.runner import start_run

    given = _tools(tools)
    if inputs is not None and not isinstance(inputs, Mapping):
        raise UsageError(f"inputs must be a dict of input names to values, not {type(inputs).__name__}")
    prepared = await asyncio.to_thread(_prepare, path, given)
    result = await start_run(prepared, engine_for(prepared.config), dict(inputs or {}), now=now,
                             transcript=transcript, tools=_refs(given), notify=notify, decider=decider,
                             thread=thread, detach=detach, answers=dict(answers) if answers else None)
    if raise_on_failure:
        result.raise_for_status()
    return result


async def emit_async(event: str, data: Any = None, *, project: str | os.PathLike[str] | None = None,
                     id: str | None = None, tools: Tools = (), now: "datetime | str | None" = None,
                     transcript: str | os.PathLike[str] | None = None, notify: Callable[[str], None] | None = None,
                     decider: Any = None, raise_on_failure: bool = False) -> "EmitResult":
    """Fire external event `event` with payload `data` once in the project at `project`
    (default: the working directory): the `post:` hooks on it run, the runs waiting for it
    get it. `id` makes it idempotent (an id seen before is a `duplicate`)."""
    from chainlang.engine import engine_for
    from chainlang.runtime.emit import emit_async as emit_here, load_project

    given = _tools(tools)
    start = Path(project) if project is not None else Path.cwd()
    if not start.is_dir():
        raise UsageError(f"project={os.fspath(start)!r}: not a directory (the project to emit in)")

    def load() -> Any:
        from chainlang.pipeline import default_registry

        return load_project(start, (), default_registry(given, start, origin=ORIGIN))

    loaded = await asyncio.to_thread(load)
    result = await emit_here(event, {} if data is None else data, id=id, project=start, tools=_refs(given),
                             registry=loaded.registry, now=now, transcript=transcript, notify=notify,
                             decider=decider, engine_for=engine_for, loaded=loaded)
    if raise_on_failure:
        result.raise_for_status()
    return result


async def resume_async(transcript: str | os.PathLike[str], *, tools: Tools | None = None,
                       rerun: Sequence[str] = (), skip: Sequence[str] = (), notify: Callable[[str], None] | None = None,
                       decider: Any = None, detach: bool = False, answers: Mapping[str, Any] | None = None,
                       raise_on_failure: bool = False) -> "RunResult | EmitResult":
    """Continue the interrupted run or emit recorded in `transcript`: steps (or hook
    actions) that finished are not run again. `resume_run_async`/`resume_emit_async`
    say which one they expect and are typed accordingly."""
    from chainlang.engine.entry import resume_async as resume_here

    if isinstance(rerun, str) or isinstance(skip, str):
        raise UsageError("rerun= and skip= take lists of step ids or paths, e.g. rerun=['send']")
    options: dict[str, Any] = {"rerun": list(rerun), "skip": list(skip), "notify": notify, "decider": decider,
                               "detach": detach}
    if tools is not None:
        given = _tools(tools)
        if any(not isinstance(t, str) for t in given):
            from chainlang.pipeline import default_registry

            where = Path(transcript).parent
            options["registry"] = await asyncio.to_thread(default_registry, given, where, origin=ORIGIN)
        options["tools"] = _refs(given)
    if answers:
        options["answers"] = dict(answers)
    result: "RunResult | EmitResult" = await resume_here(transcript, **options)
    if raise_on_failure:
        result.raise_for_status()
    return result


async def resume_run_async(transcript: str | os.PathLike[str], *, tools: Tools | None = None,
                           rerun: Sequence[str] = (), skip: Sequence[str] = (),
                           notify: Callable[[str], None] | None = None, decider: Any = None, detach: bool = False,
                           answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
    """`resume_async` of a run's transcript (UsageError for an emit's)."""
    from chainlang.api.project import refuse_other_kind
    from chainlang.runtime.runner import RunResult

    await asyncio.to_thread(refuse_other_kind, Path(transcript), "run")
    result = await resume_async(transcript, tools=tools, rerun=rerun, skip=skip, notify=notify, decider=decider,
                                detach=detach, answers=answers, raise_on_failure=raise_on_failure)
    if not isinstance(result, RunResult):
        raise UsageError(f"{os.fspath(transcript)} is the transcript of an emit: continue it with resume_emit()")
    return result


async def resume_emit_async(transcript: str | os.PathLike[str], *, tools: Tools | None = None,
                            notify: Callable[[str], None] | None = None, decider: Any = None,
                            raise_on_failure: bool = False) -> "EmitResult":
    """`resume_async` of an emit's transcript (UsageError for a run's)."""
    from chainlang.api.project import refuse_other_kind
    from chainlang.runtime.emit import EmitResult

    await asyncio.to_thread(refuse_other_kind, Path(transcript), "emit")
    result = await resume_async(transcript, tools=tools, notify=notify, decider=decider,
                                raise_on_failure=raise_on_failure)
    if not isinstance(result, EmitResult):
        raise UsageError(f"{os.fspath(transcript)} is the transcript of a run: continue it with resume_run()")
    return result


def run(path: str | os.PathLike[str], inputs: Mapping[str, Any] | None = None, *, tools: Tools = (),
        now: "datetime | str | None" = None, transcript: str | os.PathLike[str] | None = None,
        thread: str | None = None, notify: Callable[[str], None] | None = None, decider: Any = None,
        detach: bool = False, answers: Mapping[str, Any] | None = None, raise_on_failure: bool = False) -> "RunResult":
    """`run_async` for code without an event loop (inside one, await `run_async`)."""
    from chainlang.runtime.calls import run_loop

    return run_loop(run_async(path, inputs, tools=tools, now=now, transcript=transcript, thread=thread,
                              notify=notify, decider=decider, detach=detach, answers=answers,
                              raise_on_failure=raise_on_failure))


def emit(event: str, data: Any = None, *, project: str | os.PathLike[str] | None = None, id: str | None = None,
         tools: Tools = (), now: "datetime | str | None" = None, transcript: str | os.PathLike[str] | None = None,
         notify: Callable[[str], None] | None = None, decider: Any = None,
         raise_on_failure: bool = False) -> "EmitResult":
    """`emit_async` for code without an event loop."""
    from chainlang.runtime.calls import run_loop

    return run_loop(emit_async(event, data, project=project, id=id, tools=tools, now=now, transcript=transcript,
                               notify=notify, decider=decider, raise_on_failure=raise_on_failure))


def resume(transcript: str | os.PathLike[str], *, tools: Tools | None = None, rerun: Sequence[str] = (),
           skip: Sequence[str] = (), notify: Callable[[str], None] | None = None, decider: Any = None,
           detach: bool = False, answers: Mapping[str, Any] | None = None,
           raise_on_failure: bool = False) -> "RunResult | EmitResult":
    """`resume_async` for code without an event loop."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_async(transcript, tools=tools, rerun=rerun, skip=skip, notify=notify, decider=decider,
                                 detach=detach, answers=answers, raise_on_failure=raise_on_failure))


def resume_run(transcript: str | os.PathLike[str], *, tools: Tools | None = None, rerun: Sequence[str] = (),
               skip: Sequence[str] = (), notify: Callable[[str], None] | None = None, decider: Any = None,
               detach: bool = False, answers: Mapping[str, Any] | None = None,
               raise_on_failure: bool = False) -> "RunResult":
    """`resume_run_async` for code without an event loop."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_run_async(transcript, tools=tools, rerun=rerun, skip=skip, notify=notify,
                                     decider=decider, detach=detach, answers=answers,
                                     raise_on_failure=raise_on_failure))


def resume_emit(transcript: str | os.PathLike[str], *, tools: Tools | None = None,
                notify: Callable[[str], None] | None = None, decider: Any = None,
                raise_on_failure: bool = False) -> "EmitResult":
    """`resume_emit_async` for code without an event loop."""
    from chainlang.runtime.calls import run_loop

    return run_loop(resume_emit_async(transcript, tools=tools, notify=notify, decider=decider,
                                      raise_on_failure=raise_on_failure))
