"""serve in a project on Temporal (`[engine] kind = "temporal"`): the events it takes and the
task firings it claims are fired by the workers (chainlang.engine.temporal), their
transcripts written by serve as they go; serve keeps the claims, leases and schedules. An
emit or firing whose serve died went on on the workers: the next serve waits for its end
instead of resuming it (which would run its steps twice: chainlang.engine.temporal.submit.emit_ended)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlang.runtime.emit import Project

__all__ = ["on_temporal"]


def on_temporal(project: "Project") -> bool:
    engine = project.config.engine if project.config is not None else None
    return engine is not None and engine.kind == "temporal"
