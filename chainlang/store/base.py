"""What the store's callers see without loading a database library: its error and a claim.

Kept apart from `store.py` so that `import chainlang.store` (and the CLI) stays light.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_KEY_LENGTH", "EmitClaim", "StoreError", "check_key"]

MAX_KEY_LENGTH = 200


class StoreError(Exception):
    """The store cannot do what was asked; the message names the file and what to do."""


@dataclass(frozen=True)
class EmitClaim:
    """An emit id's row: `new` is True only for the call that claimed it.

    A repeat (`new=False`) carries the first claim's event, run and transcript, so the
    caller can point at that run instead of starting another one.
    """

    new: bool
    key: str
    event: str
    run_id: str
    transcript: str
    status: str  # 'started', then the run's final status ('ok', 'failed', ...)
    created_at: str
    finished_at: str | None


def check_key(key: object, what: str = "emit id") -> str:
    """Return `key` if it can be an id in the store, else raise StoreError saying why."""
    if not isinstance(key, str):
        raise StoreError(f"the {what} must be text, not {type(key).__name__}")
    if not key:
        raise StoreError(f"the {what} is empty; give 1 to {MAX_KEY_LENGTH} characters")
    if len(key) > MAX_KEY_LENGTH:
        raise StoreError(f"the {what} is {len(key)} characters long; at most {MAX_KEY_LENGTH} are allowed")
    for i, ch in enumerate(key):
        if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            raise StoreError(f"the {what} has a control character ({ch!r}) at position {i + 1}; "
                             "use printable characters only")
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise StoreError(f"the {what} has bytes that are not UTF-8 at position {i + 1}; "
                             "use printable UTF-8 text only")
    return key
