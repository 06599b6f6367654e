"""Hover help: an event's description and schemas (as `chainlang describe` shows
them), or a rule code's title and page."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry

_TOKEN = re.compile(r"[A-Za-z0-9_.]+")
_RULE = re.compile(r"CL\d{3}")


def word_at(line: str, col: int) -> tuple[str, int, int] | None:
    """The token (event name, rule code, key) under column `col`, with its start and end."""
    for m in _TOKEN.finditer(line):
        if m.start() <= col <= m.end():
            return m.group(0).strip("."), m.start(), m.end()
    return None


def hover_markdown(word: str, registry: "Registry") -> str | None:
    spec = registry.get(word)
    if spec is not None:
        from chainlang.registry.describe import describe_text

        text = describe_text(spec)
        body = text[text.index("kind:"):] if "kind:" in text else text
        parts = [f"**{spec.name}** ({spec.kind} event)"]
        if spec.description:
            parts.append(spec.description.strip())
        parts.append(f"```text\n{body}\n```")
        return "\n\n".join(parts)
    if _RULE.fullmatch(word):
        from chainlang.diagnostics.rules import RULES_BY_ID
        from chainlang.lsp.convert import docs_base

        rule = RULES_BY_ID.get(word)
        if rule is None:
            return None
        out = f"**{rule.id}** `{rule.slug}` ({rule.severity}): {rule.title}"
        base = docs_base()
        if base is not None:
            from chainlang.output.sarif import help_uri

            out += f"\n\n[{rule.slug}]({help_uri(rule, base)})"
        return out
    return None
