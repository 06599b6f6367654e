"""The one Diagnostic type shared by every stage, and the catalogue of rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

Severity = Literal["error", "warning"]

MAX_MESSAGE = 400  # a diagnostic quotes user text; never let a hostile file make it huge


class Region(Protocol):
    """Where a diagnostic points (1-based, end exclusive): `chainlang.load.source.Span` is one.
    A protocol, so that diagnostics sit below the loader that reports them."""

    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def end_line(self) -> int: ...
    @property
    def end_column(self) -> int: ...


# C0/C1 controls and the bidirectional overrides that can disguise text on a terminal
_INVISIBLE = {c: f"\\x{c:02x}" for c in list(range(0x20)) + list(range(0x7F, 0xA0))}
_INVISIBLE.update({c: f"\\u{c:04x}" for c in (0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def visible(text: str) -> str:
    """`text` with control and bidi-override characters shown as escapes (\\x1b, \\u202e)."""
    if text.isprintable():  # no control or format characters at all: the common case, at C speed
        return text
    return text.translate(_INVISIBLE)


def _bounded(text: str | None) -> str | None:
    if text is None:
        return None
    text = visible(text)
    if len(text) <= MAX_MESSAGE:
        return text
    return text[: MAX_MESSAGE - 1] + "…"


@dataclass(frozen=True, slots=True)
class Rule:
    """A stable kind of problem: `CL014` / `unknown-event`."""

    id: str
    slug: str
    severity: Severity
    title: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a file: its rule, severity, message, place and, when known, how to fix it."""
    rule: str  # stable id, e.g. "CL014"
    slug: str  # e.g. "unknown-event"
    severity: Severity
    message: str
    file: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int
    hint: str | None = None  # how to fix it, when we know

    @property
    def shown_file(self) -> str:
        """The file name as printed (control characters escaped; `file` stays the lookup key)."""
        return visible(self.file)

    def __str__(self) -> str:
        return f"{self.shown_file}:{self.line}:{self.column}: {self.severity}: {self.message} [{self.rule}]"

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line, self.column, self.rule, self.message)

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "severity": self.severity,
            "rule": self.rule,
            "slug": self.slug,
            "message": self.message,
            "hint": self.hint,
        }


def sort_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Sorted by position, without exact duplicates."""
    return sorted(set(diags), key=Diagnostic.sort_key)


def has_errors(diags: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diags)


@dataclass
class DiagnosticSink:
    """Collects diagnostics for one file; stages append, nobody raises."""

    file: str
    items: list[Diagnostic] = field(default_factory=list)

    def add(
        self,
        rule: Rule,
        message: str,
        span: Region,
        hint: str | None = None,
        severity: Severity | None = None,
    ) -> None:
        self.items.append(
            Diagnostic(
                rule=rule.id,
                slug=rule.slug,
                severity=severity or rule.severity,
                message=_bounded(message) or "",
                file=self.file,
                line=span.line,
                column=span.column,
                end_line=span.end_line,
                end_column=span.end_column,
                hint=_bounded(hint),
            )
        )
