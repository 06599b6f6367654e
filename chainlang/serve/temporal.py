"""serve in a project on Temporal (`[engine] kind = "temporal"`): the events it takes and the
task firings it claims are fired by the workers (chainlang.engine.temporal), their
transcripts written by serve as they go; serve keeps the claims, leases and schedules. An
emit or firing whose serve died went on on the workers: the next serve waits for its end
instead of resuming it (which would run its steps twice)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.emit import Project

__all__ = ["ended_on_workers", "on_temporal"]


def on_temporal(project: "Project") -> bool:
    engine = project.config.engine if project.config is not None else None
    return engine is not None and engine.kind == "temporal"


async def ended_on_workers(project: "Project", run_id: str) -> dict[str, Any]:
    """How the workflow of `run_id` ended ({status, error, fired...}), once it has; failed
    when Temporal has no such workflow."""
    from chainlang.engine.temporal.submit import outcome_of

    assert project.config is not None and project.config.engine is not None
    outcome = await outcome_of(project.config.engine, run_id)
    if outcome is None:
        return {"status": "failed", "error": {"type": "temporal", "message": f"no workflow {run_id} on Temporal"}}
    return outcome
