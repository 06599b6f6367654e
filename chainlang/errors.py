"""The errors that cross layers of chainlang, at the bottom of the package graph.

Every package may import this module, and it imports nothing from chainlang, so an
error raised deep down (a transcript lock, a configuration file) can be caught by name
high up (the CLI, serve) without the lower package importing the higher one, and
without anybody testing the wording of a message. Errors that stay inside one package
live in that package (`journal.integrity.IntegrityError`, `store.base.StoreError`,
`runtime.outcomes.LimitExceeded`, ...).

The CLI turns a `UsageError` or a `RegistryError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import os

__all__ = ["ConfigError", "RegistryError", "RunInUse", "UsageError"]


class UsageError(Exception):
    """A problem with how chainlang was called (a missing path, a transcript that cannot be
    resumed, ...): exit code 2. The message says what is wrong and how to fix it."""


class RunInUse(UsageError):
    """Another process holds the transcript's lock (a run, or a resume of it, is still going).
    `pid` is the holder's process id when its head file names it."""

    def __init__(self, transcript: str | os.PathLike[str], pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{os.fspath(transcript)}: the run is in use by {who} (a chainlang run or resume of it "
                         "is still going); wait for it to end or stop it, then try again")
        self.transcript = os.fspath(transcript)
        self.pid = pid


class RegistryError(Exception):
    """A problem with the set of registered events (e.g. a name declared twice); its
    subclasses in `chainlang.registry.errors` say which part of the registry."""


class ConfigError(RegistryError):
    """A `chainlang.toml` that cannot be read or does not follow the config schema (read by
    the config, model, store and task layers, below the registry)."""
