"""The event registry: stdlib declarations, `@event` tools, external events
and named chains, all behind one `Registry` (`EventRegistry` protocol).

Effect flags used by the stdlib (`EventSpec.effects`): `side_effects`,
`reads_clock`, `uses_model`, `reads_store`, `writes_store`; and `model_calls`, a count:
the model calls the event makes each time it runs, at least (the budget check adds them up).

Importing this package does not import pydantic or jsonschema; they are
loaded when a tool is decorated, a config is read or a schema is checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.registry.build import build_registry
    from chainlang.registry.decorator import event, spec_of
    from chainlang.registry.errors import ConfigError, ImplementationError, RegistryError, ToolLoadError
    from chainlang.registry.loading import load_tools
    from chainlang.registry.registry import EventRegistry, Registry
    from chainlang.registry.spec import (
        EVENT_NAME_PATTERN,
        EventKind,
        EventSpec,
        event_name_problem,
        is_event_name,
        validate_event_name,
    )
    from chainlang.registry.stdlib import stdlib_specs

# the package's names, imported when first used (importing the package imports nothing:
# chainlang.config imports the errors without pulling in the registry builder)
_LAZY = {
    "build_registry": "chainlang.registry.build",
    "event": "chainlang.registry.decorator",
    "spec_of": "chainlang.registry.decorator",
    "ConfigError": "chainlang.registry.errors",
    "ImplementationError": "chainlang.registry.errors",
    "RegistryError": "chainlang.registry.errors",
    "ToolLoadError": "chainlang.registry.errors",
    "load_tools": "chainlang.registry.loading",
    "EventRegistry": "chainlang.registry.registry",
    "Registry": "chainlang.registry.registry",
    "EVENT_NAME_PATTERN": "chainlang.registry.spec",
    "EventKind": "chainlang.registry.spec",
    "EventSpec": "chainlang.registry.spec",
    "event_name_problem": "chainlang.registry.spec",
    "is_event_name": "chainlang.registry.spec",
    "validate_event_name": "chainlang.registry.spec",
    "stdlib_specs": "chainlang.registry.stdlib",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chainlang.registry' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
