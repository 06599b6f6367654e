"""Templates: strings with embedded ``{expr}`` (the language contract §4).

Rules (Python f-string rules for braces):

* ``{expr}`` is replaced by the value of ``expr``; ``{{`` and ``}}`` are
  literal braces. A lone ``}`` is an error, so is an unclosed ``{`` and an
  empty ``{}``.
* Inside the braces, braces and quotes that belong to string literals do not
  end the expression (``"{x | default('}')}"``), and nested braces group
  (``"{ {a} + 1 }"``; note that ``{{`` right after ``{`` would be a literal
  brace, as in Python).
* A template that is exactly one ``{expr}`` (nothing around the braces)
  yields the value with its JSON type (list, object, number...). Otherwise
  each value is rendered as text (:func:`to_text`: strings as they are,
  ``null`` as empty, ``true``/``false``, numbers as JSON, lists and objects
  as compact JSON) and the pieces are concatenated.

Offsets: ``Embedded.offset`` is where the expression source (the text after
``{``) starts in the template, the AST inside is relative to that source.
``ExprSyntaxError`` from ``parse_template`` and ``ExprEvalError`` from
``render_template`` carry offsets in the template text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from chainlang.expr.ast import Expr, Ref
from chainlang.expr.errors import ExprEvalError, ExprSyntaxError
from chainlang.expr.parser import parse_expression
from chainlang.expr.values import MAX_SIZE, to_text

if TYPE_CHECKING:
    from chainlang.expr.evaluate import Compiled

__all__ = [
    "Embedded",
    "Template",
    "parse_template",
    "render_template",
    "compile_template",
    "to_text",
]


@dataclass(frozen=True, slots=True)
class Embedded:
    """An ``{expr}`` in a template; ``offset`` is where the expression source
    starts in the template text (just after the ``{``)."""

    expr: Expr
    offset: int


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text (braces unescaped) and embedded
    expressions, in order. ``single`` is the expression when the whole string
    is exactly one ``{expr}``."""

    parts: tuple[str | Embedded, ...]
    single: Expr | None = None
    source: str = ""

    @property
    def is_literal(self) -> bool:
        """No embedded expressions (the value is the unescaped text)."""
        return all(type(p) is str for p in self.parts)

    @property
    def embedded(self) -> tuple[Embedded, ...]:
        return tuple(p for p in self.parts if isinstance(p, Embedded))

    @property
    def text(self) -> str:
        """The literal value of a template without expressions."""
        return "".join(p for p in self.parts if isinstance(p, str))


# strings inside an expression, braces, and an unterminated quote
_SCAN_RE = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|['"{}]""", re.DOTALL)
_BRACE_RE = re.compile(r"[{}]")
# the most common template of all: "{a.b[0].c}" (the parser's fast path)
_WS = "[ \t\f\r\n]*"


def _close_of(text: str, open_at: int) -> int:
    """Offset of the ``}`` that closes the ``{`` at ``open_at``."""
    depth = 0
    for m in _SCAN_RE.finditer(text, open_at + 1):
        token = m.group()
        if len(token) > 1:
            continue
        if token == "{":
            depth += 1
        elif token == "}":
            if depth == 0:
                return m.start()
            depth -= 1
        else:
            raise ExprSyntaxError(
                "unterminated string in template expression",
                m.start(),
                f"close the string with {token}",
            )
    raise ExprSyntaxError(
        "'{' is not closed",
        open_at,
        "close the expression with '}', or write '{{' for a literal brace",
    )


@lru_cache(maxsize=16384)
def parse_template(text: str) -> Template:
    """Parse a template string. Raises :class:`ExprSyntaxError` with the
    offset in ``text``. Memoised by text."""
    if "{" not in text and "}" not in text:
        return Template((text,) if text else (), None, text)
    parts: list[str | Embedded] = []
    literal: list[str] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _BRACE_RE.search(text, pos)
        if m is None:
            literal.append(text[pos:])
            break
        at = m.start()
        if at > pos:
            literal.append(text[pos:at])
        if m.group() == "}":
            if text.startswith("}", at + 1):
                literal.append("}")
                pos = at + 2
                continue
            raise ExprSyntaxError(
                "single '}' is not allowed", at, "write '}}' for a literal brace"
            )
        if text.startswith("{", at + 1):
            literal.append("{")
            pos = at + 2
            continue
        close = _close_of(text, at)
        source = text[at + 1 : close]
        if not source.strip():
            raise ExprSyntaxError(
                "empty expression '{}'", at, "write '{{}}' for literal braces"
            )
        try:
            expr = parse_expression(source)
        except ExprSyntaxError as exc:
            raise exc.shifted(at + 1) from None
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(Embedded(expr, at + 1))
        pos = close + 1
    if literal:
        parts.append("".join(literal))
    single = None
    if len(parts) == 1 and isinstance(parts[0], Embedded):
        single = parts[0].expr
    return Template(tuple(parts), single, text)


def compile_template(template: Template) -> Callable[[Callable[[Ref], Any]], Any]:
    """Compile a template once to ``fn(resolve) -> value`` (see
    :func:`render_template`)."""
    from chainlang.expr.evaluate import compile_expression

    if template.single is not None:
        offset = template.parts[0].offset  # type: ignore[union-attr]
        fn = compile_expression(template.single)

        def single(resolve: Callable[[Ref], Any]) -> Any:
            try:
                return fn(resolve)
            except ExprEvalError as exc:
                raise exc.shifted(offset) from None

        return single
    if template.is_literal:
        value = template.text

        def literal(resolve: Callable[[Ref], Any]) -> Any:
            return value

        return literal
    pieces: list[tuple[str | None, Compiled | None, int, int]] = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append((part, None, 0, 0))
        else:
            pieces.append((None, compile_expression(part.expr), part.offset, part.expr.end))

    def concat(resolve: Callable[[Ref], Any]) -> Any:
        out: list[str] = []
        size = 0
        for text, fn, offset, end in pieces:
            if fn is None:
                assert text is not None
                out.append(text)
                size += len(text)
                continue
            try:
                value = fn(resolve)
                piece = to_text(value)
            except ExprEvalError as exc:
                if exc.start == exc.end == 0:  # from to_text: the whole expression
                    exc = ExprEvalError(exc.category, exc.message, 0, end)
                raise exc.shifted(offset) from None
            out.append(piece)
            size += len(piece)
            if size > MAX_SIZE:
                raise ExprEvalError(
                    "limit",
                    f"the rendered text would exceed {MAX_SIZE:,} characters",
                    offset,
                    offset + end,
                )
        return "".join(out)

    return concat


def render_template(template: Template, resolve: Callable[[Ref], Any]) -> Any:
    """Render a template: the native value for a single ``{expr}``, the
    unescaped text for a literal template, else the concatenated text.
    Raises :class:`ExprEvalError` with offsets in the template text."""
    return compile_template(template)(resolve)
