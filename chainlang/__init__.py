"""chainlang: a declarative YAML chain language for event-driven workflows.

The public API is imported lazily so that `chainlang --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
    "__version__",
]

if TYPE_CHECKING:
    from chainlang.pipeline import check_files, check_text
    from chainlang.diagnostics import Diagnostic
    from chainlang.registry.decorator import event
    from chainlang.registry.hooks import hook
    from chainlang.runtime.emit import EmitResult, emit, emit_async
    from chainlang.runtime.resume import resume, resume_async
    from chainlang.runtime.runner import RunResult, run, run_async

_LAZY = {
    "Diagnostic": ("chainlang.diagnostics", "Diagnostic"),
    "event": ("chainlang.registry.decorator", "event"),
    "hook": ("chainlang.registry.hooks", "hook"),
    "emit": ("chainlang.runtime.emit", "emit"),
    "emit_async": ("chainlang.runtime.emit", "emit_async"),
    "EmitResult": ("chainlang.runtime.emit", "EmitResult"),
    "check_files": ("chainlang.pipeline", "check_files"),
    "check_text": ("chainlang.pipeline", "check_text"),
    "run": ("chainlang.runtime.runner", "run"),
    "run_async": ("chainlang.runtime.runner", "run_async"),
    "resume": ("chainlang.runtime.resume", "resume"),
    "resume_async": ("chainlang.runtime.resume", "resume_async"),
    "RunResult": ("chainlang.runtime.runner", "RunResult"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'chainlang' has no attribute {name!r}")
