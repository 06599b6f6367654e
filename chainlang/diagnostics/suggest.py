""""Did you mean …?" for every diagnostic, with bounded work.

Suggestions compare a word with candidates (difflib). A hostile file with
thousands of ids and thousands of unknown names would make that quadratic,
so each checked file gets a budget of comparisons (set by the pipeline with
`suggestion_budget`); once spent, diagnostics simply carry no suggestion.
The order of checks is fixed, so the result stays deterministic.
"""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Collection, Iterator

PER_FILE_BUDGET = 20_000  # candidates looked at per file: hundreds of ordinary suggestions
MAX_WORD = 100  # longer words get no suggestion

_budget: ContextVar[list[int] | None] = ContextVar("chainlang_suggestion_budget", default=None)


@contextmanager
def suggestion_budget(comparisons: int = PER_FILE_BUDGET) -> Iterator[None]:
    token = _budget.set([comparisons])
    try:
        yield
    finally:
        _budget.reset(token)


def affordable(count: int) -> bool:
    """Whether looking at `count` more candidates fits the budget (charges them if so)."""
    budget = _budget.get()
    if budget is None:
        return True
    if budget[0] < count:
        return False
    budget[0] -= count
    return True


def closest(word: str, candidates: Collection[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to `word` (never `word` itself), or None."""
    if not word or len(word) > MAX_WORD or not affordable(len(candidates)):
        return None
    # only names of a similar length can pass the cutoff: skip the rest cheaply
    slack = max(2, len(word) // 2)
    pool = sorted({c for c in candidates if c != word and abs(len(c) - len(word)) <= slack})
    found = difflib.get_close_matches(word, pool, n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, candidates: Collection[str]) -> str | None:
    """A hint 'did you mean 'x'?' or None."""
    found = closest(word, candidates)
    return f"did you mean '{found}'?" if found else None
