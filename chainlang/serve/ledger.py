"""The ledger of `chainlang serve`: group commit of the emits' claims, their ends and the
deliveries of events to waiting runs (§15). Requests of one moment share one write
transaction and one disk sync of the store, made in a thread of its own while the next
ones queue; an error fails only the requests it concerns."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.store import Store

__all__ = ["Ledger"]


class Ledger:
    """Group commit of the emits' claims and ends: the requests of one moment share one
    write transaction (and one disk sync) of the store, made in a thread while the next
    ones queue."""

    def __init__(self, store: "Store") -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.store = store
        # its own thread: the writes never queue behind tools that run in the default pool
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chainlang-ledger")
        self._claims: list[tuple[tuple[str, str, str, str, Any], asyncio.Future[Any]]] = []
        self._finishes: list[tuple[tuple[str, str], asyncio.Future[Any]]] = []
        self._deliveries: list[tuple[tuple[str, Any, str], asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def claim(self, key: str, event: str, run_id: str, transcript: str, data: Any) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._claims.append(((key, event, run_id, transcript, data), future))
        self._kick()
        return await future

    async def finish(self, key: str, status: str) -> None:
        future = asyncio.get_running_loop().create_future()
        self._finishes.append(((key, status), future))
        self._kick()
        await future

    async def deliver(self, event: str, data: Any, emit_id: str) -> list[Any]:
        """Deliver a claimed event to the waits it matches (runtime/deliver.py): the rows
        delivered to. In the ledger's thread, with the claims and ends of the same moment:
        with no run waiting for the event, one read through the store's index."""
        future = asyncio.get_running_loop().create_future()
        self._deliveries.append(((event, data, emit_id), future))
        self._kick()
        return list(await future)

    def _kick(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while self._claims or self._finishes or self._deliveries:
            claims, self._claims = self._claims, []
            finishes, self._finishes = self._finishes, []
            deliveries, self._deliveries = self._deliveries, []
            try:
                answers, delivered = await asyncio.get_running_loop().run_in_executor(
                    self._thread, self._batch, [c for c, _ in claims], [f for f, _ in finishes],
                    [d for d, _ in deliveries])
            except Exception as exc:  # StoreError, or a bug: every waiter hears of it
                for _, future in claims + finishes + deliveries:
                    if not future.done():
                        future.set_exception(exc)
                continue
            if isinstance(answers, Exception):
                for _, future in claims + finishes:
                    if not future.done():
                        future.set_exception(answers)
            else:
                for (_, future), answer in zip(claims, answers):
                    if not future.done():
                        future.set_result(answer)
                for _, future in finishes:
                    if not future.done():
                        future.set_result(None)
            for (_, future), rows in zip(deliveries, delivered):
                if future.done():
                    continue
                if isinstance(rows, Exception):
                    future.set_exception(rows)
                else:
                    future.set_result(rows)

    def _batch(self, claims: list[Any], finishes: list[Any], deliveries: list[tuple[str, Any, str]]
               ) -> tuple[Any, list[Any]]:
        """One turn of the ledger's thread: the claims and ends in one transaction, then each
        delivery (its own transaction, when it matches a wait). An error is returned in place
        of what failed, so that it fails only the requests it concerns."""
        from chainlang.runtime.deliver import deliver_event

        answers: Any = []
        if claims or finishes:
            try:
                answers = self.store.emit_batch(claims, finishes)
            except Exception as exc:
                answers = exc
        delivered: list[Any] = []
        try:  # one read for the batch: most events have no run waiting for them
            waited = self.store.events_waited(event for event, _, _ in deliveries) if deliveries else set()
        except Exception as exc:
            return answers, [exc] * len(deliveries)
        for event, data, emit_id in deliveries:
            if event not in waited:
                delivered.append([])
                continue
            try:
                delivered.append(deliver_event(self.store, event, data, emit_id))
            except Exception as exc:
                delivered.append(exc)
        return answers, delivered
