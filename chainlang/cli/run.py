"""The bodies of `chainlang run` and `chainlang resume` (the click wiring is in cli.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence, cast

from chainlang.runtime.emit import finite_float

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.output.progress import Mode


def parse_inputs(pairs: Sequence[str]) -> dict[str, Any]:
    """`--input NAME=VALUE`: VALUE is JSON when it parses as JSON, else the text itself."""
    inputs: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--input {pair!r}: expected NAME=VALUE, e.g. --input topic=\"launch\" or --input days=3")
        if name in inputs:
            raise UsageError(f"--input {name} is given twice")
        try:
            inputs[name] = json.loads(text, parse_constant=_no_constant, parse_float=finite_float)
        except ValueError:
            inputs[name] = text
    return inputs


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN / Infinity: keep the text


def run_command(file: str, input_pairs: Sequence[str], as_json: bool, transcript: str | None, now: str | None,
                tools: Sequence[str], progress: str, color: bool | None, thread: str | None = None,
                detach: bool = False, answer_pairs: Sequence[str] = ()) -> int:
    from chainlang.engine.entry import run_async
    from chainlang.runtime.admission import parse_now
    from chainlang.runtime.scripted_answers import parse_answers

    inputs = parse_inputs(input_pairs)
    answers = parse_answers(answer_pairs)
    pinned = parse_now(now)
    view = _progress(progress, color)
    return _drive(lambda announce: run_async(file, inputs, now=pinned, transcript=transcript, tools=tools,
                                             progress=view, on_transcript=announce, thread=thread, detach=detach,
                                             answers=answers),
                  as_json, color,
                  progress == "quiet")


def resume_command(transcript: str, as_json: bool, tools: Sequence[str], rerun: Sequence[str], skip: Sequence[str],
                   progress: str, color: bool | None, detach: bool = False, answer_pairs: Sequence[str] = ()) -> int:
    from chainlang.engine.entry import resume_async
    from chainlang.runtime.scripted_answers import parse_answers

    answers = parse_answers(answer_pairs)
    view = _progress(progress, color)
    return _drive(lambda announce: resume_async(transcript, tools=list(tools) or None, rerun=rerun, skip=skip,
                                                progress=view, on_transcript=announce, detach=detach,
                                                **({"answers": answers} if answers else {})),
                  as_json, color,
                  progress == "quiet")


def _progress(mode: str, color: bool | None) -> Any:
    from chainlang.output.progress import make_progress

    return make_progress(sys.stderr, cast("Mode", mode), color=color)


def _drive(start: Callable[[Callable[[Path], None]], Awaitable[Any]], as_json: bool, color: bool | None,
           quiet: bool) -> int:
    """Run on a fresh event loop; SIGINT and SIGTERM cancel the run, which then records
    itself as interrupted (resumable) before the process exits. Why a run did not end ok
    is always said on stderr: by the progress view, or here when it is quiet."""
    where: list[Path] = []

    def announce(path: Path) -> None:
        where.append(path)
        _err(f"transcript: {_shown(path)}")

    async def main() -> Any:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, task.cancel)
            except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
                pass
        return await start(announce)

    from chainlang.runtime.calls import run_loop
    from chainlang.runtime.emit import EmitResult

    try:
        result = run_loop(main())
    except (asyncio.CancelledError, KeyboardInterrupt):
        from chainlang.engine import remote_engine_used

        if where and remote_engine_used():
            _err(f"stopped following; the run goes on on Temporal's workers (workflow id {where[0].stem}), "
                 f"and {_shown(where[0])} has its records up to here")
        elif where:
            _err(f"interrupted; continue with: chainlang resume {_shown(where[0])}")
        return _leave(130)
    if isinstance(result, EmitResult):
        return _leave(report_emit(result, as_json, color))
    if result.status == "invalid":
        _err(result.secrets.mask(_diagnostics_text(result, color)))
        files = {d.file for d in result.diagnostics if d.severity == "error"}
        others = len(files - {str(p) for p in list(result.sources)[:1]})
        _err("the chain has errors: it was not started" if not others else
             "the hooks in force (hooks files of the project, or registered in Python) have errors: the chain was not started")
        return 1
    # the outputs are masked by the run already (result.secrets); what is left is text that
    # stdout must be able to encode whatever a tool returned
    if as_json:
        _out(lambda as_ascii: json.dumps(result.outputs, ensure_ascii=as_ascii) + "\n")
    elif result.outputs:
        _out(lambda as_ascii: "".join(f"{_ascii(name) if as_ascii else name}: "
                                      f"{json.dumps(value, ensure_ascii=as_ascii)}\n"
                                      for name, value in result.outputs.items()))
    sys.stdout.flush()
    if result.status == "interrupted" and result.error and result.error.get("type") == "unsafe_resume":
        _err(f"stopped: {result.error['message']}")
    elif result.status == "waiting" and result.error:
        _err(waiting_text(result.error, where[0] if where else None))
    elif quiet and not result.ok and result.error:
        _err(f"run {result.status}: {_why(result.error)}")
    return _leave(int(result.exit_code))


def emit_command(name: str, data_text: str, key: str | None, as_json: bool, transcript: str | None,
                 now: str | None, tools: Sequence[str], progress: str, color: bool | None) -> int:
    from chainlang.engine.entry import emit_async
    from chainlang.runtime.admission import parse_now

    try:
        data = json.loads(data_text, parse_constant=_no_constant, parse_float=finite_float)
    except ValueError as exc:
        raise UsageError(f"--data: not JSON ({exc}); give the payload as a JSON object, e.g. "
                         "--data '{\"sender\": \"Sarah\", \"subject\": \"budget\"}'") from None
    pinned = parse_now(now)
    view = _progress(progress, color)

    def start(announce: Callable[[Path], None]) -> Awaitable[Any]:
        return emit_async(name, data, id=key, now=pinned, transcript=transcript, tools=tools, progress=view,
                          on_transcript=announce)

    return _drive(start, as_json, color, progress == "quiet")


def report_emit(result: Any, as_json: bool, color: bool | None) -> int:
    """What `chainlang emit` prints: the hooks that fired and how they ended (stdout), or
    why nothing ran (stderr)."""
    if as_json:
        body = {"run_id": result.run_id, "event": result.event, "status": result.status, "fired": result.fired,
                "error": result.error, "transcript": str(result.transcript) if result.transcript else None}
        if result.errors:
            body["errors"] = result.errors
        if result.previous:
            body["previous"] = result.previous
        if getattr(result, "delivered", None):  # the waiting runs it went to (§15)
            body["delivered"] = result.delivered
        _out(lambda as_ascii: json.dumps(body, ensure_ascii=as_ascii) + "\n")
    if result.status == "invalid":
        if result.errors:
            _err(f"{result.event}: the data does not match the payload declared for it:")
            for problem in result.errors[:20]:
                _err(f"  - {problem}")
        else:
            _err(_diagnostics_text(result, color))
            _err("the project's hooks have errors: nothing was fired")
        return 1
    if result.status == "duplicate":
        prev = result.previous or {}
        _err(f"already processed: this --id was emitted before as run {prev.get('run_id')} "
             f"({prev.get('status')}); nothing fired again")
        return 0
    if not as_json:
        if not result.fired:
            _out(lambda _a: f"emit {result.event}: no hook fired\n")
        else:
            shown = len(result.fired)
            _out(lambda _a: f"emit {result.event}: {shown} hook{'s' if shown != 1 else ''} fired\n")
            for item in result.fired:
                _out(functools.partial(_item_line, item))
        for went in getattr(result, "delivered", None) or []:  # the waiting runs it went to (§15)
            _out(functools.partial(_delivered_line, went))
    sys.stdout.flush()
    if result.error and result.status != "failed":
        _err(f"emit {result.status}: {_why(result.error)}")
    return int(result.exit_code)


def _delivered_line(item: dict[str, Any], as_ascii: bool) -> str:
    from chainlang.diagnostics import visible

    text = f"  delivered to run {item.get('run_id')} waiting at step {item.get('step')}"
    return visible(_ascii(text) if as_ascii else text) + "\n"


def _item_line(item: dict[str, Any], as_ascii: bool) -> str:
    return _firing_line(item, as_ascii) + "\n"


def _firing_line(item: dict[str, Any], as_ascii: bool) -> str:
    from chainlang.diagnostics import visible
    from chainlang.output.progress.format import _duration

    status = item.get("status")
    mark = {"ok": "✓", "failed": "✗", "dropped": "-", "cancelled": "⊘"}.get(str(status), "?")
    if as_ascii:
        mark = {"ok": "ok", "failed": "x", "dropped": "-", "cancelled": "c"}.get(str(status), "?")
    text = f"  {mark} {item.get('hook')} {status}"
    if status == "dropped":
        text += f" ({item.get('reason')}: {item.get('message')})"
    elif item.get("error"):
        text += f": {item['error'].get('message', '')}"
    elif item.get("duration_ms") is not None:
        text += f" in {_duration(item['duration_ms'])}"
    return visible(_ascii(text) if as_ascii else text)


def waiting_text(error: dict[str, Any], transcript: Path | None) -> str:
    """What `run --detach` says when the run ends at a wait (the progress view said what it
    waits for, and the question of a user.ask): how it goes on, on this project's engine."""
    from chainlang.engine import remote_engine_used
    from chainlang.output.progress.format import answer_command

    question = error.get("question")
    how = (f"answer it ({answer_command(question)})" if isinstance(question, dict)
           else f"emit {error.get('event')}")
    if remote_engine_used():
        return (f"the run waits at step {error.get('step')} on Temporal's workers (exit 4): {how}, and its workflow "
                "goes on by itself; chainlang waits list shows it")
    shown = _shown(transcript) if transcript is not None else "TRANSCRIPT"
    return (f"the run waits at step {error.get('step')} (exit 4): {how}; chainlang serve then continues it, or "
            f"continue it here with: chainlang resume {shown}")


