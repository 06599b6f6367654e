"""The prompts sent to the model tiers (LANGUAGE.md §13): Jinja2 templates rendered in Jinja's
immutable sandbox, shipped in `chainlang/llm/prompts/` and overridable per project by a file
of the same name in its `prompts/` directory (`think.system.j2`, `chain.user.j2`...).

Data reaches a template only as values, and is written into the prompt by the `data` filter
as JSON inside `<data name="...">` ... `</data>`, with `<`, `>` and `&` escaped (`\\u003c`), so
nothing in a tool's result or a user's message can close the element or pass for the
prompt's own words. The rendered text is sent as it is: it is never rendered again.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["MAX_DATA_CHARS", "PromptError", "data_block", "messages", "render"]

MAX_DATA_CHARS = 24_000  # one data element; longer values are cut (and say so)
_SHIPPED = Path(__file__).parent / "prompts"


class PromptError(ValueError):
    """A project's prompt template cannot be read or rendered (one line, naming the file)."""


def data_block(value: Any, name: str = "data") -> str:
    """`value` as delimited data: JSON in a `<data>` element that its content cannot close."""
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=False)
    if len(text) > MAX_DATA_CHARS:
        text = text[:MAX_DATA_CHARS] + " …(cut)"
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    label = "".join(ch for ch in str(name) if ch.isalnum() or ch in "_-")[:40] or "data"
    return f'<data name="{label}">{text}</data>'


@lru_cache(maxsize=4)
def _environment() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)
    env.filters["data"] = data_block
    return env


@lru_cache(maxsize=64)
def _compiled(text: str) -> Any:
    """A template's text compiled once (a run renders the same few prompts many times)."""
    return _environment().from_string(text)


def _source(name: str, project: Path | None) -> tuple[str, str]:
    """(template text, where it comes from): the project's `prompts/NAME`, else the shipped one."""
    if project is not None:
        own = project / "prompts" / name
        if own.is_file():
            try:
                return own.read_text(encoding="utf-8"), f"prompts/{name}"
            except (OSError, UnicodeDecodeError) as exc:
                raise PromptError(f"prompts/{name}: cannot read: {exc}") from None
    return (_SHIPPED / name).read_text(encoding="utf-8"), f"chainlang's {name}"


def render(name: str, values: dict[str, Any], project: Path | None = None) -> str:
    """The template `name` rendered with `values`."""
    text, where = _source(name, project)
    try:
        return str(_compiled(text).render(**values)).strip()
    except Exception as exc:  # Jinja's errors, and what an expression raised: {{ 1/0 }}, a filter's wrong arguments
        raise PromptError(f"{where}: {type(exc).__name__}: {exc}") from None


def messages(task: str, values: dict[str, Any], project: Path | None = None,
             user: str | None = None) -> list[dict[str, str]]:
    """The chat messages of `task`: its system prompt and its user message (`TASK.user.j2`,
    or the template named by `user`)."""
    return [{"role": "system", "content": render(f"{task}.system.j2", values, project)},
            {"role": "user", "content": render(user or f"{task}.user.j2", values, project)}]
