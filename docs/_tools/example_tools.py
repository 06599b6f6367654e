"""Example tools: the mail, calendar, team, web, document and HTTP events that
the chainlang documentation uses in its examples.

Every example in the docs is checked with

    chainlang check --tools docs/_tools/example_tools.py FILE

so the events below are the ones the examples may call. The bodies return
fixed, made-up data: no network, no clock, the same answer every time.
"""

import zlib
from typing import Any, Literal

from chainlang import event

# -- a tiny fake world --------------------------------------------------------

_PEOPLE = {
    "marketing": [
        {"name": "Sarah Lee", "email": "sarah@example.com"},
        {"name": "Tom Baker", "email": "tom@example.com"},
    ],
    "engineering": [
        {"name": "John Park", "email": "john@example.com"},
        {"name": "Ana Silva", "email": "ana@example.com"},
    ],
}

_INBOX = [
    {
        "id": "m-101",
        "sender": "Sarah Lee <sarah@example.com>",
        "subject": "Q1 budget review",
        "date": "2024-01-15",
        "unread": True,
    },
    {
        "id": "m-102",
        "sender": "John Park <john@example.com>",
        "subject": "Re: launch checklist",
        "date": "2024-01-14",
        "unread": False,
    },
]

# -- result schemas (so that references into results are checked) -------------

_PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
    "required": ["name", "email"],
    "additionalProperties": False,
}

_SLOT = {
    "type": "object",
    "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
    "required": ["start", "end"],
    "additionalProperties": False,
}

_CALENDAR_ENTRY = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "start": {"type": "string"},
        "end": {"type": "string"},
    },
    "required": ["title", "start", "end"],
    "additionalProperties": False,
}

_MESSAGE = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "sender": {"type": "string"},
        "subject": {"type": "string"},
        "date": {"type": "string"},
        "unread": {"type": "boolean"},
    },
    "required": ["id", "sender", "subject", "date", "unread"],
    "additionalProperties": False,
}


