"""Which engine a project's configuration names, read without the configuration's models:
asking costs a run without a chainlang.toml no pydantic import (config/engine.py defines
`[engine]` itself)."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["engine_kind"]


def engine_kind(config: Any) -> Literal["embedded", "temporal"]:
    """The kind of engine a project's configuration (a ProjectConfig, or None: no project)
    names: the one place `[engine] kind` is read."""
    engine = getattr(config, "engine", None) if config is not None else None
    kind: Literal["embedded", "temporal"] = engine.kind if engine is not None else "embedded"
    return kind
