"""Stand-in tools of the assistant example: the calendar, the mailbox, the teams, the web
and the documents of one user, Alex Morgan, as small JSON files in `data/`.

Everything is offline and deterministic: the tools read `data/` and the run's clock
(`chainlang run --now`), never the machine's. The two tools that write, `calendar.create`
and `document.create`, write under the project's state directory (`.chainlang/state/`)
and are idempotent: what they make is keyed by the step's idempotency key, so a step that
runs again after a crash returns what it made the first time instead of making it twice.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal

from chainlang import event

DATA = Path(__file__).resolve().parent / "data"
DAY_START, DAY_END = time(9, 0), time(17, 0)  # working hours, in the zone of the run's clock
_DURATION = re.compile(r"^\s*(\d+)\s*(m|min|minutes?|h|hours?)\s*$")


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_TEXT = {"type": "string"}
_TEXTS = {"type": "array", "items": _TEXT}


# -- the world ---------------------------------------------------------------------------------


def _data(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _directory() -> tuple[str, dict[str, list[str]], list[str]]:
    """(the user's name, the teams, everyone)."""
    people = _data("people.json")
    everyone = [people["me"]] + [p for team in people["teams"].values() for p in team] + people["others"]
    return people["me"], people["teams"], list(dict.fromkeys(everyone))


def _person(name: str) -> str:
    """A full name from a full or first name ("Sarah" -> "Sarah Lee"); "me" is the user."""
    me, _, everyone = _directory()
    wanted = name.strip().casefold()
    if wanted in ("me", "i", "myself"):
        return me
    for person in everyone:
        if wanted in (person.casefold(), person.split()[0].casefold()):
            return person
    raise ValueError(f"no calendar for {name!r}; the people are: {', '.join(everyone)}")


def _minutes(text: str) -> int:
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"duration {text!r}: write minutes or hours, e.g. 30m or 1h")
    value = int(match.group(1))
    minutes = value * 60 if match.group(2).startswith("h") else value
    if not 5 <= minutes <= 8 * 60:
        raise ValueError(f"duration {text!r}: from 5 minutes to 8 hours")
    return minutes


def _day(value: Any, what: str) -> date:
    text = value.get("date") or value.get("iso") if isinstance(value, dict) else value
    try:
        return date.fromisoformat(str(text)[:10])
    except ValueError:
        raise ValueError(f"{what} {value!r} is not a date: give YYYY-MM-DD or an ISO date-time") from None


def _entries(day: date, ctx: Any) -> list[dict[str, Any]]:
    """The calendar entries of one day, of everyone (the data's and the bookings made by
    calendar.create), with aware start and end times in the zone of the run's clock."""
    zone = ctx.now().tzinfo
    found = []
    for entry in _data("calendar.json"):
        if entry.get("date") == day.isoformat() or (entry.get("every") == "weekday" and day.weekday() < 5):
            found.append({"title": entry["title"], "attendees": entry["attendees"],
                          "start": datetime.combine(day, time.fromisoformat(entry["start"]), zone),
                          "end": datetime.combine(day, time.fromisoformat(entry["end"]), zone)})
    for booking in _load(_bookings(ctx)):
        start = datetime.fromisoformat(booking["start"])
        if start.date() == day:
            found.append({"title": booking["title"], "attendees": booking["attendees"], "start": start,
                          "end": datetime.fromisoformat(booking["end"])})
    return sorted(found, key=lambda e: (e["start"], e["title"]))


def _free(people: list[str], day: date, minutes: int, ctx: Any) -> list[tuple[datetime, datetime]]:
    """The windows of working hours of `day`, from now on, when none of `people` is busy,
    each at least `minutes` long."""
    if day.weekday() >= 5:
        return []
    zone = ctx.now().tzinfo
    start = datetime.combine(day, DAY_START, zone)
    now = ctx.now()
    if now > start:  # from now on, on the next quarter hour
        now = now.replace(second=0, microsecond=0)
        start = now + timedelta(minutes=(15 - now.minute % 15) % 15)
    end = datetime.combine(day, DAY_END, zone)
    busy = sorted((e["start"], e["end"]) for e in _entries(day, ctx) if set(e["attendees"]) & set(people))
    windows, cursor = [], start
    for begin, finish in busy + [(end, end)]:
        if begin > cursor and min(begin, end) - cursor >= timedelta(minutes=minutes):
            windows.append((cursor, min(begin, end)))
        cursor = max(cursor, finish)
        if cursor >= end:
            break
    return windows


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M")


# -- calendar ----------------------------------------------------------------------------------