def _object(**properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


# -- mail ---------------------------------------------------------------------


@event(
    "email.search",
    description="Search the mailbox; `query` matches subjects, `sender` matches the From line.",
    result=_object(matches=_list_of(_MESSAGE)),
    idempotent=True,
)
async def email_search(
    query: str = "",
    sender: str | None = None,
    days: int = 7,
    unread: bool = False,
    ctx=None,
) -> dict[str, Any]:
    matches = [
        message
        for message in _INBOX
        if query.lower() in message["subject"].lower()
        and (sender is None or sender.lower() in message["sender"].lower())
        and (message["unread"] or not unread)
    ]
    return {"matches": matches}


@event(
    "email.send",
    description="Send an email. Not idempotent: a retried send is a second email.",
    result=_object(message_id={"type": "string"}),
)
def email_send(to: str, subject: str, body: str, cc: str | None = None) -> dict[str, Any]:
    return {"message_id": f"sent-{zlib.crc32(f'{to}|{subject}'.encode()) % 10_000:04d}"}


# -- calendar -----------------------------------------------------------------


@event(
    "calendar.search",
    description="A team's calendar entries within a date range.",
    result=_object(entries=_list_of(_CALENDAR_ENTRY)),
    idempotent=True,
)
def calendar_search(team: str, date_range: Any = None) -> dict[str, Any]:
    return {
        "entries": [
            {"title": f"{team} weekly", "start": "2024-01-22T10:00", "end": "2024-01-22T11:00"},
        ]
    }


@event(
    "calendar.check",
    description="The user's own calendar on one day, optionally filtered by a text query.",
    result=_object(entries=_list_of(_CALENDAR_ENTRY)),
    idempotent=True,
)
def calendar_check(date: str, query: str | None = None) -> dict[str, Any]:
    entries = [
        {"title": "Standup", "start": f"{date}T09:00", "end": f"{date}T09:15"},
        {"title": "Dentist", "start": f"{date}T14:00", "end": f"{date}T15:00"},
    ]
    if query:
        entries = [entry for entry in entries if query.lower() in entry["title"].lower()]
    return {"entries": entries}


@event(
    "calendar.availability",
    description="Free slots that all the given people share within a date range.",
    result=_object(slots=_list_of(_SLOT)),
    idempotent=True,
)
def calendar_availability(people: list[Any], date_range: Any = None) -> dict[str, Any]:
    return {
        "slots": [
            {"start": "2024-01-23T10:00", "end": "2024-01-23T11:00"},
            {"start": "2024-01-25T15:00", "end": "2024-01-25T16:00"},
        ]
    }


@event(
    "calendar.create",
    description="Create a calendar entry and invite the attendees.",
    result=_object(event_id={"type": "string"}, start={"type": "string"}),
)
def calendar_create(
    title: str = "Meeting",
    attendees: list[str] | None = None,
    duration: str = "30m",
    start: str | None = None,
    type: Literal["meeting", "reminder", "focus"] = "meeting",
) -> dict[str, Any]:
    return {"event_id": "cal-2001", "start": start or "2024-01-23T10:00"}


# -- people, web, documents, HTTP ---------------------------------------------


@event(
    "team.members",
    description="The members of a team, with their email addresses.",
    result=_object(members=_list_of(_PERSON)),
    idempotent=True,
)
def team_members(team: str) -> dict[str, Any]:
    return {"members": list(_PEOPLE.get(team, []))}


@event(
    "web.search",
    description="Search the web.",
    result=_object(
        results=_list_of(_object(title={"type": "string"}, url={"type": "string"}, snippet={"type": "string"}))
    ),
    idempotent=True,
)
async def web_search(query: str, limit: int = 5) -> dict[str, Any]:
    results = [
        {
            "title": f"{query}: result {n}",
            "url": f"https://example.com/search/{n}",
            "snippet": f"Made-up snippet {n} about {query}.",
        }
        for n in range(1, 4)
    ]
    return {"results": results[:limit]}


@event(
    "document.create",
    description="Create a document, presentation or spreadsheet.",
    result=_object(document_id={"type": "string"}, url={"type": "string"}),
)
def document_create(
    title: str,
    content: str = "",
    type: Literal["document", "presentation", "spreadsheet"] = "document",
) -> dict[str, Any]:
    return {"document_id": "doc-301", "url": "https://docs.example.com/doc-301"}


@event(
    "http.request",
    description="Make an HTTP request and return the status code and body.",
    result=_object(status={"type": "integer"}, body={}),
)
def http_request(
    url: str,
    method: Literal["GET", "POST", "PUT", "DELETE"] = "GET",
    body: Any = None,
) -> dict[str, Any]:
    return {"status": 200, "body": {"ok": True, "url": url, "method": method}}


# -- failures with a type of their own (retry by error type, control-flow.md) ------------


@event(
    "payment.charge",
    description="Charge a card. Made up: a card number that starts with 4000-0000-0000-0002 is declined.",
    result=_object(charged={"type": "number"}, card={"type": "string"}),
    idempotent=True,
)
def payment_charge(card: str, amount: float) -> dict[str, Any]:
    from chainlang import StepError

    if card.startswith("4000-0000-0000-0002"):
        raise StepError("declined", f"the bank declined the card ending {card[-4:]}")
    return {"charged": amount, "card": card[-4:]}


@event(
    "fx.rate",
    description="An exchange rate from a slow service. Made up: the first attempt times out.",
    idempotent=True,
)
def fx_rate(base: str, quote: str, ctx: Any = None) -> float:
    from chainlang import StepError

    if ctx is not None and ctx.attempt == 1:
        raise StepError("timeout", "the rate service did not answer within 5s")
    return 1.08 if (base, quote) == ("EUR", "USD") else 1.0


# -- a job polled until it is done (repeat, control-flow.md) ------------------------------

_JOB_CHECKS: dict[tuple[str, str], int] = {}  # (run id, job id) → how often its status was asked


@event(
    "job.start",
    description="Start a batch job. Made up: it returns the job's id at once.",
    result=_object(id={"type": "string"}),
    idempotent=True,
)
def job_start(name: str) -> dict[str, Any]:
    return {"id": f"job-{name}"}


@event(
    "job.status",
    description="A job's state. Made up: a job is done at the third time its status is asked in a run.",
    result=_object(state={"type": "string", "enum": ["running", "done"]}, progress={"type": "integer"}),
    idempotent=True,
)
def job_status(job_id: str, ctx: Any = None) -> dict[str, Any]:
    key = (ctx.run_id if ctx is not None else "", job_id)
    checks = _JOB_CHECKS[key] = _JOB_CHECKS.get(key, 0) + 1
    return {"state": "done" if checks >= 3 else "running", "progress": min(100, checks * 40)}


# -- an order placed as a saga (try/catch/finally, switch, control-flow.md) --------------


@event(
    "stock.reserve",
    description="Reserve stock for an order. Made up: more than 10 items are out of stock.",
    result=_object(reserved={"type": "integer"}),
    idempotent=True,
)
def stock_reserve(order: str, quantity: int) -> dict[str, Any]:
    from chainlang import StepError

    if quantity > 10:
        raise StepError("out_of_stock", f"only 10 left for order {order}")
    return {"reserved": quantity}


@event(
    "payment.refund",
    description="Refund what was charged for an order.",
    result=_object(refunded={"type": "boolean"}),
    idempotent=True,
)
def payment_refund(order: str) -> dict[str, Any]:
    return {"refunded": True}


@event(
    "review.decision",
    description="A reviewer's decision on a draft. Made up: a draft that mentions 'TODO' is sent back.",
    result=_object(decision={"type": "string", "enum": ["approve", "edit", "reject"]}, note={"type": "string"}),
    idempotent=True,
)
def review_decision(draft: str) -> dict[str, Any]:
    if "TODO" in draft:
        return {"decision": "edit", "note": "finish the TODOs"}
    return {"decision": "approve", "note": "looks good"}



# -- the ported workflows of guides/coming-from.md ---------------------------------------


@event(
    "text.count",
    description="Count the words of a text.",
    result=_object(words={"type": "integer"}),
    idempotent=True,
)
def text_count(text: str) -> dict[str, Any]:
    return {"words": len(text.split())}


@event(
    "jokes.subjects",
    description="Subjects to write a joke about, for a topic.",
    result=_object(subjects=_list_of({"type": "string"})),
    idempotent=True,
)
def jokes_subjects(topic: str) -> dict[str, Any]:
    return {"subjects": [f"{topic} at breakfast", f"{topic} in meetings", f"{topic} on Fridays"]}


@event(
    "jokes.write",
    description="Write a joke about a subject.",
    result=_object(joke={"type": "string"}),
    idempotent=True,
)
def jokes_write(subject: str) -> dict[str, Any]:
    return {"joke": f"Why bring up {subject}? Because nobody else would."}


@event(
    "jokes.best",
    description="Pick the best of some jokes: its position in the list (0-based).",
    result=_object(id={"type": "integer"}),
    idempotent=True,
)
def jokes_best(jokes: list[str]) -> dict[str, Any]:
    # made up, and the same every time: the longest joke wins
    return {"id": max(range(len(jokes)), key=lambda i: (len(jokes[i]), -i)) if jokes else 0}
