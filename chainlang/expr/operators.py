"""Which operand kinds each operator accepts, and the messages when they do
not. The static checker (``types.py``) applies these rules to types; the
evaluator (``evaluate.py``) checks values inline on its fast path and uses the
same messages, and the compliance suite runs every case through both.

Kinds are the JSON kinds of :func:`chainlang.expr.values.kind_of`: ``null``,
``boolean``, ``number``, ``string``, ``list``, ``object``.

* ``+``: number + number, string + string, list + list. ``- * / %``: numbers.
  Booleans are not numbers.
* ``< <= > >=``: two numbers or two strings.
* ``== !=``: any two values (JSON equality).
* ``contains`` (and ``in``/``not in`` with the sides swapped): a string
  container needs a string to look for, an object container a string key; a
  list container takes anything. ``matches``, ``startswith``, ``endswith``:
  two strings. When the container/subject is ``null`` every word operator
  gives ``false`` without looking at the other side.
* unary ``-``: a number.
"""

from __future__ import annotations

__all__ = [
    "OpFailure",
    "arith_kind",
    "order_check",
    "neg_check",
    "word_check",
    "arith_message",
    "order_message",
    "neg_message",
    "word_message",
    "word_subject_side",
]


class OpFailure(Exception):
    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


def arith_message(op: str, ka: str, kb: str) -> str:
    if op == "+":
        return f"'+' needs two numbers, two strings or two lists, got {ka} and {kb}"
    return f"'{op}' needs two numbers, got {ka} and {kb}"


def arith_kind(op: str, ka: str, kb: str) -> str:
    """The kind of ``a op b``; raises :class:`OpFailure` when the kinds do not
    work together."""
    if ka == "number" and kb == "number":
        return "number"
    if op == "+" and ka == kb and ka in ("string", "list"):
        return ka
    raise OpFailure("type", arith_message(op, ka, kb))


def order_message(op: str, ka: str, kb: str) -> str:
    return f"cannot compare {ka} with {kb} using '{op}': only two numbers or two strings compare"


def order_check(op: str, ka: str, kb: str) -> None:
    if ka == kb and ka in ("number", "string"):
        return
    raise OpFailure("type", order_message(op, ka, kb))


def neg_message(kind: str) -> str:
    return f"unary '-' needs a number, got {kind}"


def neg_check(kind: str) -> None:
    if kind != "number":
        raise OpFailure("type", neg_message(kind))


def word_subject_side(op: str) -> str:
    """Which operand is the container/subject: ``left`` or ``right``."""
    return "right" if op in ("in", "not_in") else "left"


def _shown(op: str) -> str:
    return "not in" if op == "not_in" else op


def word_message(op: str, subject: str, other: str) -> str:
    """Message for a word operator whose container/subject has kind
    ``subject`` and whose other operand has kind ``other``."""
    shown = _shown(op)
    if op in ("contains", "in", "not_in"):
        side = "right" if op != "contains" else "left"
        if subject not in ("string", "list", "object"):
            return f"'{shown}' needs a string, list or object on the {side}, got {subject}"
        if subject == "string":
            return f"'{shown}' on a string looks for a string, got {other}"
        return f"'{shown}' on an object looks for a string key, got {other}"
    if subject != "string":
        return f"'{shown}' needs a string on the left, got {subject}"
    what = "pattern" if op == "matches" else "string on the right"
    return f"'{shown}' needs a {what}, got {other}"


def word_check(op: str, subject: str, other: str) -> None:
    """Raises :class:`OpFailure` unless the kinds work together. A ``null``
    subject always works (the result is ``false``)."""
    if subject == "null":
        return
    if op in ("contains", "in", "not_in"):
        if subject == "list" or (subject in ("string", "object") and other == "string"):
            return
    elif subject == "string" and other == "string":
        return
    raise OpFailure("type", word_message(op, subject, other))
