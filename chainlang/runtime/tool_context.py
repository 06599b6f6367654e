"""The `ctx` a tool gets, built in one place for both engines: the embedded executor
(chainlang.runtime.invoke) and the Temporal tool activity (chainlang.engine.temporal.
activities) each say where the tool's clock readings, progress and notifications go; what
the tool sees, and how its reports are cleaned up, is decided here once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from chainlang.journal.values import idempotency_key
from chainlang.runtime.context import Clock, RunContext

__all__ = ["PROGRESS_TEXT_LIMIT", "build_tool_context", "progress_fraction"]

PROGRESS_TEXT_LIMIT = 1000  # characters of a progress message that are kept


def progress_fraction(fraction: Any) -> float | None:
    """A progress fraction as recorded: a number from 0 to 1, else None (not known)."""
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 <= fraction <= 1):
        return None
    return fraction


def _progress_args(message: Any, fraction: Any = None) -> tuple[Any, Any]:
    return message, fraction


def _notify_args(text: Any) -> Any:
    return text


def _checked(name: str, shape: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`shape(*args, **kwargs)`, or a TypeError naming the ctx call a tool got wrong (raised in
    the tool, so its step fails saying so; never in the event loop's thread, where the call
    is carried out later and an error could only be printed)."""
    try:
        return shape(*args, **kwargs)
    except TypeError as exc:
        why = str(exc).split("() ", 1)[-1]
        raise TypeError(f"ctx.{name}: {why}") from None


def build_tool_context(*, run_id: str, chain: str | None, event: str, step: str, attempt: int, clock: Clock,
                       state_dir: Path, report: Callable[[str, float | None], None],
                       notify: Callable[[Any], None], project: Path | None, registry: Any,
                       captured: dict[str, Any], models: Any, decider: Any,
                       allow: tuple[tuple[str, ...], ...] = ()) -> RunContext:
    """The tool's `ctx` for one attempt of step `step`. `report(message, fraction)` gets each
    progress report cleaned up (the message as text, cut to PROGRESS_TEXT_LIMIT; a fraction
    outside 0..1 as None), `notify` each notification, `clock` is the run's clock as the
    tool reads it."""

    def progress(*args: Any, **kwargs: Any) -> None:  # (message, fraction=None)
        message, fraction = _checked("progress(message, fraction=None)", _progress_args, args, kwargs)
        report(str(message)[:PROGRESS_TEXT_LIMIT], progress_fraction(fraction))

    def notify_user(*args: Any, **kwargs: Any) -> None:  # (text)
        notify(_checked("notify(text)", _notify_args, args, kwargs))

    return RunContext(
        run_id=run_id, chain=chain, step=step, event=event, attempt=attempt,
        idempotency_key=idempotency_key(run_id, step, attempt), clock=clock, state_dir=state_dir,
        progress=progress, notify=notify_user, project=project, registry=registry, captured=captured,
        models=models, decider=decider, allow=allow,
    )
