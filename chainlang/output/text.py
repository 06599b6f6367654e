"""Human-readable diagnostics, in the style of rustc and ruff.

For each diagnostic::

    chains/a.chain.yaml:12:7: error: unknown event 'emial.send' [CL014 unknown-event]
      12 |   - emial.send: {to: bob}
         |     ^~~~~~~~~~
      hint: did you mean 'email.send'?

with a blank line between diagnostics, then a summary line such as
``2 errors, 1 warning in 3 files`` or ``no problems found in 3 files``.

Columns are counted in characters (code points); the caret line is laid out
in terminal cells so that it stays under the right character when the line
holds tabs (expanded to tab stops every `TAB_WIDTH` cells), wide characters
(two cells) or combining marks (none). Control characters of the source are
shown as their Unicode control pictures (so a file cannot send escape codes to
the terminal), and a CRLF line ending is dropped. A secret in the line is
shown as `***` (the caret stays under the character it marks).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

from chainlang.diagnostics import Diagnostic
from chainlang.load.source import SourceFile
from chainlang.output.masking import secret_spans
from chainlang.redaction import REDACTED, Redactor

__all__ = ["TAB_WIDTH", "render", "summary"]

TAB_WIDTH = 4

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_CYAN = "\x1b[36m"
_BLUE = "\x1b[34m"
_SEVERITY = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m"}


def render(
    diagnostics: Sequence[Diagnostic],
    sources: Mapping[str, SourceFile],
    *,
    color: bool = False,
    files_checked: int | None = None,
    secrets: Redactor | None = None,
) -> str:
    """`secrets` are masked in the source lines shown (the caller masks messages and hints)."""
    secrets = secrets or Redactor()
    blocks = [_diagnostic(d, sources.get(d.file), color, secrets) for d in diagnostics]
    if files_checked is None:
        files_checked = len({d.file for d in diagnostics})
    line = summary(diagnostics, files_checked)
    blocks.append(_style(line, _BOLD, color))
    return "\n\n".join(blocks) + "\n"


def summary(diagnostics: Sequence[Diagnostic], files_checked: int) -> str:
    """``N errors, M warnings in K files``, or ``no problems found in K files``."""
    files = _plural(files_checked, "file")
    if not diagnostics:
        return f"no problems found in {files}"
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings = len(diagnostics) - errors
    return f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')} in {files}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _style(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color else text


def _diagnostic(d: Diagnostic, source: SourceFile | None, color: bool, secrets: Redactor) -> str:
    severity_code = _SEVERITY.get(d.severity, _BOLD)
    location = _style(f"{d.shown_file}:{d.line}:{d.column}", _CYAN, color)
    severity = _style(d.severity, severity_code, color)
    lines = [f"{location}: {severity}: {_printable(d.message)} [{d.rule} {d.slug}]"]

    snippet = _snippet(d, source, secrets)
    if snippet is not None:
        shown, caret = snippet
        number = str(d.line)
        gutter = _style(f"  {number} |", _BLUE, color)
        blank_gutter = _style(f"  {' ' * len(number)} |", _BLUE, color)
        lines.append(f"{gutter} {shown}".rstrip())
        pad, marks = caret
        lines.append(f"{blank_gutter} {' ' * pad}{_style(marks, severity_code, color)}")

    if d.hint:
        label = _style("hint", _BOLD, color)
        first, *rest = (_printable(part) for part in d.hint.split("\n"))
        lines.append(f"  {label}: {first}")
        lines.extend(f"        {part}" for part in rest)
    return "\n".join(lines)


def _snippet(d: Diagnostic, source: SourceFile | None,
             secrets: Redactor | None = None) -> tuple[str, tuple[int, str]] | None:
    """The displayed source line and (padding, ``^~~``) of the caret, or None."""
    if source is None:
        return None
    last_line = source.position(len(source.text))[0]
    if not 1 <= d.line <= last_line:
        return None
    text = source.line_text(d.line).removesuffix("\r")
    hidden = secret_spans(text, secrets) if secrets else []  # found in the whole line: a window may cut one
    # a very long line (minified JSON) is cut to a window around the column first, so
    # many diagnostics on one huge line cost nothing more than on a short one
    offset = 0
    if len(text) > 4 * MAX_SHOWN:
        offset = max(0, min(d.column - 1, len(text)) - 2 * MAX_SHOWN)
        text = text[offset : offset + 4 * MAX_SHOWN]
    cells = _cells(text)
    for start, end in hidden:  # each secret shows as one `***`, its other characters as nothing
        start, end = max(start - offset, 0), min(end - offset, len(cells))
        for i in range(start, end):
            cells[i] = (REDACTED, len(REDACTED)) if i == start else ("", 0)
    start = min(max(d.column - offset, 1), len(text) + 1) - 1
    end = start + 1
    if d.end_line == d.line and d.end_column > d.column:
        end = max(start + 1, min(d.end_column - offset, len(text) + 1) - 1)
    # a very long line is shown as a window around the problem, marked with …
    lo, hi = 0, len(cells)
    if sum(width for _, width in cells) > MAX_SHOWN:
        lo = max(0, start - WINDOW_BEFORE)
        hi = min(len(cells), lo + MAX_SHOWN - 2)
        end = min(end, max(hi, start + 1))
    lead = "…" if lo > 0 or offset > 0 else ""
    tail = "…" if hi < len(cells) else ""
    pad = len(lead) + sum(width for _, width in cells[lo:start])
    span = max(1, sum(width for _, width in cells[start:end]))
    shown = lead + "".join(glyph for glyph, _ in cells[lo:hi]) + tail
    return shown, (pad, "^" + "~" * (span - 1))


MAX_SHOWN = 160  # cells of a source line shown at most
WINDOW_BEFORE = 60  # of which before the caret


def _cells(text: str) -> list[tuple[str, int]]:
    """Each character of `text` as it is shown, with its width in cells."""
    cells: list[tuple[str, int]] = []
    position = 0
    for char in text:
        if char == "\t":
            width = TAB_WIDTH - position % TAB_WIDTH
            glyph = " " * width
        else:
            glyph = _picture(char)
            width = _width(glyph)
        cells.append((glyph, width))
        position += width
    return cells


def _width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _picture(char: str) -> str:
    """A visible stand-in for a control character; other characters as they are."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code < 0xA0:
        return "\ufffd"
    return char


def _printable(text: str) -> str:
    """Message text without control characters (tabs are kept)."""
    if text.isprintable():
        return text
    return "".join(char if char == "\t" else _picture(char) for char in text)
