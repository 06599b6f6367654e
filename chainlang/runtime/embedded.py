"""The embedded engine: admitted work runs in this process, on its event loop, the
transcript written as it goes (the default engine; LANGUAGE.md §14)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.emit import EmitResult, Project
    from chainlang.runtime.engine import FireJob, RunJob
    from chainlang.runtime.host import RunEnd
    from chainlang.runtime.session import Session

__all__ = ["EMBEDDED", "EmbeddedEngine"]


class EmbeddedEngine:
    kind = "embedded"

    def decider(self, config: Any) -> Any:
        """The project's decider ([decide]); closed by whoever asked for it."""
        from chainlang.runtime.runner import made_decider

        return made_decider(config)

    async def run(self, job: "RunJob", session: "Session") -> "RunEnd":
        from chainlang.runtime.runner import run_chain

        return await run_chain(job, session)

    async def fire(self, job: "FireJob", session: "Session") -> "RunEnd":
        from chainlang.runtime.emit import fire_job

        return await fire_job(job, session)

    async def resume(self, transcript: Path, **options: Any) -> Any:
        from chainlang.runtime.resume import resume_async

        return await resume_async(transcript, engine=self, **options)

    async def wake(self, root: Path, waits: Any) -> list[str]:
        """Runs here watch their own wait in the store (runtime/waiting.py): nothing to tell."""
        return []

    async def ended(self, project: "Project", run_id: str, event: str, where: Path,
                    **options: Any) -> "EmitResult | None":
        """An emit whose process died, taken over: continued from its transcript here."""
        from chainlang.runtime.emit import EmitResult

        result = await self.resume(where, **options)
        return result if isinstance(result, EmitResult) else None


EMBEDDED = EmbeddedEngine()
