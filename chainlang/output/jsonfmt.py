"""Diagnostics as one JSON array (``chainlang check --format json``).

Each object has the keys of `Diagnostic.to_json`, always all of them and
always in the same order: ``file``, ``line``, ``column``, ``end_line``,
``end_column`` (1-based, end exclusive), ``severity``, ``rule`` (``CL014``),
``slug`` (``unknown-event``), ``message`` and ``hint`` (``null`` when there is
none). No diagnostics give ``[]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from chainlang.diagnostics import Diagnostic

__all__ = ["render"]


def render(diagnostics: Sequence[Diagnostic]) -> str:
    items = [d.to_json() for d in diagnostics]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"