IN_PROCESS = False  # set by a host that runs commands inside itself (chaintest): never exit under it


def _leave(code: int) -> int:
    """The exit code, once the run is over (its transcript closed, everything said). When
    a tool left something running that could keep the process alive or run tool code at
    exit (an abandoned call, a task that ignored its cancellation, a thread that is not a
    daemon), the process exits now, with `os._exit`, after flushing stdout and stderr;
    except in a host that runs the command in its own process (`IN_PROCESS`), where an
    executor thread still winding down must not end the host."""
    from chainlang.runtime.calls import left_behind

    me = threading.current_thread()
    if IN_PROCESS:
        return code
    if left_behind() or any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    return code


def _out(text: Callable[[bool], str]) -> None:
    """Write `text(False)` to stdout, JSON text with lone surrogates escaped (see
    chainlang.redaction.escape_surrogates); on a stdout that cannot encode it (a
    narrow PYTHONIOENCODING), `text(True)`: JSON with every non-ASCII character escaped."""
    from chainlang.redaction import escape_surrogates

    try:
        sys.stdout.write(escape_surrogates(text(False)))
    except UnicodeEncodeError:  # raised before anything is written
        sys.stdout.write(text(True))


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _why(error: dict[str, Any]) -> str:
    from chainlang.diagnostics import visible

    where = f"step {error['step']}" if error.get("step") else ""
    if error.get("event"):
        where += f" ({error['event']})"
    limit = f"limit {error['limit']}: " if error.get("limit") else ""
    text = f"{limit}{error.get('message', '')}"
    return visible(f"{where}: {text}" if where else text)


def _diagnostics_text(result: Any, color: bool | None) -> str:
    from chainlang.output import render

    use_color = _use_color(sys.stderr) if color is None else color
    return str(render(result.diagnostics, "text", result.sources, color=use_color, files_checked=1)).rstrip("\n")


def _use_color(stream: Any) -> bool:
    from chainlang.output.terminal import use_color

    return use_color(stream)


def _shown(path: Path) -> str:
    from chainlang.config.project import display_path

    return display_path(path)


def _err(text: str) -> None:
    from chainlang.redaction import escape_surrogates

    sys.stderr.write(escape_surrogates(text) + "\n")
    sys.stderr.flush()
