"""`chainlang serve` keeps the `triggers:` of the project's chain files registered
(LANGUAGE.md §12; what is stored: chainlang.tasks.chain_triggers).

At start, and then whenever the project changes: `Projects.current()` looks at the
modification times of the project's directories and files at most once a second (a walk
bounded at 20,000 entries) and loads the project again when one changed, or when the
stored hooks changed. This loop asks for the project every `every` seconds and syncs the
triggers when it is a new one: the cost of an unchanged project is that walk; a change
costs one check of the chain files that have triggers and one read of the stored tasks.

Only the process that fires due tasks runs it (with `serve --workers`, the tasks worker):
the ids are the same in every process, so two serve processes on one store register each
trigger once all the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.serve.projects import Projects
    from chainlang.serve.scheduler import Clock
    from chainlang.store import Store

__all__ = ["TriggerWatch"]

log = logging.getLogger("chainlang.serve")


class TriggerWatch:
    def __init__(self, projects: "Projects", store: "Store", clock: "Clock", wake: Any = None,
                 every: float = 1.0) -> None:
        self.projects, self.store, self.clock, self.wake, self.every = projects, store, clock, wake, every
        self._synced: Any = None  # the project last synced
        self._said: tuple[str, ...] = ()  # the problems last logged (each said once while it lasts)
        # the chain files last synced: a project loaded again because a stored hook changed (a trigger
        # registered, or cancelled with `tasks cancel`) is not synced again, so a cancel holds until the
        # file changes or serve restarts, for a hook as for a schedule
        self._files: Any = None

    async def sync_now(self) -> None:
        """Sync the triggers with the project as it is now (nothing when it did not change)."""
        from chainlang.store import StoreError
        from chainlang.tasks.chain_triggers import sync

        project = self.projects.current()
        if project is self._synced:
            return
        files = _chain_texts(project)
        if files == self._files:  # reloaded for another reason (a stored hook changed): the triggers did not
            self._synced = project
            return
        try:
            result = await asyncio.to_thread(sync, self.store, project, self.clock.now())
        except StoreError as exc:
            log.error("the chain files' triggers could not be registered: %s (trying again)", exc)
            return
        self._synced, self._files = project, files
        for task_id in result.added:
            log.info("registered the trigger %s", task_id)
        for task_id in result.archived:
            log.info("archived the trigger %s (its file no longer has it)", task_id)
        problems = tuple(result.problems)
        if problems != self._said:
            for problem in problems:
                log.error("%s", problem)
        self._said = problems
        if (result.added or result.archived) and self.wake is not None:
            self.wake()  # a new schedule may be due before the scheduler's next look

    async def sync_safely(self) -> None:
        """`sync_now`, logging what fails instead of raising: serve goes on, and tries again."""
        try:
            await self.sync_now()
        except Exception:  # a bug must not stop serve: say it, try again
            log.exception("the chain files' triggers could not be synced")

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await self.sync_safely()
            try:
                await asyncio.wait_for(stopping.wait(), timeout=self.every)
            except TimeoutError:
                pass


def _chain_texts(project: Any) -> tuple[tuple[str, str], ...]:
    """The project's chain and hooks files as they are now (path, text): what its triggers are
    checked against (the stored hooks left out)."""
    from chainlang.tasks.stored import STORE_FILE

    stored = STORE_FILE.as_posix() + "#"
    return tuple(sorted((f.path, f.source.text) for f in project.loader.context if not f.path.startswith(stored)))