@event(
    "calendar.check",
    description="The user's own calendar on one day (date: YYYY-MM-DD), optionally only the entries whose title "
                "contains query.",
    result=_object(date=_TEXT, weekday=_TEXT,
                   entries={"type": "array", "items": _object(start=_TEXT, end=_TEXT, title=_TEXT, attendees=_TEXTS)}),
    idempotent=True,
)
def calendar_check(date: str, query: str | None = None, ctx: Any = None) -> dict[str, Any]:
    day = _day(date, "date")
    me, _, _ = _directory()
    entries = [{"start": _hhmm(e["start"]), "end": _hhmm(e["end"]), "title": e["title"],
                "attendees": [p for p in e["attendees"] if p != me]}
               for e in _entries(day, ctx) if me in e["attendees"]
               and (not query or query.casefold() in e["title"].casefold())]
    return {"date": day.isoformat(), "weekday": day.strftime("%A"), "entries": entries}


@event(
    "calendar.availability",
    description="The windows of working hours (09:00-17:00, Monday to Friday) in a date range when the user and all "
                "the people given are free, each at least duration long (date_range: a date, or {start, end}).",
    params={
        "type": "object",
        "properties": {
            "people": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                       "description": "names (first names do): the user is always included"},
            "date_range": {"anyOf": [{"type": "string"}, _object(start=_TEXT, end=_TEXT)],
                           "description": "a date (YYYY-MM-DD), or {start, end} dates, e.g. a tools.date_calc "
                                          "week_range"},
            "duration": {"type": "string", "default": "1h", "description": "the shortest window worth listing"},
        },
        "required": ["people", "date_range"],
        "additionalProperties": False,
    },
    result=_object(people=_TEXTS, duration=_TEXT, free=_TEXTS),
    idempotent=True,
)
def calendar_availability(people: list[str], date_range: Any, duration: str = "1h", ctx: Any = None) -> dict[str, Any]:
    me, _, _ = _directory()
    names = list(dict.fromkeys([me] + [_person(p) for p in people]))
    first, last = ((_day(date_range["start"], "date_range.start"), _day(date_range["end"], "date_range.end"))
                   if isinstance(date_range, dict) else (_day(date_range, "date_range"),) * 2)
    if (last - first).days > 31:
        raise ValueError("date_range: at most a month at a time")
    minutes = _minutes(duration)
    free = []
    for offset in range((last - first).days + 1):
        day = first + timedelta(days=offset)
        free += [f"{day.isoformat()} {_hhmm(a)}-{_hhmm(b)}" for a, b in _free(names, day, minutes, ctx)]
    return {"people": names, "duration": duration, "free": free}


@event(
    "calendar.create",
    description="Book a calendar entry for the user and the attendees; without start, in the first window of "
                "working hours when all of them are free.",
    result=_object(id=_TEXT, title=_TEXT, start=_TEXT, end=_TEXT, attendees=_TEXTS),
    idempotent=True,  # once per step attempt: see the module's docstring
)
def calendar_create(title: str = "Meeting", attendees: list[str] | None = None, duration: str = "30m",
                    start: str | None = None, type: Literal["meeting", "reminder", "focus"] = "meeting",
                    ctx: Any = None) -> dict[str, Any]:
    path = _bookings(ctx)
    bookings = _load(path)
    for booking in bookings:
        if booking["key"] == ctx.idempotency_key:  # this step attempt booked it already (a resumed run)
            return _public(booking)
    me, _, _ = _directory()
    names = list(dict.fromkeys([me] + [_person(p) for p in attendees or []]))
    minutes = _minutes(duration)
    if start:
        begin = datetime.fromisoformat(start)
        begin = begin if begin.tzinfo else begin.replace(tzinfo=ctx.now().tzinfo)
    else:
        begin = _first_free(names, minutes, ctx)
    booking = {"key": ctx.idempotency_key, "id": f"cal-{len(bookings) + 1}", "title": title, "type": type,
               "start": begin.isoformat(timespec="minutes"),
               "end": (begin + timedelta(minutes=minutes)).isoformat(timespec="minutes"), "attendees": names}
    _save(path, bookings + [booking])
    return _public(booking)


def _first_free(names: list[str], minutes: int, ctx: Any) -> datetime:
    today = ctx.now().date()
    for offset in range(14):
        windows = _free(names, today + timedelta(days=offset), minutes, ctx)
        if windows:
            return windows[0][0]
    raise ValueError(f"no free window of {minutes} minutes in the next two weeks")


def _bookings(ctx: Any) -> Path:
    return Path(ctx.state_dir) / "calendar.json"


def _public(booking: dict[str, Any]) -> dict[str, Any]:
    return {k: booking[k] for k in ("id", "title", "start", "end", "attendees")}


