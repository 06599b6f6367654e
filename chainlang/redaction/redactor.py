"""Secrets on every output surface (LANGUAGE.md §9, §16): the one redaction service of a run.

It sits at the bottom of the package graph (it imports nothing from chainlang), so the
journal, the output views, the store and the run all use the same one. The runner builds
one `Redactor` per run, holding the run's secrets (the decide model's API key, and any
value registered during the run with `add()`), and hands that same object to every surface
the run writes to: the transcript writer, the progress view, the notification function,
and the run's result (outputs and error) that the CLI prints. Error messages raised out
of a run are masked with it too (`scrub()`).

- `mask(text)` replaces every occurrence of every secret in a string by `***`;
- `redact(value)` does that in a JSON value, keys and numbers included.

A `Redactor` without secrets is free: `mask()` returns its argument after one attribute
test, and `secrets` (the list, longest first) is empty, which hot paths test before
calling anything. `add()` may be called while other threads mask: they see the secrets
before or after it, never half of it.

`escape_surrogates(text)` is the other half of "safe on every output": a string can hold
lone surrogates (U+D800-U+DFFF, e.g. from a tool that decoded bytes with
`surrogateescape`), which UTF-8 cannot encode. It writes each as the escape `\\udXXX`,
which in JSON text decodes back to the same string.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor", "escape_surrogates"]

#: What a secret is replaced with.
REDACTED = "***"

#: Secrets shorter than this are refused: masking e.g. every "a" would destroy the output.
MIN_SECRET_LENGTH = 4

_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """`text` with every lone surrogate written as `\\udXXX` (UTF-8 can then encode it)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Redactor:
    """Masks registered secrets in strings; built so that 'no secret present' is one C search."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets: list[str] = []  # longest first
        self._raw: re.Pattern[str] | None = None  # finds any secret in a Python string
        self._encoded: re.Pattern[str] | None = None  # finds any secret in compact JSON text
        self._snapshot: tuple[re.Pattern[str], list[str]] | None = None  # what mask() reads, in one load
        for secret in secrets:
            self.add(secret)

    def add(self, secret: object) -> None:
        if not isinstance(secret, str):
            raise TypeError(f"a secret must be a string, not {type(secret).__name__}")
        if len(secret) < MIN_SECRET_LENGTH:
            # never echo the value: it is a secret
            raise ValueError(
                f"refusing a secret of {len(secret)} character(s): secrets shorter than "
                f"{MIN_SECRET_LENGTH} characters cannot be redacted without destroying the transcript"
            )
        if secret in self.secrets:
            return
        secrets = sorted([*self.secrets, secret], key=len, reverse=True)
        raw = re.compile("|".join(re.escape(s) for s in secrets))
        # JSON escaping maps each character to a fixed sequence, so a string containing a
        # secret serializes to text containing the secret's serialized form.
        self._encoded = re.compile(
            "|".join(re.escape(json.dumps(s, ensure_ascii=False)[1:-1]) for s in secrets)
        )
        self._raw = raw
        self._snapshot = (raw, secrets)
        self.secrets = secrets

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:  # never the values
        return f"Redactor({len(self.secrets)} secret(s))"

    def line_may_leak(self, line: str) -> bool:
        """Whether compact JSON text (as the transcript writes it) may hold a secret."""
        return self._encoded is not None and self._encoded.search(line) is not None

    def mask(self, text: str) -> str:
        """`text` with every occurrence of every secret replaced by `***`.

        Overlapping or adjacent occurrences (of one secret or of several) are merged into a
        single `***`, so no fragment of a secret survives whichever one matched first.
        """
        snapshot = self._snapshot
        if snapshot is None or snapshot[0].search(text) is None:
            return text
        spans: list[tuple[int, int]] = []
        for secret in snapshot[1]:
            start = text.find(secret)
            while start != -1:
                spans.append((start, start + len(secret)))
                start = text.find(secret, start + 1)
        spans.sort()
        out: list[str] = []
        pos = 0
        cur_start, cur_end = spans[0]
        for start, end in spans[1:]:
            if start <= cur_end:
                cur_end = max(cur_end, end)
            else:
                out.append(text[pos:cur_start])
                out.append(REDACTED)
                pos = cur_end
                cur_start, cur_end = start, end
        out.append(text[pos:cur_start])
        out.append(REDACTED)
        out.append(text[cur_end:])
        return "".join(out)

    def redact(self, value: Any) -> Any:
        """A copy of the JSON value `value` with secrets masked in keys and values (the value
        itself when there is no secret)."""
        if self._snapshot is None:
            return value
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            # the text json.dumps writes for it
            text = int.__repr__(value) if isinstance(value, int) else float.__repr__(value)
            return REDACTED if self._snapshot[0].search(text) else value
        if isinstance(value, (list, tuple)):
            return [self.redact(item) for item in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                new_key = self.mask(key) if isinstance(key, str) else key
                if new_key in out:  # two keys that differ only in secrets: keep both
                    n = 2
                    while f"{new_key}#{n}" in out:
                        n += 1
                    new_key = f"{new_key}#{n}"
                out[new_key] = self.redact(item)
            return out
        return value

    def scrub(self, exc: BaseException) -> None:
        """Mask the secrets in an exception's message (its string `args`), in place, before
        it leaves the run: whoever prints it prints no secret."""
        if self._snapshot is not None and exc.args:
            exc.args = tuple(self.mask(arg) if isinstance(arg, str) else arg for arg in exc.args)
