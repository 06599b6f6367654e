"""Rendering diagnostics for people and for machines.

`render(diagnostics, fmt, sources)` turns already-sorted diagnostics into one of
the output formats of `chainlang check --format`:

- ``text``: ``file:line:col: severity: message [CL014 unknown-event]``, the
  source line with a caret under the problem, an optional hint, and a summary;
- ``json``: one JSON array of diagnostic objects;
- ``github``: GitHub Actions workflow commands (``::error file=...::message``);
- ``sarif``: a SARIF 2.1.0 log (for code-scanning uploads).

The format modules are imported only when asked for. Every format is
deterministic: the same diagnostics and sources give byte-identical output
(no timestamps, no paths beyond those the diagnostics carry), and the order of
the diagnostics is kept as given. Every non-empty output ends with a newline;
``github`` output for no diagnostics is the empty string.

No format shows a secret: messages, hints and the text format's source lines
are masked (`***`) with the secrets of the diagnostics' projects, as a run's
output is (see `chainlang.output.masking`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from chainlang.version import __version__

if TYPE_CHECKING:
    from chainlang.diagnostics import Diagnostic
    from chainlang.load.source import SourceFile
    from chainlang.redaction import Redactor

__all__ = ["FORMATS", "render"]

FORMATS: tuple[str, ...] = ("text", "json", "github", "sarif")


def render(
    diagnostics: Sequence[Diagnostic],
    fmt: str,
    sources: Mapping[str, SourceFile],
    *,
    color: bool = False,
    tool_version: str = __version__,
    files_checked: int | None = None,
    secrets: Redactor | None = None,
) -> str:
    """Render `diagnostics` (already sorted) in the output format `fmt`.

    `sources` maps a diagnostic's `file` to its text, for the source line and
    caret of the text format (a file missing from it only loses those lines).
    `color` adds ANSI colours to the text format; the caller decides (a
    terminal, and NO_COLOR unset). `tool_version` is the version the SARIF log
    names. `files_checked` is the file count of the text summary line (by
    default, the number of distinct files among the diagnostics). `secrets` are
    masked everywhere; by default, those of the projects of the diagnostics' files.
    """
    from chainlang.output.masking import masked, project_secrets

    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    if secrets is None:
        secrets = project_secrets({d.file for d in diagnostics})
    diagnostics = masked(diagnostics, secrets)
    if fmt == "text":
        from chainlang.output import text

        return text.render(diagnostics, sources, color=color, files_checked=files_checked, secrets=secrets)
    if fmt == "json":
        from chainlang.output import jsonfmt

        return jsonfmt.render(diagnostics)
    if fmt == "github":
        from chainlang.output import github

        return github.render(diagnostics)
    if fmt == "sarif":
        from chainlang.output import sarif

        return sarif.render(diagnostics, tool_version=tool_version, sources=sources, secrets=secrets)
    raise AssertionError(fmt)