# -- mail, teams, web --------------------------------------------------------------------------


@event(
    "email.search",
    description="Search the user's mailbox, newest first: from (a sender's name or address), query (words of the "
                "subject or body), unread only, the last days.",
    params={
        "type": "object",
        "properties": {
            "from": {"type": "string", "minLength": 1, "description": "part of the sender's name or address"},
            "query": {"type": "string", "minLength": 1, "description": "words the subject or body must contain"},
            "unread": {"type": "boolean", "default": False, "description": "only unread messages"},
            "days": {"type": "integer", "minimum": 1, "default": 30, "description": "messages of the last days"},
        },
        "additionalProperties": False,
    },
    result=_object(matches={"type": "array", "items": _object(
        id=_TEXT, **{"from": _TEXT}, subject=_TEXT, date=_TEXT, unread={"type": "boolean"}, body=_TEXT)}),
    idempotent=True,
)
def email_search(ctx: Any = None, **params: Any) -> dict[str, Any]:
    now = ctx.now()
    since = now - timedelta(days=int(params.get("days", 30)))
    sender = str(params.get("from") or "").casefold()
    words = str(params.get("query") or "").casefold().split()
    matches = []
    for message in _data("inbox.json"):
        sent = datetime.fromisoformat(message["date"])
        text = f"{message['subject']} {message['body']}".casefold()
        if since <= sent <= now and sender in message["from"].casefold() and all(w in text for w in words) \
                and (message["unread"] or not params.get("unread", False)):
            matches.append(message)
    return {"matches": sorted(matches, key=lambda m: m["date"], reverse=True)}


@event(
    "team.members",
    description="The members of a team (marketing, engineering, finance).",
    result=_object(team=_TEXT, members=_TEXTS),
    idempotent=True,
)
def team_members(team: str) -> dict[str, Any]:
    _, teams, _ = _directory()
    wanted = team.strip().casefold()
    if wanted not in teams:
        raise ValueError(f"no team {team!r}; the teams are: {', '.join(teams)}")
    return {"team": wanted, "members": list(teams[wanted])}


@event(
    "web.search",
    description="Search the web (a stand-in: a few stored pages), best matches first.",
    result=_object(results={"type": "array", "items": _object(title=_TEXT, url=_TEXT, date=_TEXT, snippet=_TEXT)}),
    idempotent=True,
)
def web_search(query: str, limit: int = 5) -> dict[str, Any]:
    words = {w for w in re.findall(r"\w+", query.casefold()) if len(w) > 2}
    scored = []
    for n, page in enumerate(_data("web.json")):
        found = set(re.findall(r"\w+", f"{page['title']} {page['snippet']}".casefold()))
        if words & found:
            scored.append((-len(words & found), n, page))
    return {"results": [page for _, _, page in sorted(scored)[:limit]]}


# -- documents ---------------------------------------------------------------------------------


@event(
    "document.create",
    description="Create a document or a presentation from a title and its content (Markdown).",
    result=_object(id=_TEXT, title=_TEXT, type=_TEXT, path=_TEXT),
    idempotent=True,  # once per step attempt: see the module's docstring
)
def document_create(title: str, content: str, type: Literal["document", "presentation"] = "document",
                    ctx: Any = None) -> dict[str, Any]:
    folder = Path(ctx.state_dir) / "documents"
    index_path = folder / "index.json"
    index = _load(index_path)
    for item in index:
        if item["key"] == ctx.idempotency_key:
            return {k: item[k] for k in ("id", "title", "type", "path")}
    slug = re.sub(r"[^a-z0-9]+", "-", title.casefold()).strip("-") or "untitled"
    taken = {item["path"] for item in index}
    name, n = f"{slug}.md", 1
    while f"documents/{name}" in taken:
        n += 1
        name = f"{slug}-{n}.md"
    heading = "Presentation" if type == "presentation" else "Document"
    _write(folder / name, f"# {title}\n\n_{heading}, {ctx.now().date().isoformat()}_\n\n{content.strip()}\n")
    item = {"key": ctx.idempotency_key, "id": f"doc-{len(index) + 1}", "title": title, "type": type,
            "path": f"documents/{name}"}
    _save(index_path, index + [item])
    return {k: item[k] for k in ("id", "title", "type", "path")}


# -- files: written whole, then renamed (a crash leaves the old file or the new one) -------------


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return data if isinstance(data, list) else []


def _save(path: Path, items: list[dict[str, Any]]) -> None:
    _write(path, json.dumps(items, indent=1, ensure_ascii=False) + "\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o644)  # mkstemp makes it private; these are the user's documents
    os.replace(tmp, path)
