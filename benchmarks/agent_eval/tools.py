"""The agent evaluation's tools: deterministic stand-ins for a personal assistant's services.

Each answers from fixed data (no network, no clock), so a run's outcome depends only on the
chain the model wrote. Their names, descriptions and params are what the model sees."""

from __future__ import annotations

from typing import Any

from chainlang import event

CONTACTS = {
    "sarah": {"name": "Sarah Lee", "email": "sarah@example.com", "phone": "+1 555 0101", "city": "Boston"},
    "tom": {"name": "Tom Berg", "email": "tom@example.com", "phone": "+1 555 0102", "city": "Chicago"},
    "maria": {"name": "Maria Silva", "email": "maria@example.com", "phone": "+1 555 0103", "city": "Lisbon"},
    "ben": {"name": "Ben Okafor", "email": "ben@example.com", "phone": "+1 555 0104", "city": "Lagos"},
    "priya": {"name": "Priya Rao", "email": "priya@example.com", "phone": "+1 555 0105", "city": "Pune"},
}


@event("contacts.find", description="Find a person in the address book: their email, phone and city", idempotent=True)
def contacts_find(name: str) -> dict[str, Any]:
    found = CONTACTS.get(name.strip().lower().split(" ")[0].removesuffix("'s"))
    return found or {"name": name, "email": None, "phone": None, "city": None}


@event("email.search", description="Search the mailbox for messages from a sender about a subject", idempotent=True)
def email_search(sender: str, query: str = "", limit: int = 10) -> dict[str, Any]:
    subject = query or "(no subject)"
    return {"messages": [{"from": sender, "subject": subject, "snippet": f"About {subject}: see attached."}][:limit]}


@event("email.send", description="Send an email message", idempotent=True)
def email_send(to: str, subject: str, body: str) -> dict[str, Any]:
    return {"sent": True, "to": to, "subject": subject}


@event("calendar.check", description="List the meetings in the calendar on a date (YYYY-MM-DD)", idempotent=True)
def calendar_check(date: str, days: int = 1) -> dict[str, Any]:
    return {"date": date, "days": days, "meetings": [{"time": "10:00", "title": "Team sync"}]}


@event("task.create", description="Create a to-do task with a title and a due date", idempotent=True)
def task_create(title: str, due: str) -> dict[str, Any]:
    return {"id": "task-1", "title": title, "due": due}


@event("weather.get", description="Get the weather forecast for a city", idempotent=True)
def weather_get(city: str, days: int = 1) -> dict[str, Any]:
    return {"city": city, "days": days, "forecast": "light rain", "temp_c": 14}


@event("notes.add", description="Add a note to the notebook", idempotent=True)
def notes_add(text: str) -> dict[str, Any]:
    return {"id": "note-1", "text": text}
