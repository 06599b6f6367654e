"""LALR(1) tables of ``grammar/expr.lark``, computed by Lark.

The grammar file is the single source of truth and Lark does the LALR
analysis. The tables are plain data (lists, dicts, ints, strings), so they
are also written out as a generated module, ``chainlang/expr/_tables.py``:
a cold ``chainlang check`` then loads them in well under a millisecond and
never imports Lark (Lark import + analysis is ~150 ms). When the grammar file
no longer matches the generated module (its SHA-256 is recorded there), the
tables are computed by Lark in-process instead, so a stale module can slow
things down but never change what parses. ``tests/test_expr_parser.py``
fails while the module is stale; regenerate it with::

    python -m chainlang.expr._lalr

Table layout (what :mod:`chainlang.expr.parser` drives):

``states[s][symbol]``
    an int: ``>= 0`` shift/goto to that state, ``< 0`` reduce by rule ``~n``.
``rules[n]``
    ``(origin, size, kind, handler, flatten)``: ``kind`` is :data:`PASS` (a
    ``?rule`` with one child: the value is the child), :data:`CALL` (call the
    AST builder method ``handler`` with the children) or :data:`SPLICE` (a
    ``_rule`` or Lark's ``__x_star_n`` helper: its children are spliced into
    the parent's, as Lark does); ``flatten`` says a child may be a splice.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from chainlang.resources import data_dir

PASS, CALL, SPLICE = 0, 1, 2

Rule = tuple[str, int, int, str, bool]


@dataclass(frozen=True, slots=True)
class Tables:
    """The LALR tables of the expression grammar: states, rules, start and end."""
    states: list[dict[str, int]]
    rules: list[Rule]
    start: int
    end: int


def grammar_text() -> str:
    return (data_dir("grammar") / "expr.lark").read_text(encoding="utf-8")


def grammar_sha256(text: str) -> str:
    digest: str = _sha256()(text.encode("utf-8")).hexdigest()
    return digest


@cache
def _sha256() -> Any:
    """SHA-256 from CPython's built-in module when there is one (`_sha2` from 3.12, `_sha256`
    before): the same digest as hashlib's, without hashlib loading OpenSSL (~4 ms of every cold
    `chainlang check`, which computes this digest once)."""
    for name in ("_sha2", "_sha256"):
        try:
            return importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
    import hashlib

    return hashlib.sha256


@cache
def load_tables() -> Tables:
    """The tables for the grammar file as it is now (the generated ones when
    they match it, or when the grammar file cannot be read at all)."""
    from chainlang.expr import _tables as generated

    shipped = Tables(generated.STATES, generated.RULES, generated.START, generated.END)
    try:
        text = grammar_text()
    except (OSError, UnicodeDecodeError):  # pragma: no cover - a broken installation
        return shipped
    if generated.GRAMMAR_SHA256 == grammar_sha256(text):
        return shipped
    return build_tables(text)


def lark_parser(text: str | None = None, **options: Any) -> Any:
    """A Lark LALR parser for the grammar (Lark is imported here only)."""
    import lark

    return lark.Lark(
        grammar_text() if text is None else text,
        parser="lalr",
        lexer="contextual",
        start="start",
        **options,
    )


def build_tables(text: str) -> Tables:
    """Run Lark's LALR analysis of the grammar ``text``."""
    from lark.parsers.lalr_analysis import Shift

    parser = lark_parser(text)
    frontend = parser.parser.parser
    table = getattr(frontend, "_parse_table", None) or frontend.parser.parse_table
    rule_index: dict[Any, int] = {}
    reduce_rules = []
    for actions in table.states.values():
        for action, arg in actions.values():
            if action is not Shift and arg not in rule_index:
                rule_index[arg] = -1
                reduce_rules.append(arg)
    reduce_rules.sort(key=str)
    rules: list[Rule] = []
    for n, rule in enumerate(reduce_rules):
        rule_index[rule] = n
        origin = str(rule.origin.name)
        size = len(rule.expansion)
        flatten = any(
            not sym.is_term and str(sym.name).startswith("_") for sym in rule.expansion
        )
        if origin.startswith("_"):
            kind, handler = SPLICE, ""
        elif rule.options.expand1 and rule.alias is None and size == 1:
            kind, handler = PASS, ""
        else:
            kind, handler = CALL, str(rule.alias or origin)
        rules.append((origin, size, kind, handler, flatten))
    # Lark numbers states in an order that varies between runs: renumber them
    # breadth-first from the start state, symbols in sorted order, so that the
    # same grammar always gives the same tables.
    start = table.start_states["start"]
    number = {start: 0}
    queue = [start]
    while queue:
        state = queue.pop(0)
        for symbol in sorted(table.states[state], key=str):
            action, arg = table.states[state][symbol]
            if action is Shift and arg not in number:
                number[arg] = len(number)
                queue.append(arg)
    if len(number) != len(table.states):  # pragma: no cover - Lark keeps reachable states only
        raise RuntimeError("unreachable LALR states")
    states: list[dict[str, int]] = [{} for _ in range(len(number))]
    for state, actions in table.states.items():
        row = states[number[state]]
        for symbol, (action, arg) in sorted(actions.items(), key=lambda item: str(item[0])):
            row[str(symbol)] = number[arg] if action is Shift else ~rule_index[arg]
    return Tables(states, rules, 0, number[table.end_states["start"]])


def generate_module(text: str) -> str:
    """Source of ``_tables.py`` for the grammar ``text``."""
    tables = build_tables(text)
    lines = [
        '"""GENERATED by `python -m chainlang.expr._lalr` from grammar/expr.lark: do not edit."""',
        "",
        "# fmt: off",
        f"GRAMMAR_SHA256 = {grammar_sha256(text)!r}",
        f"START = {tables.start!r}",
        f"END = {tables.end!r}",
        "RULES = [",
    ]
    lines += [f"    {rule!r}," for rule in tables.rules]
    lines.append("]")
    lines.append("STATES = [")
    lines += [f"    {row!r}," for row in tables.states]
    lines.append("]")
    return "\n".join(lines) + "\n"


def main() -> None:  # pragma: no cover - developer tool
    from pathlib import Path

    target = Path(__file__).with_name("_tables.py")
    target.write_text(generate_module(grammar_text()), encoding="utf-8")
    print(f"wrote {target.name}")


if __name__ == "__main__":  # pragma: no cover
    main()
