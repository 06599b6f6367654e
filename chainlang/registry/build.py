"""`build_registry`: the registry every CLI command sees."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.config.project import display_path, find_project_config
from chainlang.registry.loading import load_tools
from chainlang.registry.hooks import HookDef
from chainlang.registry.registry import Registry
from chainlang.registry.spec import EventSpec
from chainlang.registry.stdlib import stdlib_specs

if TYPE_CHECKING:
    from chainlang.registry.objects import ToolSource

__all__ = ["build_registry"]


def build_registry(tools: Sequence["ToolSource"] = (), start_dir: Path | None = None, *,
                   origin: str = "given with --tools") -> Registry:
    """The stdlib, plus the tools listed in the nearest `chainlang.toml`
    (searched from `start_dir`, default the working directory; its entries are
    relative to the toml), plus `tools` (`--tools` refs: module names or .py
    files relative to the working directory; from the Python API also functions,
    bound methods and modules as objects: chainlang.registry.objects; `origin` says
    where they were given, in error messages), plus the tools of the MCP servers
in its `[mcp.servers]` (events `NAME.TOOL`, see `chainlang.registry.mcp`).

    Raises a RegistryError subclass (ConfigError, ToolLoadError, or
    RegistryError for a name declared twice) with a one-line message.
    Named chains (`chains = [...]`) are not added here: that is the chain
    loader's job (see EventSpec.chain_event).
    """
    registry = Registry(stdlib_specs())
    config = find_project_config(start_dir)
    if config is not None and config.tools:
        for item in load_tools(list(config.tools), config.root, origin=f"listed in {display_path(config.path)}"):
            _add(registry, item)
    if config is not None and config.mcp is not None and config.mcp.servers:
        from chainlang.registry.mcp import mcp_specs  # imports the MCP SDK: only for a project that has servers

        for spec in mcp_specs(config):
            registry.add(spec)
    if tools:
        if all(isinstance(item, str) for item in tools) and not isinstance(tools, str):
            items = load_tools(list(tools), Path.cwd(), origin=origin)  # type: ignore[arg-type]
        else:
            from chainlang.registry.objects import tool_specs

            items = tool_specs(tools, Path.cwd(), origin=origin)
        for item in items:
            _add(registry, item)
    return registry


def _add(registry: Registry, item: EventSpec | HookDef) -> None:
    if isinstance(item, HookDef):
        registry.add_hook(item)
    else:
        registry.add(item)
