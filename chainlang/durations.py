"""Durations as written in chains: `500ms`, `30s`, `5m`, `1h`, `1d`, `2w`, or compound `1h30m`
(`parse_duration`: timeouts, waits); and in words, `1 week 2 days`, `2h30m`
(`parse_duration_words`: the params of `tools.date_calc`, the interval of a scheduled task).

A leaf of the package graph (it imports nothing from chainlang): the model, the config,
the registry, the task system and the standard events all read durations."""

from __future__ import annotations

import re
from collections.abc import Mapping

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}

#: the longest timeout, delay or wait a chain may write (LANGUAGE.md §2): a year. A run that
#: waits longer is better started again later by a scheduled task (task.schedule, triggers:)
MAX_DURATION = 365 * 86400.0
MAX_DURATION_TEXT = "365d"


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration."""
    text = text.strip()
    if not _WHOLE.match(text):
        return None
    return sum(float(n) * _SECONDS[unit] for n, unit in _PART.findall(text))


DURATION_HINT = "write a number with a unit: 500ms, 30s, 5m, 1h, 1d, 2w (or compound: 1h30m)"


# -- durations in words: the params of tools.date_calc and task intervals ------------------

# unit (a relativedelta argument) -> the words that name it; matched case-insensitively
DURATION_UNITS: dict[str, tuple[str, ...]] = {
    "years": ("y", "yr", "yrs", "year", "years"),
    "months": ("mo", "mos", "month", "months"),
    "weeks": ("w", "wk", "wks", "week", "weeks"),
    "days": ("d", "day", "days"),
    "hours": ("h", "hr", "hrs", "hour", "hours"),
    "minutes": ("m", "min", "mins", "minute", "minutes"),
    "seconds": ("s", "sec", "secs", "second", "seconds"),
}
_UNIT_OF = {word: unit for unit, words in DURATION_UNITS.items() for word in words}
_UNITS_HINT = (
    "units: years (y, yr), months (mo), weeks (w, wk), days (d), hours (h, hr), minutes (m, min), "
    "seconds (s, sec), singular or plural"
)
_WORD_PART = re.compile(r"([0-9]+)\s*([a-z]+)")
_WORD_SEPARATOR = re.compile(r"\s*(?:,|\band\b)?\s*")
_MAX_AMOUNT = 10**7  # far beyond any date: years run from 1 to 9999


def parse_duration_words(text: str, *, param: str = "duration") -> dict[str, int]:
    """`'1 week 2 days'` → `{'weeks': 1, 'days': 2}`.

    A duration is one or more parts `<whole number><unit>`, with or without a
    space between them, separated by spaces, commas or `and`: `3 days`, `30m`,
    `2h30m`, `1 week, 2 days`, `1 year and 6 months`. Case does not matter.
    Raises ValueError naming `param` for anything else.
    """
    if not isinstance(text, str):
        raise ValueError(f"{param}: expected a duration like '1 week' or '30m', not {kind_in_words(text)}")
    stripped = text.strip()
    lowered = stripped.lower()
    if not lowered:
        raise ValueError(f"{param}: the duration is empty: write a number with a unit, e.g. '3 days' ({_UNITS_HINT})")
    amounts: dict[str, int] = {}
    position = 0
    while position < len(lowered):
        part = _WORD_PART.match(lowered, position)
        if part is None:
            rest = stripped[position:] if len(stripped) == len(lowered) else lowered[position:]
            where = f" (from {rest!r} on)" if position else ""
            raise ValueError(
                f"{param}: cannot read {stripped!r} as a duration{where}: write whole numbers with units, "
                f"e.g. '1 week 2 days', '3 days', '2h30m' ({_UNITS_HINT})"
            )
        number, word = part.groups()
        unit = _UNIT_OF.get(word)
        if unit is None:
            raise ValueError(f"{param}: unknown unit {word!r} in {stripped!r} ({_UNITS_HINT})")
        amount = int(number) if len(number) <= 8 else _MAX_AMOUNT + 1
        if amount > _MAX_AMOUNT:
            raise ValueError(f"{param}: {number} {word} is out of range (dates run from year 1 to 9999)")
        amounts[unit] = amounts.get(unit, 0) + amount
        separator = _WORD_SEPARATOR.match(lowered, part.end())
        position = separator.end() if separator is not None else part.end()
    return amounts


def kind_in_words(value: object) -> str:
    """What a value is, for a message ("a number", "a list", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
