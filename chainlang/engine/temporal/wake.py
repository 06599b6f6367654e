"""Telling runs on Temporal that their wait was settled (LANGUAGE.md §15): the sender's side
of the `wait_delivered` signal (the workflow's side: chainlang.engine.temporal.waits).

Whoever settles a wait in the store — `chainlang emit`, serve, `chainlang waits cancel` —
signals the run's workflow (workflow id = run id) with the row as the store settled it. The
store is written first, so a signal lost on the way (the process died between the two, the
frontend was down) is sent again by the sweep every worker runs (`resend_settled`): a row
settled but not finished for a while is signalled again; the workflow keeps the first
signal per step, so repeats change nothing. A row whose workflow is gone (it ended,
or was terminated) is marked finished: nobody can take its delivery any more.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from chainlang.config.engine import EngineConfig
    from chainlang.store.waits import WaitRow

__all__ = ["RESEND_AFTER", "RESEND_EVERY", "resend_settled", "signal_rows", "signal_waits"]

RESEND_EVERY = 5.0  # seconds between two sweeps of a worker
RESEND_AFTER = 3.0  # seconds a settled row may wait for its run before its signal is sent again


async def signal_waits(root: Path, engine: "EngineConfig", waits: Iterable[Any]) -> list[str]:
    """Signal the workflows of `waits` (rows, or {run_id, step} as runtime.emit reports them)
    whose engine is Temporal, with their rows as the store has them now; what could not be
    sent (the sweep of the workers sends it again)."""
    from chainlang.tasks.stored import project_store

    keys = [(_get(w, "run_id"), _get(w, "step")) for w in waits if _get(w, "engine") == "temporal"]
    if not keys:
        return []

    def read() -> list["WaitRow"]:
        with project_store(root) as store:
            rows = [store.get_wait(run_id, step) for run_id, step in keys]
        return [row for row in rows if row is not None and row.status != "waiting"]

    from chainlang.engine.temporal.submit import connect

    from chainlang.store import StoreError

    try:
        rows = await asyncio.to_thread(read)
    except StoreError as exc:
        return [f"the runs on Temporal waiting for this are not told yet ({exc}); the workers tell them"]
    try:
        client = await connect(engine)
    except Exception as exc:  # EngineUnavailable: the sweep sends them once Temporal answers
        return [f"the runs waiting for this on Temporal are not told yet ({exc}); the workers tell them once "
                "Temporal answers"]
    return await signal_rows(root, client, rows)


async def signal_rows(root: Path, client: Any, rows: Iterable["WaitRow"]) -> list[str]:
    """Send each settled row to its workflow; mark finished the rows whose workflow is gone.
    What could not be sent, one line each."""
    from temporalio.service import RPCError, RPCStatusCode

    from chainlang.engine.temporal.waits import SIGNAL, delivery_of

    problems: list[str] = []
    gone: list["WaitRow"] = []
    for row in rows:
        try:
            await client.get_workflow_handle(row.run_id).signal(SIGNAL, delivery_of(row))
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:  # no such workflow running: it ended, nothing waits
                gone.append(row)
                continue
            problems.append(f"run {row.run_id} (step {row.step}) on Temporal is not told yet: {exc.message}; "
                            "the workers tell it again")
        except Exception as exc:  # the connection dropped on the way: the store has it, the sweep sends it again
            problems.append(f"run {row.run_id} (step {row.step}) on Temporal is not told yet: {exc}; "
                            "the workers tell it again")
    if gone:
        await asyncio.to_thread(_finish, root, gone)
    return problems


def _finish(root: Path, rows: list["WaitRow"]) -> None:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        for row in rows:
            store.finish_wait(row.run_id, row.step)


async def resend_settled(root: Path, client: Any, *, every: float = RESEND_EVERY, after: float = RESEND_AFTER) -> None:
    """Forever (a worker's task): signal again the Temporal waits settled more than `after`
    seconds ago whose run has not finished them (a signal that was lost)."""
    from chainlang.tasks.stored import project_store

    def stale() -> list["WaitRow"]:
        limit = (datetime.now(timezone.utc) - timedelta(seconds=after)).isoformat(timespec="microseconds")
        with project_store(root) as store:
            return [row for row in store.unfinished_waits()
                    if row.engine == "temporal" and (row.settled_at or "") <= limit]

    while True:
        await asyncio.sleep(every)
        try:
            rows = await asyncio.to_thread(stale)
            if rows:
                await signal_rows(root, client, rows)
        except Exception:  # a busy store, Temporal away, whatever: the worker goes on, the next sweep tries again
            continue


def _get(wait: Any, name: str) -> Any:
    return wait.get(name) if isinstance(wait, dict) else getattr(wait, name, None)
