"""What the Temporal engine runs so far, asked by the checker (CL038).

The walker runs inside the workflow, so the language itself (steps, if/else, foreach,
parallel groups, retry, timeouts, decide with the embedded decider, hooks of the chain,
named chains and chain.run) is the same. Each tool attempt is an activity, with the tool
context of the embedded engine, so the events of the project's store (task.*, memory.*,
thread.*) run there too, on the worker's store: give every worker the same one (a
PostgreSQL `[store] url`, or one host). What needs the run's model tiers is not there yet:
the agent events, tools that must ask a model, and the thread and memory events when
`[models] memory` names a model tier (with the default, embedded, they ask none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.registry.spec import EventSpec

__all__ = ["unsupported"]


def unsupported(spec: "EventSpec", config: "ProjectConfig | None") -> str | None:
    """Why the Temporal engine cannot run a step of `spec` yet (None: it can)."""
    if spec.model_calls > 0 or spec.name.startswith("agent."):
        return "it asks a model"
    memory = config.models.memory if config is not None and config.models is not None else "embedded"
    if spec.effects.get("uses_model") and memory != "embedded":
        return f"it asks the {memory} model ([models] memory in chainlang.toml)"
    return None
