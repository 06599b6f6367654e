"""What the store masks before it writes (LANGUAGE.md §16: nothing stored holds a secret),
and what the commands and pages that show stored rows mask again before they print.

Two rules, one per kind of stored value:

- `definition(value)`: the project's known secrets (`config.secrets.known_secret_values`:
  the model tiers' API keys and the declared `[secrets]`) replaced by `***`, and nothing
  else. For a task's definition (its hook or action, its timing and the values it
  captured; `task()` adds its descriptions, masked as data): a definition is code that
  must still check and run when it fires, so no guess at what *looks* like a secret may
  change it (a commit id, a `token:` param written as a template). A task that needs a
  secret when it fires refers to it as `{secrets.NAME}`, which is read then, never stored.
- `data(value)`: the known secrets, then the lexical rule of the thread events
  (`chainlang.redaction.mask_value`: secret-looking texts such as `password=...`, and the value
  of a key that names a secret). For what was *received* or *said*: emit payloads, thread
  events and summaries, the journal and the knowledge, the event log, a run's error.

Both are idempotent (masking a masked value changes nothing), so a definition read back
and masked again is the one stored, and digests of stored definitions stay stable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from chainlang.redaction import MIN_SECRET_LENGTH, Redactor, mask_secrets, mask_value

__all__ = ["StoreRedaction", "project_secrets"]


class StoreRedaction:
    """The masking a store applies to what it writes (see the module's docstring)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.known = Redactor(s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH)

    def __repr__(self) -> str:  # never the values
        return f"StoreRedaction({len(self.known.secrets)} known secret(s))"

    def definition(self, value: Any) -> Any:
        """`value` (JSON) with the known secrets masked, in keys and values."""
        return self.known.redact(value)

    def task(self, value: Any) -> Any:
        """A task's definition (or a row that shows one, `stdlib.task.describe`): `definition`,
        and its descriptions (free text, never run) masked as `data`."""
        value = self.definition(value)
        if not isinstance(value, dict):
            return value
        out = dict(value)
        if isinstance(out.get("description"), str):
            out["description"] = self.text(out["description"])
        hook = out.get("hook")
        if isinstance(hook, dict) and isinstance(hook.get("description"), str):
            out["hook"] = {**hook, "description": self.text(hook["description"])}
        return out

    def data(self, value: Any) -> Any:
        """`value` (JSON) with the known secrets and the secret-looking values masked."""
        return mask_value(self.known.redact(value))

    def text(self, value: str) -> str:
        """A text shown or stored: the known secrets and the secret-looking values masked."""
        return mask_secrets(self.known.mask(value))


def project_secrets(root: Path) -> list[str]:
    """The known secret values of the project at `root` (none without a chainlang.toml
    there). Raises the config's error when chainlang.toml cannot be read: a store that
    could not know the secrets must not be written."""
    from chainlang.config.project import CONFIG_NAME, load_config
    from chainlang.config.secrets import known_secret_values

    toml = Path(root) / CONFIG_NAME
    if not toml.is_file():
        return []
    return known_secret_values(load_config(toml))
