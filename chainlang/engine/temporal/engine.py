"""The Temporal engine behind the engine seam (chainlang.runtime.engine): admitted work is
submitted as a workflow (id = run id) and followed, its records written to the transcript
here as the workers make them (chainlang.engine.temporal.submit)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.config.engine import EngineConfig
    from chainlang.runtime.emit import EmitResult, Project
    from chainlang.runtime.engine import FireJob, RunJob
    from chainlang.runtime.host import RunEnd
    from chainlang.runtime.session import Session

__all__ = ["TemporalEngine"]


class TemporalEngine:
    kind = "temporal"

    def __init__(self, config: "EngineConfig") -> None:
        self.config = config

    def decider(self, config: Any) -> Any:
        return None  # the workers decide; this process asks no model

    async def run(self, job: "RunJob", session: "Session") -> "RunEnd":
        from chainlang.engine.temporal.submit import follow_run
        from chainlang.runtime.host import RunEnd

        pinned = job.pinned.isoformat() if job.pinned else None
        outcome, ms = await follow_run(job.prepared, job.run_id, job.header, job.inputs, pinned, session.record,
                                       session.tell, str(session.where), job.detach)
        end = RunEnd(outcome["status"], outcome.get("outputs") or {}, outcome.get("error"), round(ms, 3))
        if outcome.get("detached"):  # run --detach left it at its wait: this transcript ends as the embedded one's
            from chainlang.journal.records import RunFinished

            session.record(RunFinished("waiting", {}, end.error, end.duration_ms))
        return end

    async def fire(self, job: "FireJob", session: "Session") -> "RunEnd":
        from chainlang.engine.temporal.submit import follow_emit
        from chainlang.runtime.host import RunEnd

        pinned = job.pinned.isoformat() if job.pinned else None
        outcome, ms = await follow_emit(job.project, job.run_id, job.header, pinned, session.record, session.tell,
                                        job.task, str(session.where))
        return RunEnd(outcome["status"], {"fired": outcome.get("fired") or []}, outcome.get("error"), round(ms, 3))

    async def resume(self, transcript: Path, **options: Any) -> Any:
        raise UsageError("cannot resume: this project runs on Temporal ([engine] in chainlang.toml), where a run "
                         "continues on the workers by itself (its workflow id is its run id); chainlang resume "
                         "continues runs of the embedded engine")

    async def wake(self, root: Path, waits: Any) -> list[str]:
        """Signal the workflows whose waits were just settled in the store (§15)."""
        from chainlang.engine.temporal.wake import signal_waits

        return await signal_waits(root, self.config, waits)

    async def ended(self, project: "Project", run_id: str, event: str, where: Path,
                    **options: Any) -> "EmitResult":
        """An emit (or task firing) whose process died after handing it over: it went on on
        the workers; its end is waited for (running it again would run its steps twice)."""
        from chainlang.engine.temporal.submit import emit_ended

        return await emit_ended(project, run_id, event, where)
