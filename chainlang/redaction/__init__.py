"""Keeping secrets out of every output and everything stored (LANGUAGE.md §9, §16).

A leaf of the package graph: it imports nothing from the rest of chainlang, so every layer
that writes something (the journal, the output views, the store, the run, the checker's
reports) imports it downward.

- `redactor`: `Redactor`, the secrets a run or a project knows by value, masked as `***`;
  `escape_surrogates`, for text that UTF-8 cannot encode;
- `lexical`: `mask_secrets` / `mask_value`, the rule for text that looks like a secret.
"""

from __future__ import annotations

from chainlang.redaction.lexical import SECRET_KEY, mask_secrets, mask_value
from chainlang.redaction.redactor import MIN_SECRET_LENGTH, REDACTED, Redactor, escape_surrogates

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor", "SECRET_KEY", "escape_surrogates", "mask_secrets",
           "mask_value"]
