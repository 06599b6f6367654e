"""Tools the golden chains call, beside the stdlib (passed with --tools)."""

from __future__ import annotations

from typing import Literal

from chainlang import event


@event("email.search", description="Search the mailbox",
       result={"type": "object", "properties": {"matches": {"type": "array", "items": {"type": "object", "properties": {
           "sender": {"type": "string"}, "subject": {"type": "string"}}, "additionalProperties": False}}},
           "required": ["matches"], "additionalProperties": False})
def email_search(query: str = "", sender: str = "", days: int = 7, unread: bool = False) -> dict:
    return {"matches": []}


@event("team.members", description="Members of a team",
       result={"type": "object", "properties": {"members": {"type": "array", "items": {"type": "object", "properties": {
           "name": {"type": "string"}, "email": {"type": "string"}}, "required": ["name", "email"], "additionalProperties": False}}},
           "required": ["members"], "additionalProperties": False})
def team_members(team: str) -> dict:
    return {"members": []}


@event("calendar.search", description="Search a team's calendar")
def calendar_search(team: str, date_range: dict | str | None = None) -> dict:
    return {"events": []}


@event("calendar.availability", description="Free slots of people")
def calendar_availability(people: list | dict, date_range: dict | str | None = None) -> dict:
    return {"slots": []}


@event("http.request", description="An HTTP request")
def http_request(url: str, method: Literal["GET", "POST"] = "GET") -> dict:
    return {"status": 200}


@event("email.send", description="Send an email")
def email_send(to: str, subject: str, body: str = "", cc: str = "") -> dict:
    return {"sent": True}
