"""Diagnostics as GitHub Actions workflow commands, one per line::

    ::error file=chains/a.chain.yaml,line=3,col=7,endLine=3,endColumn=17,title=CL014 unknown-event::unknown event 'emial.send'

GitHub turns these into annotations on the pull request. Escaping follows the
Actions runner (and `@actions/core`): in the message ``%``, CR and LF become
``%25``, ``%0D`` and ``%0A``; property values also escape ``:`` and ``,``
(``%3A``, ``%2C``). A hint is added to the message on a line of its own.
Column properties are only sent for a span on a single line, as GitHub
requires; a diagnostic without a line (line 0) annotates the whole file.
"""

from __future__ import annotations

from collections.abc import Sequence

from chainlang.diagnostics import Diagnostic

__all__ = ["escape_data", "escape_property", "render"]


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: Sequence[Diagnostic]) -> str:
    return "".join(_command(d) + "\n" for d in diagnostics)


def _command(d: Diagnostic) -> str:
    command = "error" if d.severity == "error" else "warning"
    properties: list[tuple[str, str]] = [("file", d.shown_file)]
    if d.line >= 1:
        end_line = max(d.end_line, d.line)
        properties.append(("line", str(d.line)))
        if end_line == d.line and d.column >= 1:
            properties.append(("col", str(d.column)))
            properties.append(("endLine", str(end_line)))
            properties.append(("endColumn", str(max(d.end_column, d.column))))
        else:
            properties.append(("endLine", str(end_line)))
    properties.append(("title", f"{d.rule} {d.slug}"))
    message = d.message if not d.hint else f"{d.message}\nhint: {d.hint}"
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{command} {props}::{escape_data(message)}"
