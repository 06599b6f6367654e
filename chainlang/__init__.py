"""chainlang: a declarative YAML chain language for event-driven workflows.

The public API is imported lazily so that `chainlang --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.version import __version__

__all__ = [
    "Diagnostic",
    "event",
    "hook",
    "emit",
    "emit_async",
    "EmitResult",
    "check_files",
    "check_text",
    "run",
    "run_async",
    "resume",
    "resume_async",
    "RunResult",
    "StepError",
    "__version__",
]

if TYPE_CHECKING:
    from chainlang.pipeline import check_files, check_text
    from chainlang.diagnostics import Diagnostic
    from chainlang.registry.decorator import event
    from chainlang.registry.hooks import hook
    from chainlang.engine.entry import emit, emit_async, resume, resume_async, run, run_async
    from chainlang.runtime.emit import EmitResult
    from chainlang.runtime.runner import RunResult
    from chainlang.runtime.step_error import StepError

_LAZY = {
    "Diagnostic": ("chainlang.diagnostics", "Diagnostic"),
    "event": ("chainlang.registry.decorator", "event"),
    "hook": ("chainlang.registry.hooks", "hook"),
    "emit": ("chainlang.engine.entry", "emit"),
    "emit_async": ("chainlang.engine.entry", "emit_async"),
    "EmitResult": ("chainlang.runtime.emit", "EmitResult"),
    "check_files": ("chainlang.pipeline", "check_files"),
    "check_text": ("chainlang.pipeline", "check_text"),
    "run": ("chainlang.engine.entry", "run"),
    "run_async": ("chainlang.engine.entry", "run_async"),
    "resume": ("chainlang.engine.entry", "resume"),
    "resume_async": ("chainlang.engine.entry", "resume_async"),
    "RunResult": ("chainlang.runtime.runner", "RunResult"),
    "StepError": ("chainlang.runtime.step_error", "StepError"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'chainlang' has no attribute {name!r}")
