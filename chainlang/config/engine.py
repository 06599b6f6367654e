"""`[engine]` of chainlang.toml: which engine runs the project's chains (LANGUAGE.md §14).

The embedded engine (this process: asyncio, JSONL transcripts, the SQLite store) is the
default. `kind = "temporal"` runs chains as Temporal workflows on the workers of
`chainlang worker`, reached at `address` in `namespace` through `task_queue`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from chainlang.config.engine_kind import engine_kind
from chainlang.config.fields import text

__all__ = ["EngineConfig", "engine_kind"]


@dataclass(frozen=True)
class EngineConfig:
    """`[engine]`: the engine that runs the project's chains."""

    kind: Literal["embedded", "temporal"] = text(
        "embedded", choices=("embedded", "temporal"),
        description="embedded: this process runs the chain; temporal: Temporal workers do")
    address: str = text("127.0.0.1:7233", min_length=3, max_length=300, pattern=r"^[^\s/]+:\d{1,5}$",
                        description="temporal: the frontend's HOST:PORT")
    namespace: str = text("default", min_length=1, max_length=200, description="temporal: the namespace")
    task_queue: str = text("chainlang", min_length=1, max_length=200,
                           description="temporal: the task queue the workers of this project poll")
