"""The shape of a filter: shared by :mod:`chainlang.expr.filters` (the
allow-list and the scalar filters) and :mod:`chainlang.expr.list_filters`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chainlang.expr.types import Type

__all__ = ["FilterSpec"]


@dataclass(frozen=True, slots=True)
class FilterSpec:
    """One filter of the expression language: its arity, what it does, and the type it gives."""
    name: str
    min_args: int
    max_args: int
    impl: Callable[..., Any]
    static: Callable[[Type, list[Type]], Type]
    summary: str
