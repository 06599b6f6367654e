"""chainlang diagnostics as LSP diagnostics."""

from __future__ import annotations

import os
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from chainlang.diagnostics import Diagnostic
from chainlang.diagnostics.rules import RULES_BY_ID
from chainlang.redaction import Redactor

SOURCE = "chainlang"

#: Added to an unknown-event diagnostic that the untrusted project's own tools may answer.
UNSURE_NOTE = "(the project's tools are not loaded in an untrusted workspace: it may be one of theirs)"


def docs_base() -> str | None:
    """The docs site's root when CHAINLANG_DOCS_URL names one; None leaves links out
    (the built-in default is a placeholder no editor should open)."""
    from chainlang.output.sarif import DOCS_URL, DOCS_URL_ENV, docs_url

    if not os.environ.get(DOCS_URL_ENV):
        return None
    base = docs_url()
    return None if base == DOCS_URL else base


def to_lsp(diag: Diagnostic, lines: Sequence[str], codec: PositionCodec | None = None, *,
           unsure: bool = False, secrets: Redactor | None = None) -> types.Diagnostic:
    """`diag` (1-based line/column in code points, end exclusive) as 0-based LSP
    positions in the client's position encoding (UTF-16 unless negotiated).
    `unsure`: the project's unloaded tools may answer it, so it is information, not an
    error. `secrets`: masked in the message and hint, as `run` masks them."""
    codec = codec or PositionCodec()
    start = types.Position(max(diag.line - 1, 0), max(diag.column - 1, 0))
    end_line, end_col = diag.end_line - 1, diag.end_column - 1
    if (end_line, end_col) <= (start.line, start.character):
        end_line, end_col = start.line, start.character + 1  # never an empty range: editors hide those
    rng = types.Range(_client(codec, lines, start), _client(codec, lines, types.Position(end_line, end_col)))
    message = diag.message + (f"\nhint: {diag.hint}" if diag.hint else "")
    if secrets:
        message = secrets.mask(message)
    severity = types.DiagnosticSeverity.Error if diag.severity == "error" else types.DiagnosticSeverity.Warning
    if unsure:
        message, severity = f"{message}\n{UNSURE_NOTE}", types.DiagnosticSeverity.Information
    rule = RULES_BY_ID.get(diag.rule)
    base = docs_base()
    href = None
    if rule is not None and base is not None:
        from chainlang.output.sarif import help_uri

        href = types.CodeDescription(href=help_uri(rule, base))
    return types.Diagnostic(
        range=rng,
        message=message,
        severity=severity,
        code=diag.rule,
        code_description=href,
        source=SOURCE,
    )


def _client(codec: PositionCodec, lines: Sequence[str], pos: types.Position) -> types.Position:
    """A code-point position as the client counts it; past the end of a line stays as is."""
    if pos.line >= len(lines):
        return pos
    line = lines[pos.line].rstrip("\r\n")
    if pos.character > len(line):
        return types.Position(pos.line, codec.client_num_units(line) + pos.character - len(line))
    return codec.position_to_client_units(lines, pos)
