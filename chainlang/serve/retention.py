"""Serve applies `[runs] keep`: the transcripts of ended runs beyond the retention are
removed once at start and then every ten minutes (a scandir of the runs directory, in a
worker thread: the loop keeps serving). What stays and why is chainlang.journal.retention's."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from chainlang.journal.retention import GcReport, collect

__all__ = ["EVERY", "keep_runs"]

EVERY = 600.0  # seconds between two collections
log = logging.getLogger("chainlang.serve")


async def keep_runs(directory: Path, keep: int | float, stopping: asyncio.Event, every: float = EVERY) -> None:
    """Collect `directory` now and every `every` s until `stopping` is set."""
    while not stopping.is_set():
        try:
            report = await asyncio.to_thread(collect, directory, keep)
        except OSError as exc:  # a runs directory gone unreadable: said, and tried again next time
            log.warning("could not remove old transcripts in %s: %s", directory, exc)
        else:
            _log(report, keep)
        try:
            await asyncio.wait_for(stopping.wait(), every)
        except asyncio.TimeoutError:
            pass


def _log(report: GcReport, keep: int | float) -> None:
    if not report.removed and not report.orphans:
        return
    for path in report.removed:
        log.debug("removed the transcript %s", path)
    kept = f"the newest {keep}" if isinstance(keep, int) else f"those that ended within {keep:g} s"
    log.info("removed %d transcript(s) of ended runs beyond [runs] keep (kept %s)%s", len(report.removed), kept,
             f" and {len(report.orphans)} .head file(s) without a transcript" if report.orphans else "")
