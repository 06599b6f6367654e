"""What the Temporal engine runs so far, asked by the checker (CL038) and by `chainlang run`.

The walker runs inside the workflow, so the language itself (steps, if/else, foreach,
parallel groups, retry, timeouts, decide with the embedded decider, hooks of the chain,
named chains and chain.run) is the same. Each tool attempt is an activity. What needs the
run's services beyond a tool's context is not there yet: the model tiers (agent events,
the model decider), the project's store (tasks, threads, memory) and runs attached to a
thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlang.registry.spec import EventSpec

__all__ = ["unsupported"]


def unsupported(spec: "EventSpec") -> str | None:
    """Why the Temporal engine cannot run a step of `spec` yet (None: it can)."""
    effects = spec.effects
    if spec.model_calls > 0 or effects.get("uses_model"):
        return "it asks a model"
    if effects.get("reads_store") or effects.get("writes_store"):
        return "it uses the project's store: tasks, threads, memory"
    return None
