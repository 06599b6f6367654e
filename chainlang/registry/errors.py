"""Errors raised while building the event registry.

All derive from `RegistryError`, so the CLI can turn any of them into a
one-line message and exit code 2. Messages are single lines, say what is
wrong and how to fix it, and never carry a traceback.
"""

from __future__ import annotations

# the two that layers below the registry raise and catch live in the leaf module
from chainlang.errors import ConfigError, RegistryError

__all__ = ["ConfigError", "ImplementationError", "RegistryError", "ToolLoadError"]


class ToolLoadError(RegistryError):
    """A `--tools` / `chainlang.toml` tools reference that cannot be loaded."""


class ImplementationError(RegistryError):
    """An event whose Python implementation cannot be resolved (not implemented yet,
    an `implementation` pointer that does not import, or an event with no tool behind it)."""
