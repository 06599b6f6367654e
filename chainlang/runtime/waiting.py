"""How a run waits on the embedded engine (§15): through the project's store.

The wait is a row of `waits` (store/waits.py). Whoever delivers an event (serve, `chainlang
emit`, runtime/deliver.py) settles the row in the store; the run sees it settled and goes
on. A run in the foreground (`chainlang run`, `chainlang resume`) watches its row, and
settles it itself as `timed_out` when its deadline passes; a detached one (`--detach`, a
serve letting go of it) ends as `waiting` (exit 4) and holds no process: serve resumes it
when the row is settled or its deadline passes.

Watching is a read of one row by its key every POLL seconds: cheap for the store and
independent of how many runs wait (nothing here scales with them).
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.runtime.outcomes import RunWaiting
from chainlang.runtime.wait_step import Settled, WaitRequest, utc_stamp

if TYPE_CHECKING:
    from chainlang.runtime.scripted_answers import ScriptedAnswers
    from chainlang.store import Store
    from chainlang.store.waits import WaitRow

__all__ = ["POLL_SECONDS", "StoreWaiter", "settled_of"]

POLL_SECONDS = 0.2  # how often a run in the foreground looks at its wait
BUSY_POLL_SECONDS = 0.02  # how often a detached wait looks whether the other branches are done

# the project's store a long-lived process keeps open (serve's, set around its resumes): a wait of
# that project is read through it instead of opening the store (~8 ms) twice per wait
KEPT_STORE: ContextVar["tuple[str, Store] | None"] = ContextVar("chainlang_kept_store", default=None)


class StoreWaiter:
    """The embedded engine's waiter (RunState.waiter): see the module docstring."""

    def __init__(self, root: Path, transcript: Path | str, detach: bool = False, engine: str = "embedded",
                 answers: "ScriptedAnswers | None" = None) -> None:
        self.root = root if isinstance(root, Path) else Path(root)
        self.transcript = str(transcript)
        self.detach = detach
        self.engine = engine
        self.answers = answers  # `--answer ID=VALUE`: delivered when that user.ask asks

    @staticmethod
    def now() -> datetime:
        return datetime.now(timezone.utc)

    def _store(self) -> "AbstractContextManager[Store]":
        from chainlang.tasks.stored import project_store

        kept = KEPT_STORE.get()
        if kept is not None and kept[0] == os.path.realpath(self.root):
            return nullcontext(kept[1])  # its owner's to close
        return project_store(self.root)

    async def register(self, request: WaitRequest) -> str | None:
        """Register the wait; the deadline of the row (the first registration's)."""
        from chainlang.store.waits import WaitRow

        row = WaitRow(run_id=request.run_id, step=request.step, event=request.event, where=request.where,
                      frozen=request.frozen, deadline=request.deadline, transcript=self.transcript,
                      chain=request.chain, engine=self.engine, status="waiting", created_at="",
                      match_field=request.match_field, match_value=request.match_value, question=request.question)
        with self._store() as store:
            stored = store.open_wait(row)
            if self.answers and stored.status == "waiting":  # `--answer`: refused now, not after waiting
                self.answers.refuse_invalid(store, request)
        return stored.deadline

    async def settled(self, request: WaitRequest) -> Settled:
        """Wait until the wait is settled (watching the store), settle it as timed out at
        its deadline; in detach mode, end the run (RunWaiting) while it still waits."""
        with self._store() as store:
            if self.answers:  # `--answer`: delivered as `chainlang emit user.answered` would
                self.answers.deliver(store, request)
            while True:
                row = store.get_wait(request.run_id, request.step)
                if row is None:  # registered a moment ago: only a hand-edited store loses it
                    raise RuntimeError(f"the wait of run {request.run_id} at step {request.step} is gone from the "
                                       "project's store")
                if row.status != "waiting":
                    return settled_of(row)
                left = _seconds_left(row.deadline)
                if left is not None and left <= 0:
                    timed_out = store.settle_wait(request.run_id, request.step, "timed_out")
                    if timed_out is not None:
                        return settled_of(timed_out)
                    continue  # settled by someone else meanwhile: read how
                if self.detach:
                    busy = request.others_busy
                    if busy is None or not busy():
                        await asyncio.sleep(0)  # a branch between two steps takes its next one now
                        if busy is None or not busy():
                            raise RunWaiting(request.step, request.event, row.deadline, row.question)
                    # another branch is in a step: let it go on (its steps are not cut short to detach)
                    await asyncio.sleep(BUSY_POLL_SECONDS if left is None else min(BUSY_POLL_SECONDS, left))
                    continue
                await asyncio.sleep(POLL_SECONDS if left is None else min(POLL_SECONDS, left))

    async def finished(self, request: WaitRequest) -> None:
        with self._store() as store:
            store.finish_wait(request.run_id, request.step)


def settled_of(row: "WaitRow") -> Settled:
    status = {"delivered": "ok"}.get(row.status, row.status)
    at = row.settled_at
    if at is not None:
        try:
            at = utc_stamp(datetime.fromisoformat(at))
        except ValueError:
            pass
    return Settled(status, row.payload if status == "ok" else None, row.emit_id, at)


def _seconds_left(deadline: str | None) -> float | None:
    if deadline is None:
        return None
    try:
        moment = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return 0.0  # an unreadable deadline (a hand-edited store): treated as passed, not as forever
    return (moment - datetime.now(timezone.utc)).total_seconds()


def seconds_left(deadline: str | None) -> float | None:
    """Seconds until `deadline` (negative once passed; None: no deadline)."""
    return _seconds_left(deadline)
