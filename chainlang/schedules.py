"""When a scheduled task is due (LANGUAGE.md §12): `at`, `interval` and `cron` read against
a clock, and the firings a scheduler owes after a pause (`misfire`).

- `at`: ISO 8601 (`2026-11-23T17:00:00+01:00`, `2026-11-23 17:00`; without a zone, the
  clock's), the forms the seed chains write, read here by a small exact grammar
  (`tomorrow 08:00`, `today 17:00`, `friday 9am`, `next monday at 09:30`, `17:00`,
  `in 2 hours`), and other English phrases through dateparser (the well-kept library for
  natural dates: 200+ locales, relative dates against a given base). The grammar comes
  first because dateparser silently drops parts it does not understand ("tomorrow at 8"
  gives tomorrow at the current time); whatever dateparser answers must be in the future.
- `interval`: a duration as chain files write them (`1 day`, `30m`, `1s`).
- `cron`: five fields, evaluated by cronsim (small, no dependencies, maintained by
  healthchecks.io, whose scheduler runs on it), in the clock's time zone.

Every function takes the time to read against (`now`, aware): the run's clock for
`task.schedule`, the scheduler's injectable clock for `serve`; nothing here reads the
system clock. Problems raise `ScheduleError` with a message that says what to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

__all__ = ["MISFIRE", "Schedule", "ScheduleError", "due_firings", "parse_at", "parse_schedule"]

MISFIRE = ("skip", "once", "all")
MAX_CATCH_UP = 1000  # firings `misfire: all` makes up at most, after a long pause

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY = r"(?P<day>today|tomorrow|(?:next\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)day|\d{4}-\d{2}-\d{2})"
_TIME = r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)?|(?P<word>noon|midnight)"
_DAY_TIME = re.compile(rf"^{_DAY}(?:\s+(?:at\s+)?(?:{_TIME}))?$")
_TIME_ONLY = re.compile(rf"^(?:at\s+)?(?:{_TIME})$")
_IN = re.compile(r"^in\s+(?P<n>\d+)\s*(?P<unit>seconds?|secs?|s|minutes?|mins?|m|hours?|h|days?|d|weeks?|w)$")


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says what to write instead."""


@dataclass(frozen=True)
class Schedule:
    """A `task.schedule`'s timing: `kind` once | delay | repeat; `first` the first firing;
    `every` the period of a repeat by interval; `cron` a cron expression (repeat)."""

    kind: str
    first: datetime
    every: timedelta | None = None
    cron: str | None = None

    def after(self, moment: datetime) -> datetime | None:
        """The first firing strictly after `moment` (None: a once/delay task has no more, nor
        has any task after the year 9999)."""
        if moment < self.first:
            return self.first
        try:
            if self.cron is not None:  # read in the zone it was scheduled in (the store gives UTC)
                return _cron_next(self.cron, moment.astimezone(self.first.tzinfo))
            if self.every is None:
                return None
            steps = (moment - self.first) // self.every + 1
            return self.first + steps * self.every
        except (OverflowError, StopIteration):
            return None

    def at_or_before(self, moment: datetime) -> datetime | None:
        """The last firing at or before `moment` (None: none is due by then)."""
        if moment < self.first:
            return None
        if self.cron is not None:
            local = moment.astimezone(self.first.tzinfo)
            found = _cron_previous(self.cron, local + timedelta(microseconds=1))
            return found if found >= self.first else self.first
        if self.every is None:
            return self.first
        return self.first + ((moment - self.first) // self.every) * self.every

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "first": self.first.isoformat()}
        key = getattr(self.first.tzinfo, "key", None)  # a named zone (ZoneInfo): kept, for cron across DST
        if isinstance(key, str):
            out["zone"] = key
        if self.every is not None:
            out["every_seconds"] = self.every.total_seconds()
        if self.cron is not None:
            out["cron"] = self.cron
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Schedule":
        every = data.get("every_seconds")
        first = datetime.fromisoformat(str(data["first"]))
        if data.get("zone"):
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                first = first.astimezone(ZoneInfo(str(data["zone"])))
            except (ZoneInfoNotFoundError, ValueError):
                pass  # its offset still holds
        return cls(str(data["kind"]), first, timedelta(seconds=float(every)) if every is not None else None,
                   data.get("cron"))


def parse_schedule(params: dict[str, Any], now: datetime) -> Schedule:
    """The timing of `task.schedule` params (`type`, `at`, `interval`, `cron`) read at `now`."""
    _aware(now)
    try:
        return _parse_schedule(params, now)
    except OverflowError:
        raise ScheduleError(f"{_given(params)}: too far from now (dates end with the year 9999)") from None


def _given(params: dict[str, Any]) -> str:
    return ", ".join(f"{key} {params[key]!r}" for key in ("at", "interval", "cron") if params.get(key) is not None)


