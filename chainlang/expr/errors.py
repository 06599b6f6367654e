"""Errors of the expression language.

Every error carries a *category*, a stable string that tests, diagnostics and
the compliance suite rely on:

``syntax``
    the text is not an expression or template.
``type``
    operands or a filter input of types that do not work together
    (``'abc' < 3``, ``'a' + 1``, ``true + 1``, ``-'x'``, ``'x' | keys``).
``value``
    the types fit but the value does not (``'abc' | int``).
``arithmetic``
    division or modulo by zero, a result that is not a finite number or is
    too large.
``filter``
    an unknown filter or a wrong number of filter arguments.
``regex``
    a ``matches`` pattern that does not compile (or is rejected as too big).
``limit``
    a size or depth bound was exceeded (expression text longer than 4096
    characters, nesting deeper than 64, a string or list result larger than
    1,000,000 characters or items).

Offsets are 0-based character offsets into the parsed text: the expression
source for :class:`ExprEvalError` raised by the evaluator, the template text
for errors raised by ``parse_template``/``render_template``.
"""

from __future__ import annotations

__all__ = ["CATEGORIES", "ExprError", "ExprSyntaxError", "ExprEvalError"]

CATEGORIES = ("syntax", "type", "value", "arithmetic", "filter", "regex", "limit")


class ExprError(Exception):
    """Base class of every error raised by :mod:`chainlang.expr`."""

    category: str
    message: str

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


class ExprSyntaxError(ExprError):
    """The text does not parse (category ``syntax``) or is too big or too deep
    to parse safely (category ``limit``).

    ``offset`` is the 0-based offset of the offending token in the parsed text;
    ``hint`` is an optional suggestion for fixing it.
    """

    offset: int
    hint: str | None

    def __init__(
        self, message: str, offset: int, hint: str | None = None, category: str = "syntax"
    ) -> None:
        super().__init__(category, message)
        self.offset = offset
        self.hint = hint

    def shifted(self, delta: int) -> ExprSyntaxError:
        """The same error with its offset moved by ``delta`` (an expression's
        error reported in the template or file that embeds it)."""
        return ExprSyntaxError(self.message, self.offset + delta, self.hint, self.category)

    def __str__(self) -> str:
        text = f"{self.message} (at offset {self.offset})"
        return f"{text}; {self.hint}" if self.hint else text

    def __repr__(self) -> str:
        return (
            f"ExprSyntaxError({self.message!r}, {self.offset!r}, {self.hint!r}, "
            f"category={self.category!r})"
        )


class ExprEvalError(ExprError):
    """Evaluation failed. ``start``/``end`` delimit the failing node."""

    start: int
    end: int

    def __init__(self, category: str, message: str, start: int = 0, end: int = 0) -> None:
        super().__init__(category, message)
        self.start = start
        self.end = end

    def shifted(self, delta: int) -> ExprEvalError:
        return ExprEvalError(self.category, self.message, self.start + delta, self.end + delta)

    def __str__(self) -> str:
        return f"{self.category} error: {self.message}"

    def __repr__(self) -> str:
        return (
            f"ExprEvalError({self.category!r}, {self.message!r}, {self.start!r}, {self.end!r})"
        )
