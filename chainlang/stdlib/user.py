"""The `user` standard events: talking to the person the agent works for.

`user.notify` shows one line through the run's notifier (`ctx.notify`: stderr
of `chainlang run`) and appends a record to `notifications.jsonl` in the run's
state directory. The log is only ever appended to. Each record carries an `id`
derived from the step attempt's idempotency key, so a step that runs again with
the same key (a resumed run) neither logs nor shows the notification twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["LEVELS", "LOG_NAME", "notification_id", "notify"]

LEVELS = ("info", "success", "warning", "error")
LOG_NAME = "notifications.jsonl"

_LOCK = threading.Lock()  # parallel steps of one run; other processes: the file lock below


def notification_id(idempotency_key: str) -> str:
    """The stable id of the notification sent by the step attempt with this key."""
    return "ntf-" + hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()[:20]


def notify(ctx: RunContext, message: str, title: str | None = None, level: str = "info") -> dict[str, Any]:
    """Send the user a notification; returns `{"delivered": true, "id": ...}`."""
    if not isinstance(message, str) or not message.strip():
        raise ValueError("message: expected the non-empty text to show")
    if title is not None and not isinstance(title, str):
        raise ValueError("title: expected a short text, or leave it out")
    if level not in LEVELS:
        raise ValueError(f"level: unknown level {level!r} (accepted: {', '.join(LEVELS)})")

    ident = notification_id(ctx.idempotency_key)
    record = {
        "id": ident,
        "ts": ctx.now().isoformat(timespec="seconds"),
        "run_id": ctx.run_id,
        "step": ctx.step,
        "level": level,
        "title": title,
        "message": message,
    }
    if _append_once(ctx, _masked(ctx, record)):
        ctx.notify(notification_line(message, title, level))
    return {"delivered": True, "id": ident}


def _masked(ctx: RunContext, record: dict[str, Any]) -> dict[str, Any]:
    """`record` with the project's secrets masked: the log is kept on disk, and a message may
    quote a value a tool gave back (the line shown is masked by the run's notifier)."""
    if ctx.project is None:
        return record
    from chainlang.config.secrets import declared_secrets, known_secret_values
    from chainlang.redaction import Redactor

    values = known_secret_values(declared_secrets(ctx.project).config)
    return Redactor(values).redact(record) if values else record


def notification_line(message: str, title: str | None, level: str) -> str:
    """The one line shown to the user: `[level] title: message` (`[level] message` without a title)."""
    text = _one_line(message)
    heading = _one_line(title or "")
    return f"[{level}] {heading}: {text}" if heading else f"[{level}] {text}"


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _append_once(ctx: RunContext, record: dict[str, Any]) -> bool:
    """Append `record` to the log unless a record with its id is there; True when appended."""
    directory = ctx.state_dir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOG_NAME
    line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
    with _LOCK, open(path, "a+b") as handle:
        _lock_file(handle)
        handle.seek(0)
        existing = handle.read()
        if _logged(existing, str(record["id"])):
            return False
        if existing and not existing.endswith(b"\n"):  # a torn last line (a crash mid-write): keep it apart
            line = b"\n" + line
        handle.write(line)  # append mode: always at the end
        handle.flush()
        os.fsync(handle.fileno())
    return True


def _logged(log: bytes, ident: str) -> bool:
    needle = ident.encode("utf-8")
    for raw in log.splitlines():
        if needle not in raw:
            continue
        try:
            entry = json.loads(raw)
        except ValueError:  # a torn or foreign line: not a record
            continue
        if isinstance(entry, dict) and entry.get("id") == ident:
            return True
    return False


def _lock_file(handle: IO[bytes]) -> None:
    """An exclusive lock on the open log, released when it is closed (POSIX; elsewhere the thread lock only)."""
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def ask(ctx: RunContext, question: str, choices: Any = None, schema: Any = None, timeout: Any = None) -> dict[str, Any]:
    """Never called: a `user.ask` step is a wait (compile/wait_graph.py, runtime/wait_step.py)."""
    raise RuntimeError("user.ask is a wait: the interpreter runs it, not this function")
