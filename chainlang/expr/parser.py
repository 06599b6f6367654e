"""Parsing expressions: ``parse_expression(text) -> Expr``.

The grammar is ``grammar/expr.lark`` (LALR(1)); Lark computes its tables
(see :mod:`chainlang.expr._lalr`). This module drives those tables with a
small shift/reduce loop and a lexer that implements exactly the grammar's
terminals with Lark's contextual-lexer rules, building the AST directly
while parsing (the same builder methods Lark calls when it parses the grammar
itself, which ``tests/test_expr_parser.py`` checks on random input). Driving
the tables here instead of through ``Lark.parse`` makes a parse 3-4x faster
and keeps Lark out of a cold start.

Lexical rules:

* whitespace (space, tab, form feed, CR, LF) separates tokens;
* names are ``[A-Za-z_][A-Za-z0-9_]*``; the keywords ``and or not`` (also
  ``AND OR NOT``), ``in contains matches startswith endswith true false null``
  are reserved: never the first name of a reference, but allowed after a dot
  (``event.params.in``);
* numbers are JSON numbers (``12``, ``3.5``, ``1e3``; no leading zeros).
  Where an operand is expected, ``-3`` is one literal (so ``-3 | string`` is
  ``'-3'``), elsewhere ``-`` is subtraction (``a-3`` is ``a - 3``);
* strings use single or double quotes with the escapes ``\\\\ \\' \\" \\n \\t
  \\r \\b \\f \\/ \\uXXXX`` (surrogate pairs combine). Any other backslash is
  kept as written, so regexes read naturally: ``x matches '\\d+'``.

Bounds: at most 4096 characters, at most 64 levels of nesting (brackets
``( [ {`` inside each other, and the depth of the tree: ``not not ... x``,
``a + a + ...`` count too); beyond that :class:`ExprSyntaxError` with
category ``limit`` (never a ``RecursionError``).

Results are memoised by text (the AST is immutable). A plain reference such
as ``tools.now.result.iso`` or ``team.members[-1]['a key']`` takes a regex
fast path that builds the very same AST without running the parser.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from chainlang.expr.ast import (
    Binary,
    BoolOp,
    Compare,
    Computed,
    Expr,
    Filter,
    Index,
    Key,
    ListLit,
    Literal,
    Name,
    Not,
    Ref,
    Subscript,
    Unary,
    depth,
)
from chainlang.expr.errors import ExprSyntaxError

__all__ = ["parse_expression", "MAX_EXPR_LENGTH", "MAX_DEPTH", "KEYWORDS"]

MAX_EXPR_LENGTH = 4096
MAX_DEPTH = 64

#: reserved words → terminal names of the grammar
KEYWORDS = {
    "or": "OR_L",
    "OR": "OR_U",
    "and": "AND_L",
    "AND": "AND_U",
    "not": "NOT_L",
    "NOT": "NOT_U",
    "in": "IN",
    "contains": "CONTAINS",
    "matches": "MATCHES",
    "startswith": "STARTSWITH",
    "endswith": "ENDSWITH",
    "true": "TRUE",
    "false": "FALSE",
    "null": "NULL",
}

_PUNCT = {
    "-": "MINUS",
    "+": "PLUS",
    "*": "STAR",
    "/": "SLASH",
    "%": "PERCENT",
    ".": "DOT",
    "[": "LSQB",
    "]": "RSQB",
    "(": "LPAR",
    ")": "RPAR",
    "{": "LBRACE",
    "}": "RBRACE",
    ",": "COMMA",
    "|": "VBAR",
}

_WS = "[ \t\f\r\n]*"
_NUMBER = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_STRING = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
_TOKEN_RE = re.compile(
    _WS
    + "(?:"
    + r"([A-Za-z_][A-Za-z0-9_]*)"  # 1 name or keyword
    + f"|({_NUMBER})"  # 2 number
    + f"|({_STRING})"  # 3 string
    + "|(==|!=|<=|>=|<|>)"  # 4 comparison
    + r"|([-+*/%.\[\](){},|])"  # 5 punctuation
    + "|($)"  # 6 end of text
    + ")",
    re.DOTALL,
)
_SIGNED_TAIL = re.compile(_NUMBER)
_SKIP_WS = re.compile(_WS)


class Tok:
    """A token; same attribute names as ``lark.Token`` so that the AST builder
    works on both."""

    __slots__ = ("type", "value", "start_pos", "end_pos")

    def __init__(self, type: str, value: str, start_pos: int, end_pos: int) -> None:
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.end_pos = end_pos

    def __repr__(self) -> str:
        return f"Tok({self.type}, {self.value!r}, {self.start_pos})"


class _Splice(list):  # type: ignore[type-arg]
    """Children of a ``_rule`` waiting to be spliced into the parent's."""

    __slots__ = ()


