"""When scheduled tasks are due (chainlang.schedules): `at`, `interval` and `cron` read
against a fixed clock, and the firings owed after a pause. No test reads the real clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from chainlang.schedules import MAX_CATCH_UP, Schedule, ScheduleError, due_firings, parse_at, parse_schedule

CET = timezone(timedelta(hours=1))
FRIDAY_1650 = datetime(2026, 11, 20, 16, 50, tzinfo=CET)  # a Friday


def at(text: str, now: datetime = FRIDAY_1650) -> str:
    return parse_at(text, now).isoformat()


@pytest.mark.parametrize(("text", "expected"), [
    ("tomorrow 08:00", "2026-11-21T08:00:00+01:00"),
    ("Tomorrow  at 8", "2026-11-21T08:00:00+01:00"),  # dateparser alone reads this as tomorrow 16:50
    ("today 17:00", "2026-11-20T17:00:00+01:00"),
    ("2026-11-23 17:00", "2026-11-23T17:00:00+01:00"),  # the seed's form: the clock's zone
    ("2026-11-23T17:00:00Z", "2026-11-23T17:00:00+00:00"),
    ("2026-11-23T17:00:00-05:00", "2026-11-23T17:00:00-05:00"),
    ("next monday 09:00", "2026-11-23T09:00:00+01:00"),
    ("friday 9am", "2026-11-27T09:00:00+01:00"),  # on a Friday: next week's
    ("monday 12pm", "2026-11-23T12:00:00+01:00"),
    ("17:00", "2026-11-20T17:00:00+01:00"),
    ("16:00", "2026-11-21T16:00:00+01:00"),  # a time already past today: tomorrow's
    ("noon", "2026-11-21T12:00:00+01:00"),
    ("in 2 hours", "2026-11-20T18:50:00+01:00"),
    ("in 30 minutes", "2026-11-20T17:20:00+01:00"),
    ("2026-11-25", "2026-11-25T00:00:00+01:00"),
])
def test_at_forms(text: str, expected: str) -> None:
    assert at(text) == expected


def test_at_falls_back_to_dateparser_for_other_english() -> None:
    assert at("December 24 2026 6pm") == "2026-12-24T18:00:00+01:00"


@pytest.mark.parametrize(("text", "message"), [
    ("after work", "not a time chainlang can read"),
    ("", "give a time"),
    ("x" * 200, "give a time"),
    ("25:00", "not a time of day"),
    ("13pm", "the hour is 1 to 12"),
    ("2026-13-01 10:00", "not a date"),
])
def test_at_errors_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_at(text, FRIDAY_1650)


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(TypeError):
        parse_at("tomorrow 08:00", datetime(2026, 11, 20, 16, 50))


def test_once_must_be_in_the_future() -> None:
    with pytest.raises(ScheduleError, match="not in the future"):
        parse_schedule({"type": "once", "at": "2026-11-20 09:00"}, FRIDAY_1650)
    once = parse_schedule({"type": "once", "at": "tomorrow 08:00"}, FRIDAY_1650)
    assert once.after(FRIDAY_1650) == once.first and once.after(once.first) is None


def test_delay_and_repeat_by_interval() -> None:
    delay = parse_schedule({"type": "delay", "interval": "30m"}, FRIDAY_1650)
    assert delay.first == FRIDAY_1650 + timedelta(minutes=30) and delay.after(delay.first) is None
    daily = parse_schedule({"type": "repeat", "interval": "1 day", "at": "today 08:00"}, FRIDAY_1650)
    assert daily.first.isoformat() == "2026-11-21T08:00:00+01:00"  # today's 08:00 is past: the next one
    assert daily.after(daily.first) == daily.first + timedelta(days=1)
    every = parse_schedule({"type": "repeat", "interval": "2h30m"}, FRIDAY_1650)
    assert every.first == FRIDAY_1650 + timedelta(hours=2, minutes=30)


@pytest.mark.parametrize(("params", "message"), [
    ({"type": "repeat", "interval": "1 month"}, "no fixed length"),
    ({"type": "repeat", "interval": "soon"}, "cannot read"),
    ({"type": "repeat"}, "needs interval"),
    ({"type": "delay"}, "needs interval"),
    ({"type": "once"}, "needs at"),
    ({"type": "weekly"}, "a task is once"),
    ({"type": "repeat", "cron": "61 * * * *"}, "five fields"),
    ({"type": "repeat", "cron": "* *"}, "five fields"),
])
def test_schedule_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(params, FRIDAY_1650)


def test_cron_in_the_clocks_zone_across_a_dst_change() -> None:
    berlin = datetime(2026, 3, 28, 7, 0, tzinfo=ZoneInfo("Europe/Berlin"))  # clocks go forward on the 29th
    weekdays = parse_schedule({"type": "repeat", "cron": "0 8 * * *"}, berlin)
    first = weekdays.first
    second = weekdays.after(first)
    assert (first.hour, second.hour) == (8, 8)  # 08:00 wall-clock time on both sides of the change
    assert second.astimezone(timezone.utc) - first.astimezone(timezone.utc) == timedelta(hours=23)


def test_cron_weekdays() -> None:
    schedule = parse_schedule({"type": "repeat", "cron": "0 8 * * 1-5"}, FRIDAY_1650)
    assert schedule.first.isoformat() == "2026-11-23T08:00:00+01:00"  # Monday: the weekend is skipped
    assert Schedule.from_json(schedule.to_json()) == schedule


def test_misfire_policies_after_a_pause() -> None:
    daily = parse_schedule({"type": "repeat", "interval": "1 day", "at": "tomorrow 08:00"}, FRIDAY_1650)
    later = daily.first + timedelta(days=2, hours=1)  # three firings missed
    assert due_firings(daily, None, later, "all") == [daily.first + timedelta(days=d) for d in range(3)]
    assert due_firings(daily, None, later, "once") == [daily.first + timedelta(days=2)]
    assert due_firings(daily, None, later, "skip") == []
    on_time = daily.first + timedelta(days=2)
    assert due_firings(daily, None, on_time, "skip") == [on_time]  # due now: not a misfire
    assert due_firings(daily, on_time, on_time + timedelta(hours=1), "all") == []  # fired already
    with pytest.raises(ScheduleError):
        due_firings(daily, None, later, "twice")


def test_catching_up_is_bounded() -> None:
    every_second = parse_schedule({"type": "repeat", "interval": "1s"}, FRIDAY_1650)
    owed = due_firings(every_second, None, FRIDAY_1650 + timedelta(days=1), "all")
    assert len(owed) == MAX_CATCH_UP and owed[-1] == FRIDAY_1650 + timedelta(days=1)


def test_cron_reads_moments_in_the_zone_it_was_scheduled_in() -> None:
    """The scheduler reads due moments back from the store in UTC: the next firing of a
    cron schedule is still found by the wall clock of the zone it was scheduled in."""
    weekdays = Schedule.from_json(parse_schedule({"type": "repeat", "cron": "0 8 * * 1-5"}, FRIDAY_1650).to_json())
    monday = weekdays.first
    utc = monday.astimezone(timezone.utc)
    assert weekdays.after(utc) == monday + timedelta(days=1)
    assert weekdays.after(utc).isoformat() == "2026-11-24T08:00:00+01:00"  # type: ignore[union-attr]
    assert weekdays.at_or_before(utc + timedelta(days=4, hours=1)) == monday + timedelta(days=4)  # Friday
    assert weekdays.at_or_before(utc - timedelta(minutes=1)) is None  # before the first firing


def test_cron_firings_start_at_the_first_one() -> None:
    """A cron series that starts at `at`: no firing before it counts, and `at` itself is one."""
    hourly = parse_schedule({"type": "repeat", "cron": "0 * * * *", "at": "2026-11-21 10:30"}, FRIDAY_1650)
    assert hourly.first.isoformat() == "2026-11-21T10:30:00+01:00"
    assert hourly.after(FRIDAY_1650) == hourly.first
    assert hourly.after(hourly.first).isoformat() == "2026-11-21T11:00:00+01:00"  # type: ignore[union-attr]
    assert hourly.at_or_before(hourly.first + timedelta(minutes=10)) == hourly.first
    assert due_firings(hourly, None, hourly.first + timedelta(hours=2, minutes=5), "all") == \
        [hourly.first, hourly.first + timedelta(minutes=30), hourly.first + timedelta(minutes=90)]


@pytest.mark.parametrize("misfire", ["skip", "once", "all"])
def test_a_year_of_missed_firings_is_counted_back_from_now_not_walked(misfire: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    every_second = parse_schedule({"type": "repeat", "interval": "1s"}, FRIDAY_1650)
    every_minute = parse_schedule({"type": "repeat", "cron": "* * * * *"}, FRIDAY_1650)
    year = FRIDAY_1650 + timedelta(days=365, milliseconds=300)
    # not walked: the moments looked at are counted (31 million, were the year walked), not timed
    looked: list[datetime] = []
    at_or_before, after = Schedule.at_or_before, Schedule.after
    monkeypatch.setattr(Schedule, "at_or_before", lambda self, moment: looked.append(moment) or at_or_before(self, moment))
    monkeypatch.setattr(Schedule, "after", lambda self, moment: looked.append(moment) or after(self, moment))
    fast = due_firings(every_second, None, year, misfire)
    slow = due_firings(every_minute, None, year, misfire)
    expected = {"skip": 1, "once": 1, "all": MAX_CATCH_UP}[misfire]
    assert len(looked) <= 2 * (expected + 1), len(looked)  # one look per firing owed, and one more each
    assert len(fast) == len(slow) == expected  # skip: the latest is due within the second
    if fast:
        assert fast[-1] == year - timedelta(milliseconds=300)
        assert fast == sorted(fast) and fast[0] == year - timedelta(milliseconds=300, seconds=len(fast) - 1)
    if slow:
        assert slow[-1] == FRIDAY_1650 + timedelta(days=365)


@pytest.mark.parametrize(("params", "message"), [
    ({"type": "once", "at": "in 99999999999 days"}, "at 'in 99999999999 days': too far from now"),
    ({"type": "once", "at": "in 9999999 weeks"}, "too far from now"),
    ({"type": "delay", "interval": "99999999 weeks"}, "out of range"),
])
def test_times_beyond_the_year_9999_are_refused_clearly(params: dict[str, str], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(params, FRIDAY_1650)


def test_a_series_ends_at_the_year_9999() -> None:
    late = Schedule("repeat", datetime(9999, 12, 31, 12, 0, tzinfo=timezone.utc), every=timedelta(days=1))
    assert late.after(late.first) is None
    yearly = Schedule("repeat", datetime(9999, 1, 1, 0, 0, tzinfo=timezone.utc), cron="0 0 1 1 *")
    assert yearly.after(yearly.first) is None


def test_a_repeat_from_long_ago_starts_at_its_next_occurrence_at_once() -> None:
    import time

    began = time.process_time()  # CPU time: what the 842 million seconds since 2000 would cost, not the load
    every = parse_schedule({"type": "repeat", "interval": "1s", "at": "2000-01-01 00:00"}, FRIDAY_1650)
    assert time.process_time() - began < 0.5
    assert every.first == FRIDAY_1650 + timedelta(seconds=1)
    daily = parse_schedule({"type": "repeat", "interval": "1 day", "at": "2026-11-19 16:50"}, FRIDAY_1650)
    assert daily.first == FRIDAY_1650 + timedelta(days=1)  # exactly now is not the future


@pytest.mark.parametrize(("params", "message"), [
    ({"type": "once", "at": "tomorrow 08:00", "interval": "1 day"}, "a once task takes at, not interval"),
    ({"type": "once", "at": "tomorrow 08:00", "cron": "0 8 * * *"}, "a once task takes at, not cron"),
    ({"type": "delay", "interval": "1h", "at": "tomorrow 08:00"}, "a delay task takes interval, not at"),
    ({"type": "repeat", "interval": "1h", "cron": "0 8 * * *"}, "interval or cron, not both"),
])
def test_params_that_would_be_ignored_are_refused(params: dict[str, str], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(params, FRIDAY_1650)


def test_a_named_zone_is_kept_in_the_stored_schedule() -> None:
    berlin = datetime(2026, 3, 28, 7, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    daily = Schedule.from_json(parse_schedule({"type": "repeat", "cron": "0 8 * * *"}, berlin).to_json())
    after_change = daily.after(daily.first.astimezone(timezone.utc))  # as the scheduler reads it back
    assert after_change is not None and after_change.hour == 8
    assert after_change.astimezone(timezone.utc).hour == 6  # 08:00 CEST, no longer 07:00 UTC
    fixed = Schedule.from_json(parse_schedule({"type": "once", "at": "tomorrow 08:00"}, FRIDAY_1650).to_json())
    assert "zone" not in fixed.to_json() and fixed.first.isoformat() == "2026-11-21T08:00:00+01:00"


def test_a_weekday_said_on_that_day_before_its_time_is_today() -> None:
    from datetime import datetime, timezone

    from chainlang.schedules import parse_at

    sunday = datetime(2026, 11, 29, 9, 15, tzinfo=timezone.utc)  # a Sunday
    assert parse_at("sunday 10:00", sunday) == datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)
    assert parse_at("sunday 09:00", sunday) == datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)  # past: a week on
    assert parse_at("next sunday 10:00", sunday) == datetime(2026, 12, 6, 10, 0, tzinfo=timezone.utc)
    assert parse_at("sunday", sunday) == datetime(2026, 12, 6, 0, 0, tzinfo=timezone.utc)
