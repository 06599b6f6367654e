"""The first implemented standard events: tools.now, tools.date_calc, user.notify.

Each is called as the interpreter calls it (params as keyword arguments by their
schema names, plus `ctx`), with a fake run context: a pinned clock, a temporary
state directory and a list that collects what `ctx.notify` shows. Results are
validated against the result schemas of stdlib/*.yaml, and the params of every
case against the params schemas, so the functions accept exactly the declared params.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainlang.registry.stdlib import stdlib_specs
from chainlang.runtime.context import FixedClock, RunContext
from chainlang.stdlib import tools, user

SPECS = {spec.name: spec for spec in stdlib_specs()}
IMPLEMENTED = {"tools.now": tools.now, "tools.date_calc": tools.date_calc, "user.notify": user.notify}

UTC = timezone.utc
EST = timezone(timedelta(hours=-5))
IST = timezone(timedelta(hours=5, minutes=30))
WEDNESDAY = datetime(2024, 1, 17, 10, 30, 5, 250_000, tzinfo=EST)  # 2024-01-15 is a Monday


class Shown(list[str]):
    """What ctx.notify showed."""


def make_ctx(
    state_dir: Path,
    *,
    at: datetime = WEDNESDAY,
    key: str = "run-1:3:1",
    step: str = "3",
    event: str = "user.notify",
    shown: Shown | None = None,
) -> RunContext:
    sink = shown if shown is not None else Shown()
    return RunContext(
        run_id="run-1",
        chain="demo.chain",
        step=step,
        event=event,
        attempt=1,
        idempotency_key=key,
        clock=FixedClock(at),
        state_dir=state_dir,
        notify=sink.append,
    )


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    return make_ctx(tmp_path / "state", event="tools.date_calc")


def validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def assert_valid(schema: dict[str, Any] | None, value: object) -> None:
    assert schema is not None
    errors = [e.message for e in validator(schema).iter_errors(value)]
    assert not errors, errors


# -- the registry finds them ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(IMPLEMENTED))
def test_the_registry_resolves_the_implementation(name: str) -> None:
    spec = SPECS[name]
    assert spec.resolve_implementation() is IMPLEMENTED[name]
    resolved = spec.resolved()
    assert resolved.accepts_ctx and not resolved.is_async


def test_exactly_these_are_implemented() -> None:
    # chain.run is run by the interpreter itself (tests/test_run.py)
    # and the task events that use the project's store (tests/test_tasks_register.py)
    # and the thread events (tests/test_threads.py) and the memory events (tests/test_memory.py)
    # and the agent events (tests/test_agents.py) and user.ask, a wait (tests/test_waits_cli.py)
    assert {name for name, spec in SPECS.items() if spec.implemented} == set(IMPLEMENTED) | {
        "chain.run", "task.register", "task.list", "task.cancel", "task.schedule",
        "thread.match", "thread.summarize", "thread.list", "memory.append", "memory.search", "memory.digest",
        "agent.think", "agent.chain", "agent.decide", "agent.reply", "model.ask", "user.ask"}


# -- tools.now -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (
            WEDNESDAY,
            {
                "iso": "2024-01-17T10:30:05-05:00", "date": "2024-01-17", "time": "10:30:05", "weekday": "Wednesday",
                "timestamp": 1705505405, "year": 2024, "month": 1, "day": 17, "hour": 10, "minute": 30, "second": 5,
                "timezone": "-05:00",
            },
        ),
        (
            datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
            {
                "iso": "2024-02-29T23:59:59+00:00", "date": "2024-02-29", "time": "23:59:59", "weekday": "Thursday",
                "timestamp": 1709251199, "year": 2024, "month": 2, "day": 29, "hour": 23, "minute": 59, "second": 59,
                "timezone": "+00:00",
            },
        ),
        (
            datetime(2023, 12, 31, 0, 5, 0, tzinfo=IST),
            {
                "iso": "2023-12-31T00:05:00+05:30", "date": "2023-12-31", "time": "00:05:00", "weekday": "Sunday",
                "timestamp": 1703961300, "year": 2023, "month": 12, "day": 31, "hour": 0, "minute": 5, "second": 0,
                "timezone": "+05:30",
            },
        ),
    ],
    ids=["est-wednesday", "utc-leap-day", "ist-sunday"],
)
def test_now(tmp_path: Path, at: datetime, expected: dict[str, Any]) -> None:
    result = tools.now(ctx=make_ctx(tmp_path, at=at, event="tools.now"))
    assert result == expected
    assert_valid(SPECS["tools.now"].result_schema, result)
    assert datetime.fromisoformat(result["iso"]) == at.replace(microsecond=0)
    assert result["timestamp"] == int(at.timestamp())
    assert_valid(SPECS["tools.now"].params_schema, {})


def test_now_has_no_params(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        tools.now(ctx=make_ctx(tmp_path), extra=1)  # type: ignore[call-arg]


# -- tools.date_calc: the table ------------------------------------------------------------

NOW = tools.now(ctx=make_ctx(Path("unused"), event="tools.now"))  # Wednesday 2024-01-17T10:30:05-05:00
RANGE = {"start": "2024-01-22", "end": "2024-01-28"}

# (case id, params, expected result)
CASES: list[tuple[str, dict[str, Any], object]] = [
    # nothing to do: the value in its precision
    ("date-as-is", {"from": "2024-01-17"}, "2024-01-17"),
    ("datetime-as-is-z", {"from": "2024-01-17T10:30:00Z"}, "2024-01-17T10:30:00+00:00"),
    ("datetime-naive", {"from": "2024-01-17T10:30"}, "2024-01-17T10:30:00"),
    ("datetime-to-the-second", {"from": "2024-01-17T10:30:00.999+01:00"}, "2024-01-17T10:30:00+01:00"),
    ("basic-iso-date", {"from": "20240117"}, "2024-01-17"),
    ("iso-week-date", {"from": "2024-W03-3"}, "2024-01-17"),
    ("format-iso-explicit", {"from": "2024-01-17", "format": "iso"}, "2024-01-17"),
    ("format-date-of-datetime", {"from": "2024-01-17T23:30:00-05:00", "format": "date"}, "2024-01-17"),
    # every unit, long and short
    ("add-year", {"from": "2024-01-17", "add": "1 year"}, "2025-01-17"),
    ("add-year-from-leap-day", {"from": "2024-02-29", "add": "1 year"}, "2025-02-28"),
    ("add-years-short", {"from": "2024-02-29", "add": "4y"}, "2028-02-29"),
    ("add-month-leap", {"from": "2024-01-31", "add": "1 month"}, "2024-02-29"),
    ("add-month-non-leap", {"from": "2023-01-31", "add": "1 month"}, "2023-02-28"),
    ("add-months-mo", {"from": "2024-01-17", "add": "1 MO"}, "2024-02-17"),
    ("add-2-weeks", {"from": "2024-01-17", "add": "2 weeks"}, "2024-01-31"),
    ("add-week-short", {"from": "2024-12-30", "add": "1w"}, "2025-01-06"),
    ("add-3-days", {"from": "2024-01-17", "add": "3 days"}, "2024-01-20"),
    ("add-day-short", {"from": "2024-02-28", "add": "1d"}, "2024-02-29"),
    ("add-hours", {"from": "2024-01-17T10:30:00+00:00", "add": "2 hours"}, "2024-01-17T12:30:00+00:00"),
    ("add-hours-short", {"from": "2024-01-17T23:30:00+00:00", "add": "1h"}, "2024-01-18T00:30:00+00:00"),
    ("add-30m", {"from": "2024-01-17T10:30:00+00:00", "add": "30m"}, "2024-01-17T11:00:00+00:00"),
    ("add-minutes-upper-m", {"from": "2024-01-17", "add": "1 M"}, "2024-01-17T00:01:00"),
    ("add-seconds", {"from": "2024-01-17T10:30:00+00:00", "add": "45 seconds"}, "2024-01-17T10:30:45+00:00"),
    ("add-secs-short", {"from": "2024-01-17T10:30:00+00:00", "add": "90s"}, "2024-01-17T10:31:30+00:00"),
    ("add-hours-to-a-date", {"from": "2024-01-17", "add": "2 hours"}, "2024-01-17T02:00:00"),
    # several parts
    ("add-week-and-days", {"from": "2024-01-17", "add": "1 week 2 days"}, "2024-01-26"),
    ("add-compact-parts", {"from": "2024-01-17T23:00:00+01:00", "add": "1h30m"}, "2024-01-18T00:30:00+01:00"),
    ("add-commas-and", {"from": "2024-01-17", "add": "1 Year, 2 Months and 3 Days"}, "2025-03-20"),
    ("add-months-before-days", {"from": "2024-01-31", "add": "1 month 1 day"}, "2024-03-01"),
    ("add-zero", {"from": "2024-01-17", "add": "0 days"}, "2024-01-17"),
    # subtract
    ("subtract-day-leap", {"from": "2024-03-01", "subtract": "1 day"}, "2024-02-29"),
    ("subtract-month-clamped", {"from": "2024-03-31", "subtract": "1 month"}, "2024-02-29"),
    ("subtract-week-year-boundary", {"from": "2024-01-03", "subtract": "1 week"}, "2023-12-27"),
    ("subtract-minutes", {"from": "2024-01-01T00:30:00Z", "subtract": "90 min"}, "2023-12-31T23:00:00+00:00"),
    ("subtract-year-from-leap-day", {"from": "2024-02-29", "subtract": "1 year"}, "2023-02-28"),
    ("subtract-from-now", {"from": NOW, "subtract": "1 day"}, "2024-01-16T10:30:05-05:00"),
    # find: last / next / this <weekday>, on several weekdays, including the day itself
    ("last-tuesday-from-wed", {"from": "2024-01-17", "find": "last Tuesday"}, "2024-01-16"),
    ("last-tuesday-from-tue", {"from": "2024-01-16", "find": "last Tuesday"}, "2024-01-09"),
    ("last-tuesday-from-mon", {"from": "2024-01-15", "find": "last tuesday"}, "2024-01-09"),
    ("last-sunday-from-mon", {"from": "2024-01-15", "find": "last Sunday"}, "2024-01-14"),
    ("last-wednesday-from-now", {"from": NOW, "find": "last Wednesday"}, "2024-01-10"),
    ("last-friday-across-year", {"from": "2024-01-02", "find": "last fri"}, "2023-12-29"),
    ("next-monday-from-wed", {"from": "2024-01-17", "find": "next Monday"}, "2024-01-22"),
    ("next-monday-from-mon", {"from": "2024-01-15", "find": "next Monday"}, "2024-01-22"),
    ("next-monday-from-sun", {"from": "2024-01-21", "find": "next Monday"}, "2024-01-22"),
    ("next-sunday-from-sun", {"from": "2024-01-21", "find": "next Sunday"}, "2024-01-28"),
    ("next-thursday-abbrev", {"from": "2024-01-17", "find": "  Next   THU "}, "2024-01-18"),
    ("next-wednesday-leap", {"from": "2024-02-22", "find": "next wed"}, "2024-02-28"),
    ("next-saturday-from-sat", {"from": "2024-01-20", "find": "next Saturday"}, "2024-01-27"),
    ("last-saturday-from-sun", {"from": "2024-01-21T08:00:00+02:00", "find": "last sat"}, "2024-01-20"),
    ("this-friday-from-wed", {"from": "2024-01-17", "find": "this Friday"}, "2024-01-19"),
    ("this-friday-from-fri", {"from": "2024-01-19", "find": "this Friday"}, "2024-01-19"),
    ("this-friday-from-sun", {"from": "2024-01-21", "find": "this Friday"}, "2024-01-19"),
    ("this-monday-from-sun", {"from": "2024-01-21", "find": "this Monday"}, "2024-01-15"),
    ("this-sunday-from-mon", {"from": "2024-01-15", "find": "this sunday"}, "2024-01-21"),
    # find: week, month and year edges
    ("start-of-week-from-wed", {"from": "2024-01-17", "find": "start of week"}, "2024-01-15"),
    ("start-of-week-from-mon", {"from": "2024-01-15", "find": "start of week"}, "2024-01-15"),
    ("start-of-week-from-sun", {"from": "2024-01-21", "find": "Start of the week"}, "2024-01-15"),
    ("beginning-of-week-across-year", {"from": "2024-01-03", "find": "beginning of week"}, "2024-01-01"),
    ("end-of-week-from-wed", {"from": "2024-01-17", "find": "end of week"}, "2024-01-21"),
    ("end-of-week-from-sun", {"from": "2024-01-21", "find": "end of week"}, "2024-01-21"),
    ("end-of-week-from-mon", {"from": "2024-01-22", "find": "end of week"}, "2024-01-28"),
    ("start-of-month", {"from": "2024-01-17", "find": "start of month"}, "2024-01-01"),
    ("start-of-month-on-first", {"from": "2024-03-01", "find": "start of month"}, "2024-03-01"),
    ("end-of-month-feb-leap", {"from": "2024-02-10", "find": "end of month"}, "2024-02-29"),
    ("end-of-month-feb-non-leap", {"from": "2023-02-10", "find": "end of month"}, "2023-02-28"),
    ("end-of-month-feb-1900", {"from": "1900-02-01", "find": "end of month"}, "1900-02-28"),
    ("end-of-month-feb-2000", {"from": "2000-02-01", "find": "end of the month"}, "2000-02-29"),
    ("end-of-month-april", {"from": "2024-04-05", "find": "end of month"}, "2024-04-30"),
    ("end-of-month-on-last", {"from": "2024-12-31", "find": "end of month"}, "2024-12-31"),
    ("start-of-year", {"from": "2024-06-15", "find": "start of year"}, "2024-01-01"),
    ("end-of-year", {"from": "2024-06-15", "find": "end of year"}, "2024-12-31"),
    # find: today / tomorrow / yesterday (a day: the time is dropped)
    ("today-from-now", {"from": NOW, "find": "today"}, "2024-01-17"),
    ("tomorrow-leap", {"from": "2024-02-28", "find": "tomorrow"}, "2024-02-29"),
    ("tomorrow-new-year", {"from": "2023-12-31T22:00:00Z", "find": "Tomorrow"}, "2024-01-01"),
    ("yesterday-leap", {"from": "2024-03-01", "find": "yesterday"}, "2024-02-29"),
    # add first, then find
    ("add-then-end-of-month", {"from": "2024-01-17", "add": "1 month", "find": "end of month"}, "2024-02-29"),
    ("add-then-start-of-week", {"from": NOW, "add": "1 week", "find": "start of week"}, "2024-01-22"),
    # week_range
    ("week-range-next-week", {"from": NOW, "add": "1 week", "format": "week_range"}, RANGE),
    ("week-range-this-week", {"from": NOW, "format": "week_range"}, {"start": "2024-01-15", "end": "2024-01-21"}),
    ("week-range-on-sunday", {"from": "2024-01-21", "format": "week_range"}, {"start": "2024-01-15", "end": "2024-01-21"}),
    ("week-range-on-monday", {"from": "2024-01-01", "format": "week_range"}, {"start": "2024-01-01", "end": "2024-01-07"}),
    ("week-range-across-year", {"from": "2024-12-31", "format": "week_range"}, {"start": "2024-12-30", "end": "2025-01-05"}),
    ("week-range-after-find", {"from": "2024-01-17", "find": "end of month", "format": "week_range"},
     {"start": "2024-01-29", "end": "2024-02-04"}),
    # from: a tools.now result, a date object, a range
    ("from-now-object", {"from": NOW}, "2024-01-17T10:30:05-05:00"),
    ("from-now-object-date", {"from": NOW, "format": "date"}, "2024-01-17"),
    ("from-now-add-day", {"from": NOW, "add": "1 day"}, "2024-01-18T10:30:05-05:00"),
    ("from-date-object", {"from": {"date": "2024-01-17"}, "add": "1 day"}, "2024-01-18"),
    ("from-range-object", {"from": RANGE, "add": "1 week"}, "2024-01-29"),
    ("from-range-week-range", {"from": RANGE, "add": "1 week", "format": "week_range"},
     {"start": "2024-01-29", "end": "2024-02-04"}),
    ("from-previous-result", {"from": "2024-01-16", "find": "last Tuesday"}, "2024-01-09"),
]


@pytest.mark.parametrize(("params", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_date_calc(ctx: RunContext, params: dict[str, Any], expected: object) -> None:
    assert_valid(SPECS["tools.date_calc"].params_schema, params)
    result = tools.date_calc(ctx=ctx, **params)
    assert result == expected
    assert_valid(SPECS["tools.date_calc"].result_schema, result)


def test_the_table_covers_every_unit_and_phrase() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    durations = [p[k] for _, p, _ in CASES for k in ("add", "subtract") if k in p]
    covered = {unit for d in durations for unit in tools.parse_duration_words(d)}
    assert covered == set(tools.DURATION_UNITS)
    phrases = " | ".join(str(p["find"]).lower() for _, p, _ in CASES if "find" in p)
    for phrase in tools.FIND_PHRASES:
        assert phrase.split(" <")[0] in phrases, phrase
    for weekday in tools.WEEKDAYS:
        assert weekday.lower()[:3] in phrases, weekday


def test_date_calc_result_is_json() -> None:
    params: dict[str, Any] = {"from": NOW, "add": "1 week", "format": "week_range"}
    result = tools.date_calc(**params)  # ctx is optional: date_calc does not use it
    assert json.loads(json.dumps(result)) == result


# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "amounts"),
    [
        ("1 week", {"weeks": 1}),
        ("30m", {"minutes": 30}),
        ("1 Month", {"months": 1}),
        ("2h30m", {"hours": 2, "minutes": 30}),
        ("1 week, 2 days and 3 hours", {"weeks": 1, "days": 2, "hours": 3}),
        ("1 day 1 day", {"days": 2}),
        ("5 yrs 3 mos 2 wks 1 hr 4 mins 6 secs", {"years": 5, "months": 3, "weeks": 2, "hours": 1, "minutes": 4, "seconds": 6}),
    ],
)
def test_parse_duration_words(text: str, amounts: dict[str, int]) -> None:
    assert tools.parse_duration_words(text) == amounts


# -- tools.date_calc: errors ----------------------------------------------------------------

# (case id, params, a fragment of the message); the schema would reject those marked *
ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("from-not-a-date", {"from": "next week"}, "from: cannot read 'next week' as a date"),
    ("from-impossible-day", {"from": "2023-02-29"}, "from: cannot read '2023-02-29'"),
    ("from-bad-hour", {"from": "2024-01-17T25:00"}, "from: cannot read"),
    ("from-blank", {"from": "   "}, "from: empty"),
    ("from-number*", {"from": 20240117}, "from: expected an ISO 8601 date"),
    ("from-object-without-date*", {"from": {"when": "2024-01-17"}}, "needs an 'iso', 'date' or 'start' field"),
    ("from-object-iso-not-text", {"from": {"iso": 5}}, "the 'iso' field must be an ISO 8601 string"),
    ("from-object-bad-start", {"from": {"start": "soon", "end": "later"}}, "from.start: cannot read 'soon'"),
    ("missing-from*", {"add": "1 day"}, "from: missing"),
    ("unknown-param*", {"from": "2024-01-17", "to": "2024-02-01"}, "unknown param 'to'"),
    ("unknown-unit", {"from": "2024-01-17", "add": "2 fortnights"}, "add: unknown unit 'fortnights'"),
    ("unknown-unit-subtract", {"from": "2024-01-17", "subtract": "3 parsecs"}, "subtract: unknown unit 'parsecs'"),
    ("no-number", {"from": "2024-01-17", "add": "a week"}, "add: cannot read 'a week' as a duration"),
    ("decimal", {"from": "2024-01-17", "add": "1.5 hours"}, "write whole numbers with units"),
    ("trailing-junk", {"from": "2024-01-17", "add": "1 week !"}, "(from '!' on)"),
    ("negative", {"from": "2024-01-17", "add": "-1 day"}, "add: cannot read '-1 day'"),
    ("blank-duration", {"from": "2024-01-17", "add": "  "}, "add: the duration is empty"),
    ("duration-not-text*", {"from": "2024-01-17", "add": 3}, "add: expected a duration"),
    ("out-of-range", {"from": "2024-01-17", "add": "10000 years"}, "add: the result is out of range"),
    ("huge-number", {"from": "2024-01-17", "subtract": "99999999999 days"}, "subtract: 99999999999 days is out of range"),
    ("both-add-and-subtract", {"from": "2024-01-17", "add": "1 day", "subtract": "1 day"}, "add and subtract cannot be used together"),
    ("find-before-year-1", {"from": "0001-01-01", "find": "yesterday"}, "find: 'yesterday' is out of range"),
    ("week-after-year-9999", {"from": "9999-12-31", "format": "week_range"}, "format: the week of 9999-12-31 is out of range"),
    ("unknown-phrase", {"from": "2024-01-17", "find": "someday"}, "find: unknown phrase 'someday'"),
    ("find-next-week", {"from": "2024-01-17", "find": "next week"}, "'week' in 'next week' is not a weekday"),
    ("find-bad-weekday", {"from": "2024-01-17", "find": "last Funday"}, "'funday' in 'last Funday' is not a weekday"),
    ("find-not-text*", {"from": "2024-01-17", "find": ["today"]}, "find: expected a phrase"),
    ("unknown-format*", {"from": "2024-01-17", "format": "rfc2822"}, "format: unknown format 'rfc2822'"),
]


@pytest.mark.parametrize(("params", "fragment"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_date_calc_errors(ctx: RunContext, params: dict[str, Any], fragment: str, request: pytest.FixtureRequest) -> None:
    schema_rejects = request.node.callspec.id.endswith("*")
    assert validator(SPECS["tools.date_calc"].params_schema).is_valid(params) is not schema_rejects
    with pytest.raises(ValueError) as caught:
        tools.date_calc(ctx=ctx, **params)
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message and len(message) < 400


def test_error_messages_say_what_is_accepted(ctx: RunContext) -> None:
    with pytest.raises(ValueError, match=r"units: years \(y, yr\), months \(mo\)"):
        tools.date_calc(ctx=ctx, **{"from": "2024-01-17", "add": "2 fortnights"})
    with pytest.raises(ValueError, match="accepted: today, tomorrow, yesterday, last <weekday>"):
        tools.date_calc(ctx=ctx, **{"from": "2024-01-17", "find": "someday"})
    with pytest.raises(ValueError, match="a tools.now result"):
        tools.date_calc(ctx=ctx, **{"from": "yesterday"})
    with pytest.raises(ValueError, match="accepted: iso, date, week_range"):
        tools.date_calc(ctx=ctx, **{"from": "2024-01-17", "format": "long"})


# -- user.notify -------------------------------------------------------------------------------


def read_log(state_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state_dir / "notifications.jsonl").read_text(encoding="utf-8").splitlines()]


def test_notify_logs_shows_and_returns(tmp_path: Path) -> None:
    state = tmp_path / "deep" / "state"  # created on first use
    shown = Shown()
    result = user.notify(ctx=make_ctx(state, shown=shown), message="Time to buy groceries", title="Reminder", level="warning")
    assert result == {"delivered": True, "id": user.notification_id("run-1:3:1")}
    assert result["id"].startswith("ntf-")
    assert shown == ["[warning] Reminder: Time to buy groceries"]
    assert read_log(state) == [
        {
            "id": result["id"], "ts": "2024-01-17T10:30:05-05:00", "run_id": "run-1", "step": "3",
            "level": "warning", "title": "Reminder", "message": "Time to buy groceries",
        }
    ]
    assert_valid(SPECS["user.notify"].params_schema, {"message": "Time to buy groceries", "title": "Reminder", "level": "warning"})
    from jsonschema import Draft7Validator

    schema = SPECS["user.notify"].result_schema  # the declared result: {delivered, id}
    assert schema is not None and not list(Draft7Validator(schema).iter_errors(result))


def test_notify_defaults_and_one_line(tmp_path: Path) -> None:
    shown = Shown()
    user.notify(ctx=make_ctx(tmp_path, shown=shown), message="first line\n  second line\n")
    user.notify(ctx=make_ctx(tmp_path, key="k2", shown=shown), message="done", title="", level="success")
    assert shown == ["[info] first line second line", "[success] done"]
    entries = read_log(tmp_path)
    assert [(e["level"], e["title"], e["message"]) for e in entries] == [
        ("info", None, "first line\n  second line\n"),
        ("success", "", "done"),
    ]


def test_notify_is_idempotent_per_key(tmp_path: Path) -> None:
    shown = Shown()
    first = user.notify(ctx=make_ctx(tmp_path, shown=shown), message="hello")
    again = user.notify(ctx=make_ctx(tmp_path, shown=shown), message="hello")  # a resumed run re-runs the step
    other = user.notify(ctx=make_ctx(tmp_path, key="run-1:3:2", shown=shown), message="hello")  # a new attempt
    assert first == again and other["id"] != first["id"]
    assert other["delivered"] is True
    assert [e["id"] for e in read_log(tmp_path)] == [first["id"], other["id"]]
    assert shown == ["[info] hello", "[info] hello"]


def test_notify_only_appends(tmp_path: Path) -> None:
    log = tmp_path / "notifications.jsonl"
    log.write_text('{"id": "ntf-old", "message": "kept"}\n{"id": "ntf-torn", "mess', encoding="utf-8")
    before = log.read_bytes()
    result = user.notify(ctx=make_ctx(tmp_path), message="new")
    text = log.read_bytes()
    assert text.startswith(before)
    lines = text.decode("utf-8").splitlines()
    assert lines[:2] == ['{"id": "ntf-old", "message": "kept"}', '{"id": "ntf-torn", "mess']
    assert json.loads(lines[2])["id"] == result["id"] and len(lines) == 3


def test_notify_from_parallel_steps_logs_once(tmp_path: Path) -> None:
    shown = Shown()
    errors: list[BaseException] = []

    def send(key: str) -> None:
        try:
            user.notify(ctx=make_ctx(tmp_path, key=key, shown=shown), message=f"from {key}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(f"k{i % 4}",)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(e["message"] for e in read_log(tmp_path)) == ["from k0", "from k1", "from k2", "from k3"]
    assert len(shown) == 4


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"message": ""}, "message: expected the non-empty text"),
        ({"message": "x", "level": "urgent"}, "level: unknown level 'urgent' (accepted: info, success, warning, error)"),
        ({"message": "x", "title": 3}, "title: expected a short text"),
    ],
)
def test_notify_errors(tmp_path: Path, params: dict[str, Any], fragment: str) -> None:
    shown = Shown()
    with pytest.raises(ValueError) as caught:
        user.notify(ctx=make_ctx(tmp_path, shown=shown), **params)
    assert fragment in str(caught.value)
    assert not shown and not (tmp_path / "notifications.jsonl").exists()


# -- any input: a result or a ValueError ---------------------------------------------------------

_WORDS = st.text(alphabet="0123456789-:TZ+ .,Wwdaysmonthyearlastnextfrtu", max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    start=st.one_of(_WORDS, st.dates().map(str), st.datetimes().map(lambda d: d.isoformat())),
    add=st.one_of(st.none(), _WORDS),
    find=st.one_of(st.none(), _WORDS, st.sampled_from(tools.FIND_PHRASES)),
    form=st.sampled_from(["iso", "date", "week_range"]),
)
def test_date_calc_never_crashes(start: str, add: str | None, find: str | None, form: str) -> None:
    params: dict[str, Any] = {"from": start, "format": form}
    if add is not None:
        params["add"] = add
    if find is not None:
        params["find"] = find
    try:
        result = tools.date_calc(**params)
    except ValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert_valid(SPECS["tools.date_calc"].result_schema, result)
