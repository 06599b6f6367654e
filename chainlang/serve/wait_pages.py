"""serve's page of the waiting runs (LANGUAGE.md §15): `GET /waiting` lists the runs waiting
inside (event, where and the values it froze, deadline, question) and, for a `user.ask`,
a form that answers it; `POST /waiting/answer` takes that form and emits `user.answered`
as `POST /events/user.answered` would (its hooks fire; an answer outside the question's
choices or schema is refused with 422 and the page shows why; the run keeps waiting).

The form is the page's own: same origin (serve refuses a POST from a page of another
origin, chainlang.serve.guard) and, with a token, the browser's sign-in cookie (SameSite=
Strict: a page of another site cannot send it). `GET /waits` gives the same rows as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from chainlang.store import Store
    from chainlang.store.waits import WaitRow

__all__ = ["ANSWER_PATH", "Answer", "Refused", "answer_of", "waiting_page", "waits_json"]

ANSWER_PATH = "/waiting/answer"
MAX_WAITS = 1000  # rows one page or one GET /waits shows
MAX_ANSWER = 64 * 1024  # characters of an answer typed in the form


@dataclass
class Refused:
    """An answer the page refused: the question it was for, why, and what was typed (kept in the form)."""

    question_id: str
    problems: list[str]
    typed: str = ""


@dataclass
class Answer:
    """A `user.answered` payload made from the form, or why the form cannot make one."""

    payload: dict[str, Any] = field(default_factory=dict)
    refused: Refused | None = None


def answer_kind(question: Mapping[str, Any]) -> str:
    """How the form sends an answer: `json` (a choice, or a schema that is not a plain
    string: the text is read as JSON) or `text` (taken as it is)."""
    schema = question.get("schema")
    if isinstance(question.get("choices"), list):
        return "json"
    if isinstance(schema, dict) and schema.get("type") not in (None, "string"):
        return "json"
    return "text"


def answer_of(form: Mapping[str, str]) -> Answer:
    """The payload of `user.answered` the form asks for (`question_id`, `answer`, `kind`, `by`)."""
    qid = str(form.get("question_id", "")).strip()
    typed = str(form.get("answer", ""))
    if not qid:
        return Answer(refused=Refused("", ["the form names no question (question_id)"], typed))
    if len(typed) > MAX_ANSWER:
        return Answer(refused=Refused(qid, [f"the answer is longer than {MAX_ANSWER} characters"], ""))
    answer: Any = typed
    if form.get("kind") == "json":
        try:
            answer = json.loads(typed)
        except ValueError as exc:
            return Answer(refused=Refused(qid, [f"the answer is not JSON: {exc}; this question takes a JSON value "
                                                "(e.g. 42, true, \"text\", {\"key\": 1})"], typed))
    payload: dict[str, Any] = {"question_id": qid, "answer": answer}
    by = str(form.get("by", "")).strip()
    if by:
        payload["by"] = by[:200]
    return Answer(payload)


def waits_json(store: "Store", status: str | None, limit: int) -> dict[str, Any]:
    """What `GET /waits` answers: the waits (by default those still waiting), oldest first."""
    rows = store.list_waits(status=status, limit=max(1, min(limit, MAX_WAITS)))
    return {"waits": [row.to_json() for row in rows], "count": len(rows),
            "waiting": store.count_waits()}


def _left(deadline: str | None, now: datetime) -> str:
    """How long until `deadline`, in words ("in 2 d 3 h", "passed")."""
    if deadline is None:
        return "no deadline"
    try:
        moment = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return deadline
    seconds = int((moment - now).total_seconds())
    if seconds <= 0:
        return "passed"
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and len(parts) < 2:
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
    return "in " + " ".join(parts)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _row(row: "WaitRow", now: datetime, refused: Refused | None) -> dict[str, Any]:
    out: dict[str, Any] = {"run_id": row.run_id, "step": row.step, "event": row.event, "where": row.where,
                           "values": [(k, _shown(v)) for k, v in row.frozen.items()], "deadline": row.deadline,
                           "left": _left(row.deadline, now), "chain": row.chain or "", "engine": row.engine,
                           "since": row.created_at, "question": None}
    question = row.question
    if question is not None:
        mine = refused if refused is not None and refused.question_id == row.question_id else None
        choices = question.get("choices") if isinstance(question.get("choices"), list) else None
        out["question"] = {
            "id": row.question_id, "text": str(question.get("question", "")), "kind": answer_kind(question),
            "choices": [(_shown(c), json.dumps(c, ensure_ascii=False)) for c in choices] if choices else None,
            "schema": json.dumps(question["schema"], ensure_ascii=False) if isinstance(question.get("schema"), dict)
            else None,
            "problems": mine.problems if mine else [], "typed": mine.typed if mine else ""}
    return out


def waiting_page(project: Path, store: "Store", *, refused: Refused | None = None, answered: str | None = None,
                 trouble: str | None = None, root: str = "") -> str:
    """The page of `GET /waiting` (and of a refused answer: `refused` shows its problems in its
    form); `root`: the way from the page's address to serve's root ("../" from /waiting/answer)."""
    from chainlang.report.page import templates

    now = datetime.now(timezone.utc)
    rows = store.list_waits(limit=MAX_WAITS)
    note = None
    if answered:
        known = store.waits_by_question(answered)
        went = [row.run_id for row in known if row.status == "delivered"]
        note = (f"Answer taken: run {', '.join(went)} goes on." if went else
                f"Answer taken for question {answered}.")
    stray = None  # a refusal of a question no longer listed (answered meanwhile): said at the top
    if refused is not None and not any(row.question_id == refused.question_id for row in rows):
        stray = refused.problems
    return templates().get_template("waits.html.j2").render(
        project=project.name or str(project), waits=[_row(row, now, refused) for row in rows], note=note,
        stray=stray, trouble=trouble, root=root, made=now.strftime("%Y-%m-%d %H:%M:%S UTC"))