class _Args(tuple):  # type: ignore[type-arg]
    """Filter arguments."""

    __slots__ = ()


# ---------------------------------------------------------------- literals

_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "/": "/",
}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def _unquote(tok: Any) -> str:
    body: str = tok.value[1:-1]
    if "\\" not in body:
        return body
    base = tok.start_pos + 1
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        j = body.find("\\", i)
        if j < 0:
            out.append(body[i:])
            break
        out.append(body[i:j])
        esc = body[j + 1]
        if esc != "u":
            out.append(_ESCAPES.get(esc, "\\" + esc))
            i = j + 2
            continue
        hexdigits = body[j + 2 : j + 6]
        if len(hexdigits) < 4 or not all(c in "0123456789abcdefABCDEF" for c in hexdigits):
            raise ExprSyntaxError(
                "invalid \\u escape: it needs four hex digits", base + j, "write \\u00e9 for é"
            )
        code = int(hexdigits, 16)
        i = j + 6
        if 0xD800 <= code <= 0xDBFF:
            low = body[i : i + 6]
            if (
                len(low) == 6
                and low[:2] == "\\u"
                and all(c in "0123456789abcdefABCDEF" for c in low[2:])
                and 0xDC00 <= int(low[2:], 16) <= 0xDFFF
            ):
                code = 0x10000 + ((code - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)
                i += 6
            else:
                raise ExprSyntaxError(
                    "invalid \\u escape: a lone UTF-16 surrogate", base + j, None
                )
        elif 0xDC00 <= code <= 0xDFFF:
            raise ExprSyntaxError("invalid \\u escape: a lone UTF-16 surrogate", base + j, None)
        out.append(chr(code))
    return "".join(out)


def _number(tok: Any) -> int | float:
    text: str = tok.value
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ExprSyntaxError(f"number {text} is out of range", tok.start_pos)
        return value
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        raise ExprSyntaxError(f"number {text[:20]}... is too long", tok.start_pos) from None


# ---------------------------------------------------------------- AST builder


class Builder:
    """Builds AST nodes from a rule's children (tokens and nodes). Method names
    are the grammar's rule names and aliases. Tokens are kept (Lark's
    ``keep_all_tokens``) and ``_rules`` are spliced in. Children are lists of
    ``Tok``/``lark.Token`` and nodes."""

    def literal(self, c: list[Any]) -> Expr:
        tok = c[0]
        t = tok.type
        if t == "NUMBER":
            value: Any = _number(tok)
        elif t == "STRING":
            value = _unquote(tok)
        elif t == "TRUE":
            value = True
        elif t == "FALSE":
            value = False
        else:
            value = None
        return Literal(value, tok.start_pos, tok.end_pos)

    def list_lit(self, c: list[Any]) -> Expr:
        return ListLit(tuple(c[1:-1:2]), c[0].start_pos, c[-1].end_pos)

    def args(self, c: list[Any]) -> _Args:
        return _Args(c[0::2])

    def group(self, c: list[Any]) -> Expr:
        node: Expr = c[1]
        return node

    def ref(self, c: list[Any]) -> Expr:
        tok = c[0]
        segments = (Name(str(tok.value), tok.start_pos, tok.end_pos), *c[1:])
        return Ref(segments, tok.start_pos, segments[-1].end)

    def seg_name(self, c: list[Any]) -> Name:
        tok = c[1]
        return Name(str(tok.value), tok.start_pos, tok.end_pos)

    def seg_bracket(self, c: list[Any]) -> Index | Key | Computed:
        """``[0]`` and ``[-1]`` are indexes, ``['k']`` keys; any other
        expression is a computed index (LANGUAGE.md §4)."""
        inner: Expr = c[1]
        start, end = c[0].start_pos, c[2].end_pos
        if type(inner) is Literal:
            value = inner.value
            if type(value) is int:
                return Index(value, start, end)
            if type(value) is str:
                return Key(value, start, end)
            if type(value) is float:
                raise ExprSyntaxError(
                    f"index {value!r} is not a whole number",
                    inner.start,
                    "indexes are whole numbers: x[0], x[-1]",
                )
        return Computed(inner, start, end)

    def subscript(self, c: list[Any]) -> Expr:
        operand = c[0]
        segments = tuple(c[1:])
        return Subscript(operand, segments, operand.start, segments[-1].end)

    def neg(self, c: list[Any]) -> Expr:
        return Unary("-", c[1], c[0].start_pos, c[1].end)

    def binary(self, c: list[Any]) -> Expr:
        left, op, right = c
        return Binary(str(op.value), left, right, left.start, right.end)

    def word_op(self, c: list[Any]) -> Tok:
        if len(c) == 2:
            return Tok("WORD_OP", "not_in", c[0].start_pos, c[1].end_pos)
        tok = c[0]
        return Tok("WORD_OP", tok.type.lower(), tok.start_pos, tok.end_pos)

    def compare(self, c: list[Any]) -> Expr:
        left, op, right = c
        return Compare(str(op.value), left, right, left.start, right.end)

    def not_op(self, c: list[Any]) -> Expr:
        return Not(c[1], c[0].start_pos, c[1].end)

    def and_op(self, c: list[Any]) -> Expr:
        return BoolOp("and", c[0], c[2], c[0].start, c[2].end)

    def or_op(self, c: list[Any]) -> Expr:
        return BoolOp("or", c[0], c[2], c[0].start, c[2].end)

    def apply_filter(self, c: list[Any]) -> Expr:
        operand = c[0]
        name = c[2]
        args: tuple[Expr, ...] = c[4] if len(c) == 6 else ()
        return Filter(
            operand,
            str(name.value),
            tuple(args),
            name.start_pos,
            name.end_pos,
            operand.start,
            c[-1].end_pos,
        )


_BUILDER = Builder()


# ---------------------------------------------------------------- errors

_OPERAND_START = {"NAME", "NUMBER", "STRING", "TRUE", "FALSE", "NULL", "LSQB", "LPAR", "LBRACE"}
_WORD_OP_TYPES = {"CONTAINS", "IN", "MATCHES", "STARTSWITH", "ENDSWITH"}
_RESERVED = {"OR_L", "OR_U", "AND_L", "AND_U", "IN", *_WORD_OP_TYPES}
_CLOSERS = (("RPAR", "')'"), ("RBRACE", "'}'"), ("RSQB", "']'"), ("COMMA", "','"))


def _describe(tok: Tok) -> str:
    t = tok.type
    if t == "$END":
        return "end of expression"
    if t == "NAME":
        return f"name '{tok.value}'"
    if t == "NUMBER":
        return f"number {tok.value}"
    if t == "STRING":
        text = tok.value if len(tok.value) <= 30 else tok.value[:27] + "..."
        return f"string {text}"
    return f"'{tok.value}'"


def _viable(sstack: list[int], term: str) -> bool:
    """Would the parser, in the configuration ``sstack``, eventually shift
    ``term``? (LALR tables merge lookaheads, so a state's row alone may list
    terminals that a later reduction rejects.)"""
    tables = _TABLES
    states = tables.states
    stack = list(sstack)
    while True:
        action = states[stack[-1]].get(term)
        if action is None:
            return False
        if action >= 0:
            return True
        origin, size = _RULES[~action][:2]
        if size:
            del stack[-size:]
        goto = states[stack[-1]][origin]
        if term == "$END" and goto == tables.end:
            return True
        stack.append(goto)


def _expected_terms(sstack: list[int]) -> set[str]:
    global _TERMINALS
    if not _TERMINALS:
        _TERMINALS = frozenset(
            k for row in _TABLES.states for k in row if k[0] == "$" or k.isupper()
        )
    return {t for t in _TERMINALS if _viable(sstack, t)}


_TERMINALS: frozenset[str] = frozenset()


def _expected(terms: set[str]) -> str:
    if "NAME" in terms and "NUMBER" in terms:
        return "a value"
    if "NAME" in terms and "NUMBER" not in terms and "LPAR" not in terms:
        return "a name" if "TRUE" in terms else "a filter name"
    parts = []
    if "PLUS" in terms or "VBAR" in terms or "AND_L" in terms:
        parts.append("an operator")
    parts.extend(text for name, text in _CLOSERS if name in terms)
    if "$END" in terms:
        parts.append("the end of the expression")
    if not parts:
        return "something else"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _unexpected(tok: Tok, sstack: list[int], prev: Tok | None) -> ExprSyntaxError:
    t = tok.type
    terms = _expected_terms(sstack)
    message = f"unexpected {_describe(tok)}; expected {_expected(terms)}"
    hint = None
    operator_position = "PLUS" in terms or "AND_L" in terms
    prev_t = prev.type if prev is not None else None
    if t == "$END" and prev is None:
        message = "empty expression"
    elif t == "VBAR" and prev_t == "VBAR":
        hint = "write 'or' for a boolean or; '|' applies a filter"
    elif (t == "COMP_OP" or t in _WORD_OP_TYPES) and operator_position and "COMP_OP" not in terms:
        hint = "comparisons do not chain; combine them with 'and': a < b and b < c"
    elif t == "NAME" and operator_position and tok.value.lower() in KEYWORDS:
        hint = f"operators are written in lower case: '{tok.value.lower()}'"
    elif t == "LPAR" and prev_t == "NAME" and operator_position:
        hint = "there are no function calls; apply a filter instead: value | name(args)"
    elif t == "RSQB" and prev_t == "LSQB":
        hint = "write the index between the brackets: x[0], x[-1], x['key'] or x[expression]"
    elif t == "RBRACE" and prev_t == "LBRACE":
        hint = "there are no object literals; braces only group an expression: {a.b}"
    elif t == "NUMBER" and prev_t == "DOT":
        hint = "index lists with brackets: x[0]"
    elif t in _RESERVED and "NAME" in terms:
        hint = f"'{tok.value}' is a reserved word; it cannot start a reference"
    elif t in _OPERAND_START and operator_position:
        hint = "is an operator missing?"
    return ExprSyntaxError(message, tok.start_pos, hint)


_CHAR_HINTS = {
    "=": ("'='", "compare with '=='"),
    "&": ("'&'", "write 'and' for a boolean and"),
    "!": ("'!'", "write 'not' for a negation, '!=' for not equal"),
    ":": ("':'", "there are no object literals; braces only group an expression: {a.b}"),
}


def _bad_character(text: str, pos: int) -> ExprSyntaxError:
    pos = _SKIP_WS.match(text, pos).end()  # type: ignore[union-attr]
    ch = text[pos]
    if ch in "'\"":
        return ExprSyntaxError(
            "unterminated string", pos, f"close the string with {ch}"
        )
    described, hint = _CHAR_HINTS.get(ch, (repr(ch), None))
    return ExprSyntaxError(f"unexpected character {described}", pos, hint)


# ---------------------------------------------------------------- the driver


def _flatten(children: list[Any]) -> list[Any]:
    out: list[Any] = []
    for child in children:
        if type(child) is _Splice:
            out.extend(child)
        else:
            out.append(child)
    return out


_TABLES: Any = None
_RULES: list[tuple[str, int, int, Any, bool]] = []


def _load() -> Any:
    global _TABLES, _RULES
    from chainlang.expr._lalr import CALL, load_tables

    tables = load_tables()
    rules = []
    for origin, size, kind, handler, flatten in tables.rules:
        fn = getattr(_BUILDER, handler) if kind == CALL else None
        rules.append((origin, size, kind, fn, flatten))
    _RULES = rules
    _TABLES = tables
    return tables


_UNIT: dict[tuple[int, int, str], int] = {}
_LITERAL_TYPES = frozenset({"NUMBER", "STRING", "TRUE", "FALSE", "NULL"})


def _unit_chain(key: tuple[int, int, str]) -> int:
    """The top state after every unit reduction that the lookahead triggers
    on top of ``below``."""
    below, top, typ = key
    states = _TABLES.states
    while True:
        action = states[top].get(typ)
        if action is None or action >= 0:
            return int(top)
        origin, _size, kind = _RULES[~action][:3]
        if kind != 0:
            return int(top)
        top = states[below][origin]
        if top == _TABLES.end and typ == "$END":
            return int(top)


def _parse(text: str) -> Expr:
    tables = _TABLES or _load()
    states = tables.states
    rules = _RULES
    end_state = tables.end
    sstack = [tables.start]
    vstack: list[Any] = []
    match = _TOKEN_RE.match
    pos = 0
    prev: Tok | None = None
    brackets = 0
    unit = _UNIT
    ref_at = _REF_AT.match
    literal = _BUILDER.literal
    while True:
        acts = states[sstack[-1]]
        m = match(text, pos)
        if m is None:
            raise _bad_character(text, pos)
        g = m.lastindex
        end = m.end()
        start = m.start(g)  # type: ignore[arg-type]
        if g == 1:
            value = m.group(1)
            typ = KEYWORDS.get(value, "NAME")
            if typ == "NAME" and "ref" in acts:
                # A whole plain reference at once: shift NAME, its segments
                # and reduce `ref`, as the tables would, in one step.
                rm = ref_at(text, start)
                if rm is not None:
                    node = _build_ref(rm)
                    sstack.append(acts["ref"])
                    vstack.append(node)
                    prev = Tok("NAME", value, start, node.end)
                    pos = node.end
                    continue
        elif g == 2:
            typ = "NUMBER"
            value = m.group(2)
        elif g == 3:
            typ = "STRING"
            value = m.group(3)
        elif g == 4:
            typ = "COMP_OP"
            value = m.group(4)
        elif g == 5:
            value = m.group(5)
            typ = _PUNCT[value]
            if typ == "MINUS" and "NUMBER" in acts:
                tail = _SIGNED_TAIL.match(text, end)
                if tail is not None:
                    typ = "NUMBER"
                    end = tail.end()
                    value = text[start:end]
            elif value in "([{":
                brackets += 1
                if brackets > MAX_DEPTH:
                    raise _too_deep(start)
            elif value in ")]}":
                brackets -= 1
        else:
            typ = "$END"
            value = ""
        tok = Tok(typ, value, start, end)
        if typ in _LITERAL_TYPES and "literal" in acts:
            # shift + reduce `literal` in one step (unless the literal is bad:
            # then the tables report whichever error comes first)
            try:
                lit = literal([tok])
            except ExprSyntaxError:
                pass
            else:
                sstack.append(acts["literal"])
                vstack.append(lit)
                prev = tok
                pos = end
                continue
        before = sstack[:]
        while True:
            action = acts.get(typ)
            if action is None:
                raise _unexpected(tok, before, prev)
            if action >= 0:
                sstack.append(action)
                vstack.append(tok)
                break
            origin, size, kind, fn, flatten = rules[~action]
            if kind == 0:
                # A chain of unit reductions (?rule with one child) keeps the
                # value and the state below; only the top state changes, and
                # where it ends depends on (below, top, lookahead) alone.
                key = (sstack[-2], sstack[-1], typ)
                top = unit.get(key)
                if top is None:
                    top = unit[key] = _unit_chain(key)
                sstack[-1] = top
                if top == end_state and typ == "$END":
                    result: Expr = vstack[-1]
                    return result
                acts = states[top]
                continue
            else:
                if size:
                    children = vstack[-size:]
                    del vstack[-size:]
                    del sstack[-size:]
                else:
                    children = []
                if flatten:
                    if kind == 2 and type(children[0]) is _Splice:
                        # left-recursive helper (a, b, c, ...): grow in place
                        head = children[0]
                        head.extend(children[1:])
                        vstack.append(head)
                    else:
                        children = _flatten(children)
                        vstack.append(_Splice(children) if kind == 2 else fn(children))
                else:
                    vstack.append(_Splice(children) if kind == 2 else fn(children))
            goto = states[sstack[-1]][origin]
            sstack.append(goto)
            if goto == end_state and typ == "$END":
                return vstack[-1]  # type: ignore[no-any-return]
            acts = states[goto]
        prev = tok
        pos = end


# ---------------------------------------------------------------- fast path

_NAME_TAIL = r"[A-Za-z_][A-Za-z0-9_]*"
_INDEX = r"-?(?:0|[1-9][0-9]*)"
_SEGMENT = rf"\.({_NAME_TAIL})|\[({_INDEX})\]|\['([^'\\]*)'\]|\[\"([^\"\\]*)\"\]"
_PLAIN_REF = re.compile(rf"{_WS}({_NAME_TAIL})((?:{_SEGMENT})*){_WS}", re.DOTALL)
_SEGMENT_RE = re.compile(_SEGMENT)
# A plain reference inside a longer expression. It must not be followed by
# `.` or `[` (a segment the regex did not take: the grammar would go on with
# it, or fail inside it), and the quantifiers are possessive so that the
# regex cannot back off to a shorter match that dodges that lookahead.
# CPython 3.11 mishandles capturing groups inside a possessive repeat, so the
# segments are matched without groups here and split by _SEGMENT_RE later.
_SEGMENT_NC = rf"\.{_NAME_TAIL}|\[{_INDEX}\]|\['[^'\\]*'\]|\[\"[^\"\\]*\"\]"
_REF_AT = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_]*+)((?:{_SEGMENT_NC})*+)[ \t\f\r\n]*+(?![.\[])", re.DOTALL
)


