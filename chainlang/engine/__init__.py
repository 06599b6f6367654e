"""The engines that run chains (LANGUAGE.md §14), and the one place a project's is chosen.

The embedded engine is chainlang.runtime itself (chainlang.runtime.embedded): the walker,
its steps and their tools in this process. `temporal/` runs the same walker as a Temporal
workflow: the workflow keeps the run's records, each tool attempt is an activity on a
worker of `chainlang worker`, and the submitter follows it, writing the same transcript.
Both implement the protocol of chainlang.runtime.engine; `engine_for` picks one from the
project's configuration, and the entry points of chainlang.engine.entry (used by the
CLI, serve and the Python API) hand it to the runtime.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.runtime.engine import Engine

__all__ = ["engine_for", "remote_engine_used", "wake_waits"]


def engine_for(config: "ProjectConfig | None") -> "Engine":
    """The engine of the project whose configuration is `config` (None: no project)."""
    from chainlang.config.engine_kind import engine_kind

    if engine_kind(config) == "temporal":
        from chainlang.engine.temporal.engine import TemporalEngine

        assert config is not None and config.engine is not None
        return TemporalEngine(config.engine)
    from chainlang.runtime.embedded import EMBEDDED

    return EMBEDDED


def remote_engine_used() -> bool:
    """Whether this process talked to an engine elsewhere (Temporal's frontend): then a
    command stopped by the user leaves the run going on there, and the process must end
    at once (the SDK's client threads may crash the interpreter's finalization:
    temporalio/sdk-python#300). Asked without importing the SDK."""
    submit = sys.modules.get("chainlang.engine.temporal.submit")
    return submit is not None and bool(getattr(submit, "CONNECTED", False))


async def wake_waits(root: Path, waits: Any) -> list[str]:
    """Tell the runs whose waits were just settled in the store (serve's deliveries, `chainlang
    waits cancel`) through the project's engine: on Temporal their workflows get a signal; on
    the embedded engine they watch their rows. What could not be told now, one line each."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        config = find_project_config(root)
    except RegistryError as exc:  # an unreadable chainlang.toml
        return [f"the runs waiting for this are not told yet: {exc}"]
    return await engine_for(config).wake(Path(root), waits)
