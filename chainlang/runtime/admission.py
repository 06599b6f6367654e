"""What every command does before a run, an emit or a resume starts, whatever engine then
runs it: a run id, the pinned clock, the project's transcript key, the transcript's lock,
and the run's redaction service."""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.errors import UsageError
from chainlang.redaction import Redactor

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.journal.lock import RunLock

__all__ = ["RUNS_DIR", "new_run_id", "parse_now", "project_key", "run_secrets", "take_lock"]

RUNS_DIR = Path(".chainlang") / "runs"


_STAMP: list[tuple[int, str]] = [(-1, "")]  # the last second a run id was made in, and its text


def new_run_id() -> str:
    """`20261128T210512Z-` and 40 random bits: no two alike in a second of a busy serve."""
    second = int(time.time())
    last = _STAMP[0]
    if last[0] != second:  # formatting the time is most of what an id costs: once a second
        last = _STAMP[0] = (second, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second)))
    return f"{last[1]}-{secrets.token_hex(5)}"


def parse_now(text: str | None) -> datetime | None:
    """`--now`: an ISO 8601 date-time (a date alone means its midnight); naive means UTC."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"--now {text!r}: expected an ISO 8601 date-time such as 2025-01-15T09:30:00+01:00") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def project_key(root: Path, *, create: bool) -> bytes:
    """The project's transcript key (journal.integrity), made on first use when `create`."""
    from chainlang.journal.integrity import IntegrityError, load_key

    try:
        return load_key(root, create=create)
    except IntegrityError as exc:
        raise UsageError(f"cannot {'run' if create else 'resume'}: {exc}") from None


def take_lock(where: Path, *, create: bool = True) -> "RunLock":
    """The transcript's lock. Held by a live process: RunInUse (a UsageError naming it)."""
    from chainlang.journal.lock import RunLock

    try:  # RunInUse (a live process holds it) is a UsageError already, naming that process
        return RunLock.acquire(where, create=create)
    except FileNotFoundError:
        raise UsageError(f"cannot resume: {where}.head is missing: it holds the sealed end of the transcript, "
                         "without which records removed from its end could not be found (a transcript is copied "
                         "or moved together with its .head file)") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot lock the transcript: {exc.strerror or exc}") from None


def run_secrets(config: "ProjectConfig | None") -> Redactor:
    """The run's redaction service: the secrets it knows of when it starts (the API keys of
    the model tiers and of [decide], and the declared [secrets] that can be read)."""
    from chainlang.config.secrets import known_secret_values

    return Redactor(known_secret_values(config))