def _build_ref(m: re.Match[str]) -> Ref:
    """The Ref for a match of :data:`_REF_AT` or :data:`_PLAIN_REF` (group 1
    the root name, group 2 the segments): exactly what the grammar builds."""
    root = m.group(1)
    start = m.start(1)
    segments: list[Any] = [Name(root, start, m.end(1))]
    tail = m.group(2)
    if tail:
        base = m.start(2)
        for s in _SEGMENT_RE.finditer(tail):
            name, index, key1, key2 = s.groups()
            s_start = base + s.start()
            if name is not None:
                segments.append(Name(name, s_start + 1, base + s.end()))
            elif index is not None:
                segments.append(Index(int(index), s_start, base + s.end()))
            else:
                segments.append(Key(key1 if key1 is not None else key2, s_start, base + s.end()))
    return Ref(tuple(segments), start, segments[-1].end)


def _fast_ref(text: str) -> Ref | None:
    """The AST of a text that is one plain reference (``a.b[0]['k']``), or
    None if ``text`` is anything else."""
    m = _PLAIN_REF.fullmatch(text)
    if m is None or m.group(1) in KEYWORDS:
        return None
    return _build_ref(m)


# ---------------------------------------------------------------- public


@lru_cache(maxsize=8192)
def parse_expression(text: str) -> Expr:
    """Parse an expression (§4 of the language contract).

    Used for ``if:``, hook ``condition:``, ``foreach:`` and the expressions
    inside templates. ``{ expr }`` groups like parentheses, so both
    ``sender contains 'Sarah'`` and ``"{tools.now.hour} > 12"`` parse.

    Raises :class:`ExprSyntaxError` (``offset`` = 0-based offset of the
    offending token in ``text``; category ``limit`` for text longer than
    4096 characters or nesting deeper than 64 levels).
    """
    if len(text) > MAX_EXPR_LENGTH:
        raise ExprSyntaxError(
            f"expression is too long ({len(text)} characters, at most {MAX_EXPR_LENGTH})",
            MAX_EXPR_LENGTH,
            "split it into steps",
            category="limit",
        )
    fast = _fast_ref(text)
    if fast is not None:
        return fast
    expr = _parse(text)
    if len(text) > MAX_DEPTH:  # every level of nesting costs at least one character
        _check_depth(expr)
    return expr


def _too_deep(offset: int) -> ExprSyntaxError:
    return ExprSyntaxError(
        f"expression is nested too deeply (more than {MAX_DEPTH} levels)",
        offset,
        "split it into simpler expressions",
        category="limit",
    )


def _check_depth(expr: Expr) -> None:
    if depth(expr) <= MAX_DEPTH:
        return
    # report the first node that is too deep
    stack = [(expr, 1)]
    from chainlang.expr.ast import children

    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH:
            raise _too_deep(node.start)
        stack.extend((child, d + 1) for child in reversed(children(node)))
