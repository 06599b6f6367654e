"""Hooks registered in Python (LANGUAGE.md §6.1): `chainlang.hook(...)` describes a hook
with the keys of a hook in a `*.hooks.yaml` file. A tools module that holds one (or a list
of them) at module level registers it, as `@event` registers a tool:

```python
from chainlang import hook

audit_copy = hook("pre:email.send", id="audit-copy", set={"cc": "audit@example.com"})
```

A program that builds its own registry calls `Registry.add_hook`. A registered hook is
checked, compiled and fired exactly like one written in a hooks file: `definition` is
turned into such a file (JSON text, which is YAML), so it gets the same diagnostics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HookDef", "hook", "hooks_file_text"]


@dataclass(frozen=True)
class HookDef:
    """One hook registered in Python: its keys as in a hooks file, and where it was made."""

    definition: dict[str, Any]
    source: str = field(default="", compare=False)

    def with_source(self, source: str) -> "HookDef":
        return HookDef(self.definition, source)


def hook(
    trigger: str,
    *,
    id: str | None = None,
    condition: str | None = None,
    action: list[Any] | None = None,
    set: dict[str, Any] | None = None,
    cancel: bool = False,
    priority: int = 0,
    after: list[str] | tuple[str, ...] = (),
    mode: str | None = None,
    max: int | None = None,
    max_depth: int | None = None,
    on_error: str | None = None,
    description: str | None = None,
) -> HookDef:
    """A hook with the keys of a hook in a hooks file (see docs/reference/hooks.md). Its
    problems are reported by `chainlang check` like those of a hooks file, at the hook's
    place in the registered source. Raises TypeError for values that are not JSON data."""
    definition: dict[str, Any] = {"trigger": trigger}
    optional = {"id": id, "condition": condition, "action": action, "set": set, "mode": mode, "max": max,
                "max_depth": max_depth, "on_error": on_error, "description": description}
    definition.update({k: v for k, v in optional.items() if v is not None})
    if cancel:
        definition["cancel"] = True
    if priority:
        definition["priority"] = priority
    if after:
        definition["after"] = list(after)
    try:
        json.dumps(definition, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"hook({trigger!r}): its keys must be JSON data (strings, numbers, lists, mappings): {exc}") from None
    return HookDef(definition)


def hooks_file_text(hooks: list[HookDef]) -> str:
    """The hooks of one Python source as the text of a hooks file (one hook per item)."""
    return json.dumps({"hooks": [h.definition for h in hooks]}, indent=2, ensure_ascii=False) + "\n"
