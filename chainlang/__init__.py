"""chainlang: a declarative YAML chain language for event-driven workflows.

The public API is imported lazily so that `chainlang --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.dataclass_methods import install_when_imported as _install_dataclass_methods
from chainlang.version import __version__

_install_dataclass_methods()  # before any class of the package is made (chainlang/dataclass_methods/)

__all__ = [
    "Chain",
    "CheckResult",
    "Diagnostic",
    "Outcome",
    "Project",
    "Registry",
    "RunContext",
    "UsageError",
    "ToolSource",
    "ChainlangError",
    "InputError",
    "InputProblem",
    "ConfigError",
    "RegistryError",
    "RunInUse",
    "ChainInvalid",
    "RunError",
    "RunFailed",
    "ModelError",
    "LimitExceeded",
    "RunInterrupted",
    "RunWaiting",
    "open_project",
    "open_project_sync",
    "resume_emit",
    "resume_emit_async",
    "resume_run",
    "resume_run_async",
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
    from chainlang.api import Chain, Project, open_project, open_project_sync
    from chainlang.api.oneshot import (emit, emit_async, resume, resume_async, resume_emit, resume_emit_async,
                                       resume_run, resume_run_async, run, run_async)
    from chainlang.errors import (ChainInvalid, ChainlangError, ConfigError, InputError, InputProblem,
                                  LimitExceeded, ModelError, RegistryError, RunError, RunFailed, RunInterrupted,
                                  RunInUse, RunWaiting, UsageError)
    from chainlang.registry.objects import ToolSource
    from chainlang.pipeline import CheckResult
    from chainlang.registry.registry import Registry
    from chainlang.runtime.context import RunContext
    from chainlang.status import Outcome
    from chainlang.runtime.emit import EmitResult
    from chainlang.runtime.runner import RunResult
    from chainlang.runtime.step_error import StepError

_LAZY = {
    "Chain": ("chainlang.api", "Chain"),
    "Project": ("chainlang.api", "Project"),
    "open_project": ("chainlang.api", "open_project"),
    "open_project_sync": ("chainlang.api", "open_project_sync"),
    "resume_run": ("chainlang.api.oneshot", "resume_run"),
    "resume_run_async": ("chainlang.api.oneshot", "resume_run_async"),
    "resume_emit": ("chainlang.api.oneshot", "resume_emit"),
    "resume_emit_async": ("chainlang.api.oneshot", "resume_emit_async"),
    "CheckResult": ("chainlang.pipeline", "CheckResult"),
    "Registry": ("chainlang.registry.registry", "Registry"),
    "RunContext": ("chainlang.runtime.context", "RunContext"),
    "Outcome": ("chainlang.status", "Outcome"),
    "UsageError": ("chainlang.errors", "UsageError"),
    "ToolSource": ("chainlang.registry.objects", "ToolSource"),
    "ChainlangError": ("chainlang.errors", "ChainlangError"),
    "InputError": ("chainlang.errors", "InputError"),
    "InputProblem": ("chainlang.errors", "InputProblem"),
    "ConfigError": ("chainlang.errors", "ConfigError"),
    "RegistryError": ("chainlang.errors", "RegistryError"),
    "RunInUse": ("chainlang.errors", "RunInUse"),
    "ChainInvalid": ("chainlang.errors", "ChainInvalid"),
    "RunError": ("chainlang.errors", "RunError"),
    "RunFailed": ("chainlang.errors", "RunFailed"),
    "ModelError": ("chainlang.errors", "ModelError"),
    "LimitExceeded": ("chainlang.errors", "LimitExceeded"),
    "RunInterrupted": ("chainlang.errors", "RunInterrupted"),
    "RunWaiting": ("chainlang.errors", "RunWaiting"),
    "Diagnostic": ("chainlang.diagnostics", "Diagnostic"),
    "event": ("chainlang.registry.decorator", "event"),
    "hook": ("chainlang.registry.hooks", "hook"),
    "emit": ("chainlang.api.oneshot", "emit"),
    "emit_async": ("chainlang.api.oneshot", "emit_async"),
    "EmitResult": ("chainlang.runtime.emit", "EmitResult"),
    "check_files": ("chainlang.pipeline", "check_files"),
    "check_text": ("chainlang.pipeline", "check_text"),
    "run": ("chainlang.api.oneshot", "run"),
    "run_async": ("chainlang.api.oneshot", "run_async"),
    "resume": ("chainlang.api.oneshot", "resume"),
    "resume_async": ("chainlang.api.oneshot", "resume_async"),
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
