"""`chainlang.toml`: the project configuration, found by walking up from a directory.

Keys (see `model.py`): `tools`, `chains`, and the optional tables `[decide]` (the
decide model), `[store]` (where the store lives), `[serve]` (chainlang serve) and `[mcp]`
(MCP servers whose tools are events). Paths in it are relative to the file's directory.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from chainlang.errors import ConfigError

if TYPE_CHECKING:
    from chainlang.config.model import (DecideConfig, McpConfig, ModelsConfig, RunsConfig, SecretSource, ServeConfig,
                                        StoreConfig)
    from chainlang.config.engine import EngineConfig

__all__ = ["CONFIG_NAME", "ProjectConfig", "display_path", "find_config", "find_project_config", "load_config"]

CONFIG_NAME = "chainlang.toml"


@dataclass(frozen=True)
class ProjectConfig:
    """A loaded `chainlang.toml`."""

    path: Path  # the toml file
    tools: tuple[str, ...] = ()  # as written: module names or .py paths relative to `root`
    chains: tuple[str, ...] = ()  # as written: directories relative to `root`
    decide: DecideConfig | None = field(default=None)
    models: ModelsConfig | None = field(default=None)
    store: StoreConfig | None = field(default=None)
    serve: ServeConfig | None = field(default=None)
    mcp: McpConfig | None = field(default=None)
    engine: EngineConfig | None = field(default=None)  # [engine]: None is the embedded engine
    secrets: Mapping[str, SecretSource] = field(default_factory=dict, hash=False)  # [secrets]: where each value is read from
    runs: RunsConfig | None = field(default=None)  # [runs]: the transcripts' directory and retention

    @property
    def root(self) -> Path:
        """The directory holding the toml; relative paths in it start here."""
        return self.path.parent

    def chain_dirs(self) -> list[Path]:
        """The `chains` directories as paths."""
        return [self.root / entry for entry in self.chains]


def find_config(start: Path | None = None) -> Path | None:
    """The nearest `chainlang.toml` in `start` (default: the working directory)
    or one of its parents, or None."""
    directory = Path(start) if start is not None else Path.cwd()
    try:
        directory = directory.resolve()
    except OSError:
        directory = directory.absolute()
    if directory.is_file():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path) -> ProjectConfig:
    """Read and validate one `chainlang.toml`; raises ConfigError (one line per problem)."""
    import tomllib

    path = Path(path)
    shown = display_path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: invalid TOML: {exc}") from None

    from chainlang.config.fields import build
    from chainlang.config.model import ConfigFile

    found: list[dict[str, Any]] = []
    parsed = build(ConfigFile, raw, (), found)
    if parsed is None:
        problems = "; ".join(_describe_error(error) for error in found)
        raise ConfigError(f"{shown}: {problems}") from None
    return ProjectConfig(path=path, tools=tuple(parsed.tools), chains=tuple(parsed.chains), decide=parsed.decide,
                         models=parsed.models, store=parsed.store, serve=parsed.serve, mcp=parsed.mcp,
                         engine=parsed.engine, secrets=dict(parsed.secrets), runs=parsed.runs)


def find_project_config(start: Path | None = None) -> ProjectConfig | None:
    """The nearest `chainlang.toml`, loaded, or None when there is none."""
    path = find_config(start)
    return load_config(path) if path is not None else None


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _describe_error(error: Any) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()))
    message = error.get("msg", "invalid")
    if error.get("type") == "extra_forbidden":
        key = str(error["loc"][-1]) if error.get("loc") else location
        known = _known_keys(error.get("loc", ())[:-1])
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
        return f"unknown key '{location}': {message}{hint}"
    return f"{location}: {message}" if location else message


def _known_keys(parent: tuple[Any, ...]) -> list[str]:
    from chainlang.config.model import (ConfigFile, DecideConfig, McpConfig, McpServerConfig, ModelsConfig,
                                        ModelTierConfig, RunsConfig, SecretSource, ServeConfig, StoreConfig)

    from chainlang.config.engine import EngineConfig

    tables: dict[Any, Any] = {"decide": DecideConfig, "store": StoreConfig, "serve": ServeConfig, "models": ModelsConfig,
                              "mcp": McpConfig, "engine": EngineConfig, "runs": RunsConfig}
    model: Any = tables.get(parent[0], ConfigFile) if parent else ConfigFile
    if len(parent) >= 2 and parent[0] == "models":
        model = ModelTierConfig
    if len(parent) >= 2 and parent[0] == "secrets":
        model = SecretSource
    if len(parent) >= 3 and parent[0] == "mcp" and parent[1] == "servers":
        model = McpServerConfig
    from dataclasses import fields

    return [item.name for item in fields(model)]