def _parse_schedule(params: dict[str, Any], now: datetime) -> Schedule:
    kind = params.get("type")
    at, interval, cron = params.get("at"), params.get("interval"), params.get("cron")
    extra = {"once": ("interval", "cron"), "delay": ("at", "cron")}.get(str(kind), ())
    if kind == "repeat" and interval is not None and cron is not None:
        extra = ("interval", "cron")
    unused = [key for key in extra if params.get(key) is not None]
    if kind == "repeat" and len(unused) == 2:
        raise ScheduleError("a repeat task takes interval or cron, not both")
    if unused:
        use = {"once": "at", "delay": "interval"}[str(kind)]
        raise ScheduleError(f"a {kind} task takes {use}, not {unused[0]} (a repeat task takes interval or cron)")
    if kind == "once":
        if at is None:
            raise ScheduleError("a once task needs at: a time such as 'tomorrow 08:00' or '2026-11-23 17:00'")
        first = parse_at(str(at), now)
        if first <= now:
            raise ScheduleError(f"at {at!r} is {first.isoformat()}, which is not in the future (now: {now.isoformat()})")
        return Schedule("once", first)
    if kind == "delay":
        every = _interval(interval, "a delay task needs interval: how long to wait, e.g. '30m' or '1 day'")
        return Schedule("delay", now + every)
    if kind == "repeat":
        if cron is not None:
            expr = _check_cron(str(cron))
            first = parse_at(str(at), now) if at is not None else _cron_next(expr, now)
            return Schedule("repeat", first if first > now else _cron_next(expr, now), cron=expr)
        every = _interval(interval, "a repeat task needs interval (e.g. '1 day') or cron (e.g. '0 8 * * 1-5')")
        first = parse_at(str(at), now) if at is not None else now + every
        if first <= now:  # an `at` in the past starts the series at its next occurrence
            first += ((now - first) // every + 1) * every
        return Schedule("repeat", first, every=every)
    raise ScheduleError(f"type {kind!r}: a task is once (at a time), delay (after an interval) or repeat "
                        "(every interval, or by cron)")


def parse_at(text: str, now: datetime) -> datetime:
    """`at` as an aware date-time, read against `now` (its time zone for naive forms)."""
    _aware(now)
    raw = " ".join(text.strip().lower().split())
    if not raw or len(raw) > 100:
        raise ScheduleError(f"at {text[:40]!r}: give a time such as 'tomorrow 08:00' or '2026-11-23 17:00'")
    try:
        return _parse_at(text, raw, now)
    except OverflowError:
        raise ScheduleError(f"at {text!r}: too far from now (dates end with the year 9999)") from None


def _parse_at(text: str, raw: str, now: datetime) -> datetime:
    try:
        value = datetime.fromisoformat(raw.replace("z", "+00:00") if raw.endswith("z") else raw)
    except ValueError:
        value = None
    if value is not None:
        return value if value.tzinfo is not None else value.replace(tzinfo=now.tzinfo)
    found = _grammar(raw, now)
    if found is not None:
        return found
    return _dateparser(text, raw, now)


def due_firings(schedule: Schedule, last: datetime | None, now: datetime, misfire: str = "once") -> list[datetime]:
    """The firings owed at `now` to a task last fired at `last` (None: never), by `misfire`:
    `skip` owes only a firing due exactly now or later than every missed one (none when
    all were missed), `once` the latest missed firing, `all` every missed one (at most
    MAX_CATCH_UP)."""
    if misfire not in MISFIRE:
        raise ScheduleError(f"misfire {misfire!r}: one of {', '.join(MISFIRE)}")
    start = last if last is not None else schedule.first - timedelta(microseconds=1)
    wanted = MAX_CATCH_UP if misfire == "all" else 1
    missed: list[datetime] = []  # from the latest back: a long pause is not walked through
    moment = schedule.at_or_before(now)
    while moment is not None and moment > start and len(missed) < wanted:
        missed.append(moment)
        moment = schedule.at_or_before(moment - timedelta(microseconds=1))
    if not missed:
        return []
    missed.reverse()
    if misfire == "all":
        return missed
    if misfire == "once":
        return missed[-1:]
    return missed[-1:] if now - missed[-1] < timedelta(seconds=1) else []  # skip: only what is due right now


# -- the forms the seed writes

def _grammar(raw: str, now: datetime) -> datetime | None:
    match = _IN.match(raw)
    if match:
        n, unit = int(match.group("n")), match.group("unit")[0]
        seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
        return now + timedelta(seconds=n * seconds)
    match = _DAY_TIME.match(raw)
    if match:
        text = match.group("day")
        day = _day(text, now)
        at = _time(match, default=time(0, 0)) if (match.group("hour") or match.group("word")) else time(0, 0)
        moment = datetime.combine(day, at, tzinfo=now.tzinfo)
        earlier = moment - timedelta(days=7)
        if text in _WEEKDAYS and earlier > now:  # "sunday 10:00" said on a Sunday at 09:15: today
            return earlier
        return moment
    match = _TIME_ONLY.match(raw)
    if match:
        moment = datetime.combine(now.date(), _time(match, default=time(0, 0)), tzinfo=now.tzinfo)
        return moment if moment > now else moment + timedelta(days=1)  # "17:00" after five: tomorrow's
    return None


def _day(text: str, now: datetime) -> Any:
    if text == "today":
        return now.date()
    if text == "tomorrow":
        return now.date() + timedelta(days=1)
    if text[0].isdigit():
        try:
            return datetime.strptime(text, "%Y-%m-%d").date()
        except ValueError:
            raise ScheduleError(f"{text!r} is not a date (write YYYY-MM-DD)") from None
    name = text.split()[-1]
    ahead = (_WEEKDAYS.index(name) - now.weekday()) % 7 or 7  # "friday" on a Friday: a week on (unless
    # its time is still ahead today: see _grammar); "next friday" on a Friday: a week on
    return now.date() + timedelta(days=ahead)


def _time(match: re.Match[str], default: time) -> time:
    word = match.group("word")
    if word:
        return time(12, 0) if word == "noon" else time(0, 0)
    if match.group("hour") is None:
        return default
    hour, minute, ampm = int(match.group("hour")), int(match.group("minute") or 0), match.group("ampm")
    if ampm:
        if not 1 <= hour <= 12:
            raise ScheduleError(f"{hour}{ampm}: with am/pm the hour is 1 to 12")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ScheduleError(f"{hour:02d}:{minute:02d} is not a time of day")
    return time(hour, minute)


def _dateparser(text: str, raw: str, now: datetime) -> datetime:
    import dateparser

    offset = now.utcoffset() or timedelta(0)
    zone = f"{'+' if offset >= timedelta(0) else '-'}{abs(offset) // timedelta(hours=1):02d}" \
           f"{(abs(offset) % timedelta(hours=1)) // timedelta(minutes=1):02d}"
    value = dateparser.parse(raw, languages=["en"], settings={
        "RELATIVE_BASE": now.replace(tzinfo=None), "PREFER_DATES_FROM": "future", "TIMEZONE": zone,
        "TO_TIMEZONE": zone, "RETURN_AS_TIMEZONE_AWARE": True, "STRICT_PARSING": False})
    if value is None:
        raise ScheduleError(f"at {text!r}: not a time chainlang can read; write ISO 8601 ('2026-11-23T17:00') "
                            "or a form such as 'tomorrow 08:00', 'friday 9am', 'in 2 hours'")
    if value <= now:
        raise ScheduleError(f"at {text!r} reads as {value.isoformat()}, which is not in the future; write the "
                            "date and time out ('2026-11-23 17:00')")
    return value


# -- intervals and cron

_FIXED = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def _interval(text: Any, missing: str) -> timedelta:
    """A fixed-length duration, in the words of `tools.date_calc` ('1 day', '2h30m',
    '1 week 2 days'): months and years have no fixed length; use cron for those."""
    from chainlang.durations import parse_duration_words

    if text is None:
        raise ScheduleError(missing)
    try:
        parts = parse_duration_words(str(text), param="interval")
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None
    uneven = [unit for unit in parts if unit not in _FIXED]
    if uneven:
        raise ScheduleError(f"interval {text!r}: {uneven[0]} have no fixed length; write days or weeks, or use "
                            "cron (e.g. '0 9 1 * *' for the first of every month)")
    seconds = sum(_FIXED[unit] * n for unit, n in parts.items())
    if seconds < 1:
        raise ScheduleError(f"interval {text!r}: at least one second")
    return timedelta(seconds=seconds)


def _check_cron(expr: str) -> str:
    from cronsim import CronSim, CronSimError

    if len(expr) > 200:
        raise ScheduleError("cron: at most 200 characters")
    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ScheduleError(f"cron {expr!r}: {exc} (five fields: minute hour day-of-month month day-of-week, "
                            "e.g. '0 8 * * 1-5')") from None
    return expr


def _cron_next(expr: str, moment: datetime) -> datetime:
    from cronsim import CronSim

    zone = moment.tzinfo
    local = moment.replace(tzinfo=None)  # cron reads wall-clock fields in the clock's zone
    nxt: datetime = next(CronSim(expr, local))
    return nxt.replace(tzinfo=zone)


def _cron_previous(expr: str, moment: datetime) -> datetime:
    """The cron firing strictly before `moment`, in `moment`'s zone."""
    from cronsim import CronSim

    zone = moment.tzinfo
    found: datetime = next(CronSim(expr, moment.replace(tzinfo=None), reverse=True))
    return found.replace(tzinfo=zone)


def _aware(now: datetime) -> None:
    if now.tzinfo is None:
        raise TypeError("the clock's time must be time-zone aware")
