"""The event registry: stdlib declarations, `@event` tools, external events
and named chains, all behind one `Registry` (`EventRegistry` protocol).

Effect flags used by the stdlib (`EventSpec.effects`): `side_effects`,
`reads_clock`, `uses_model`, `reads_store`, `writes_store`.

Importing this package does not import pydantic or jsonschema; they are
loaded when a tool is decorated, a config is read or a schema is checked.
"""

from __future__ import annotations

from chainlang.registry.build import build_registry
from chainlang.registry.config import (
    CONFIG_NAME,
    ProjectConfig,
    find_config,
    find_project_config,
    load_config,
)
from chainlang.registry.decorator import event, spec_of
from chainlang.registry.errors import (
    ConfigError,
    ImplementationError,
    RegistryError,
    ToolLoadError,
)
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

__all__ = [
    "CONFIG_NAME",
    "EVENT_NAME_PATTERN",
    "ConfigError",
    "EventKind",
    "EventRegistry",
    "EventSpec",
    "ImplementationError",
    "ProjectConfig",
    "Registry",
    "RegistryError",
    "ToolLoadError",
    "build_registry",
    "event",
    "event_name_problem",
    "find_config",
    "find_project_config",
    "is_event_name",
    "load_config",
    "load_tools",
    "spec_of",
    "stdlib_specs",
    "validate_event_name",
]
