"""The `tools` standard events: the run's clock and date arithmetic.

`tools.now` reads the run's clock (`ctx.now()`, pinned by `chainlang run --now`).
`tools.date_calc` works on a date or a date-time in four stages, always in this
order: read `from`, apply `add` or `subtract`, apply `find`, then `format`.

Values keep their precision: a date stays a date (`2024-01-15`) and a date-time
stays a date-time, with its UTC offset if it had one. Adding hours, minutes or
seconds to a date makes it a date-time (at midnight plus the duration); `find`
names a day, so its result is a date. `format: iso` (the default) writes the
value in its precision; `date` always writes `YYYY-MM-DD`; `week_range` writes
the Monday and Sunday of the value's week. Weeks start on Monday.

The calendar arithmetic is dateutil's (`relativedelta`, `isoparse`): months
and years first, clamped to the end of a shorter month (Jan 31 + 1 month is
Feb 29 in a leap year), then weeks, days, hours, minutes and seconds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any

from chainlang.durations import DURATION_UNITS, kind_in_words, parse_duration_words

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["DURATION_UNITS", "FIND_PHRASES", "WEEKDAYS", "date_calc", "now", "parse_duration_words"]

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# -- tools.now --------------------------------------------------------------------


def now(ctx: RunContext) -> dict[str, Any]:
    """The run's current date and time, to the second, in the clock's UTC offset."""
    moment = ctx.now()
    if moment.tzinfo is None or moment.utcoffset() is None:  # a clock that forgot its zone: the machine's
        moment = moment.astimezone()
    moment = moment.replace(microsecond=0)
    iso = moment.isoformat(timespec="seconds")
    return {
        "iso": iso,
        "date": moment.date().isoformat(),
        "time": moment.strftime("%H:%M:%S"),
        "weekday": WEEKDAYS[moment.weekday()],
        "timestamp": int(moment.timestamp()),
        "year": moment.year,
        "month": moment.month,
        "day": moment.day,
        "hour": moment.hour,
        "minute": moment.minute,
        "second": moment.second,
        "timezone": iso[19:],  # the offset exactly as the iso field writes it: +00:00, -05:00
    }


# -- durations ----------------------------------------------------------------------

# parsed in chainlang.durations (task intervals read them too); the units are
# relativedelta's arguments
_TIME_UNITS = frozenset({"hours", "minutes", "seconds"})


# -- find ---------------------------------------------------------------------------------

# weekday word -> 0 (Monday) ... 6 (Sunday): full names, three-letter abbreviations and a few common others
_WEEKDAY_WORDS: dict[str, int] = {
    **{name.lower(): index for index, name in enumerate(WEEKDAYS)},
    **{name.lower()[:3]: index for index, name in enumerate(WEEKDAYS)},
    "tues": 1, "weds": 2, "thur": 3, "thurs": 3,
}


@functools.cache
def _dateutil() -> tuple[Any, Any, Any, tuple[Any, ...], Any, Any]:
    """dateutil's parts: (relativedelta, MO, SU, the weekdays MO to SU, isoparse, a date-only
    isoparser). Imported by the first date arithmetic, not with this module: a run that only
    reads the clock (tools.now) does without it (tens of milliseconds of a cold start)."""
    # dateutil ships no type information; with types-python-dateutil installed the
    # ignores are unused, hence `unused-ignore`
    from dateutil.parser import isoparse, isoparser  # type: ignore[import-untyped, unused-ignore]
    from dateutil.relativedelta import (  # type: ignore[import-untyped, unused-ignore]
        FR,
        MO,
        SA,
        SU,
        TH,
        TU,
        WE,
        relativedelta,
    )

    return relativedelta, MO, SU, (MO, TU, WE, TH, FR, SA, SU), isoparse, isoparser()

FIND_PHRASES = (
    "today",
    "tomorrow",
    "yesterday",
    "last <weekday>",
    "next <weekday>",
    "this <weekday>",
    "start of week",
    "end of week",
    "start of month",
    "end of month",
    "start of year",
    "end of year",
)
_FIND_HINT = (
    "accepted: today, tomorrow, yesterday, last <weekday>, next <weekday>, this <weekday>, "
    "start of week|month|year, end of week|month|year"
)
_WEEKDAY_PHRASE = re.compile(r"(last|next|this) ([a-z]+)")
_PERIOD_PHRASE = re.compile(r"(start|beginning|end) of (?:the )?(week|month|year)")


def _find(day: date, phrase: object) -> date:
    """The day that `phrase` names, relative to `day` (see FIND_PHRASES and the module docs)."""
    if not isinstance(phrase, str):
        raise ValueError(f"find: expected a phrase like 'last Tuesday', not {kind_in_words(phrase)} ({_FIND_HINT})")
    words = " ".join(phrase.lower().split())
    relativedelta, MO, SU, weekdays, _, _ = _dateutil()
    shift: Any  # a relativedelta
    if words == "today":
        shift = relativedelta()
    elif words == "tomorrow":
        shift = relativedelta(days=+1)
    elif words == "yesterday":
        shift = relativedelta(days=-1)
    elif match := _WEEKDAY_PHRASE.fullmatch(words):
        which, name = match.groups()
        index = _WEEKDAY_WORDS.get(name)
        if index is None:
            raise ValueError(
                f"find: {name!r} in {phrase.strip()!r} is not a weekday (Monday ... Sunday, or Mon ... Sun)"
            )
        weekday = weekdays[index]
        if which == "last":  # the most recent one strictly before the day: 1 to 7 days back
            shift = relativedelta(days=-1, weekday=weekday(-1))
        elif which == "next":  # the first one strictly after the day: 1 to 7 days ahead
            shift = relativedelta(days=+1, weekday=weekday(+1))
        else:  # the one in the day's Monday-Sunday week, before or after the day
            # (two steps: relativedelta applies `weekday` after `days`)
            monday: date = day + relativedelta(weekday=MO(-1))
            day, shift = monday, relativedelta(days=index)
    elif match := _PERIOD_PHRASE.fullmatch(words):
        edge, period = match.groups()
        first = edge != "end"
        if period == "week":
            shift = relativedelta(weekday=MO(-1) if first else SU(+1))
        elif period == "month":
            shift = relativedelta(day=1 if first else 31)  # day=31 is clamped to the month's last day
        else:
            shift = relativedelta(month=1, day=1) if first else relativedelta(month=12, day=31)
    else:
        raise ValueError(f"find: unknown phrase {phrase.strip()!r} ({_FIND_HINT})")
    try:
        found: date = day + shift
    except (ValueError, OverflowError):
        raise ValueError(f"find: {phrase.strip()!r} is out of range (dates run from year 1 to 9999)") from None
    return found


# -- tools.date_calc -------------------------------------------------------------------

_PARAMS = ("from", "add", "subtract", "find", "format")
_FORMATS = ("iso", "date", "week_range")
_FROM_HINT = (
    "an ISO 8601 date or date-time ('2024-01-15', '2024-01-15T10:30:00+01:00'), a tools.now result "
    "(its iso is used) or a tools.date_calc result (a date string, or {start, end})"
)


def date_calc(ctx: RunContext | None = None, **params: Any) -> str | dict[str, str]:
    """Date arithmetic: `from`, plus `add` or minus `subtract`, then `find`, in `format`.

    Takes the params by their schema names (`from` is a Python keyword, hence
    `**params`). Returns a string (format `iso` or `date`) or `{start, end}`
    (format `week_range`). Raises ValueError for invalid input.
    """
    unknown = [name for name in params if name not in _PARAMS]
    if unknown:
        raise ValueError(f"unknown param {unknown[0]!r} (accepted: {', '.join(_PARAMS)})")
    if "from" not in params:
        raise ValueError(f"from: missing; give the starting point: {_FROM_HINT}")
    add, subtract = params.get("add"), params.get("subtract")
    find, form = params.get("find"), params.get("format")
    if form is None:
        form = "iso"
    if form not in _FORMATS:
        raise ValueError(f"format: unknown format {form!r} (accepted: {', '.join(_FORMATS)})")
    if add is not None and subtract is not None:
        raise ValueError("add and subtract cannot be used together: give one of them (use two steps to do both)")

    value = read_from(params["from"])
    if add is not None:
        value = _shift(value, parse_duration_words(add, param="add"), +1, "add")
    if subtract is not None:
        value = _shift(value, parse_duration_words(subtract, param="subtract"), -1, "subtract")
    if find is not None:
        value = _find(_day(value), find)

    if form == "date":
        return _day(value).isoformat()
    if form == "week_range":
        day = _day(value)
        relativedelta, MO, SU, _, _, _ = _dateutil()
        try:
            start: date = day + relativedelta(weekday=MO(-1))
            end: date = day + relativedelta(weekday=SU(+1))
        except (ValueError, OverflowError):
            raise ValueError(f"format: the week of {day.isoformat()} is out of range (dates run from year 1 to 9999)") from None
        return {"start": start.isoformat(), "end": end.isoformat()}
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return value.isoformat()


def read_from(value: object) -> date | datetime:
    """The starting point of date_calc: a date (no time given) or a datetime."""
    if isinstance(value, Mapping):
        for key in ("iso", "date", "start"):  # tools.now result, then a date object, then a week range
            if key in value:
                text = value[key]
                if not isinstance(text, str):
                    raise ValueError(f"from: the {key!r} field must be an ISO 8601 string, not {kind_in_words(text)}")
                return _parse(text, f"from.{key}")
        raise ValueError(f"from: an object needs an 'iso', 'date' or 'start' field; expected {_FROM_HINT}")
    if isinstance(value, str):
        return _parse(value, "from")
    raise ValueError(f"from: expected {_FROM_HINT}, not {kind_in_words(value)}")


def _parse(text: str, param: str) -> date | datetime:
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"{param}: empty; expected {_FROM_HINT}")
    _, _, _, _, isoparse, date_only = _dateutil()
    try:
        day: date = date_only.parse_isodate(stripped)  # a date alone: 2024-01-15, 20240115, 2024-W03-1
        return day
    except ValueError:
        pass
    try:
        moment: datetime = isoparse(stripped)
        return moment
    except (ValueError, OverflowError) as exc:
        reason = " ".join(str(exc).split()) or "not ISO 8601"
        raise ValueError(f"{param}: cannot read {stripped!r} as a date ({reason}); expected {_FROM_HINT}") from None


def _shift(value: date | datetime, amounts: dict[str, int], sign: int, param: str) -> date | datetime:
    """`value` moved by the duration; a date becomes a date-time when hours, minutes or seconds move it."""
    if not isinstance(value, datetime) and any(amounts.get(unit) for unit in _TIME_UNITS):
        value = datetime.combine(value, time())  # midnight
    signed = {unit: sign * amounts.get(unit, 0) for unit in DURATION_UNITS}
    relativedelta = _dateutil()[0]
    delta = relativedelta(
        years=signed["years"], months=signed["months"], weeks=signed["weeks"], days=signed["days"],
        hours=signed["hours"], minutes=signed["minutes"], seconds=signed["seconds"],
    )
    try:
        moved: date | datetime = value + delta
    except (ValueError, OverflowError):
        raise ValueError(f"{param}: the result is out of range (dates run from year 1 to 9999)") from None
    return moved


def _day(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value

