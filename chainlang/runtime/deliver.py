"""Delivering an event to the runs waiting for it (LANGUAGE.md §15).

An event that arrives (`chainlang emit`, serve's `POST /events/NAME`, `emit --to`) is
matched against the waits of its name still waiting: the store narrows them by the
where's equality key (store/waits.py), then each one's `where` is evaluated here with the
payload's fields as bare names and the run's values it froze when the wait began. The
matches are settled in the store in one transaction before anything else happens: a wait
takes one event at most, and one that matched is never lost, whatever dies next. The runs
go on by themselves (a foreground run watches its wait), or serve resumes them.

`user.answered` is checked first (`check_answer`): the question must be waiting, and the
answer one of its choices (or valid against its schema); otherwise the emit is refused and
the run keeps waiting.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.compile.wait_graph import ANSWER_EVENT
from chainlang.expr.errors import ExprError
from chainlang.expr.values import json_equal, truthy, walk_path

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from chainlang.store import Store
    from chainlang.store.waits import WaitRow

__all__ = ["check_answer", "deliver_event", "matches", "waits_store"]


@lru_cache(maxsize=4096)
def _compiled(where: str) -> Any:
    from chainlang.expr import compile_expression, parse_expression

    return compile_expression(parse_expression(where))


def matches(row: "WaitRow", payload: Any) -> bool:
    """Whether `payload` satisfies the wait's `where` (no where: every event of its name)."""
    if row.where is None:
        return True
    frozen = row.frozen
    fields = payload if isinstance(payload, dict) else {}

    def resolve(ref: Any) -> Any:
        text = ref.dotted()
        if text in frozen:
            return frozen[text]
        first = ref.segments[0]
        return walk_path(fields.get(getattr(first, "name", "")), ref.segments[1:], resolve)

    try:
        return truthy(_compiled(row.where)(resolve))
    except ExprError:  # a where that fails on this payload (a type error): not a match
        return False


def check_answer(store: "Store", payload: Any) -> list[str]:
    """Why a `user.answered` payload is refused (empty: it may be delivered)."""
    if not isinstance(payload, dict):
        return ["the payload must be an object with question_id and answer"]
    qid = payload.get("question_id")
    if not isinstance(qid, str) or not qid:
        return ["question_id: the id of the question (chainlang waits list shows it)"]
    waiting = [row for row in store.waits_by_question(qid) if row.status == "waiting"]
    if not waiting:
        known = store.waits_by_question(qid)
        if known:
            how = {"delivered": "was answered", "timed_out": "timed out", "cancelled": "was cancelled"}
            return [f"question {qid} {how.get(known[0].status, known[0].status)}: no run waits for its answer"]
        return [f"no question {qid} is waiting for an answer (chainlang waits list shows the open questions)"]
    answer = payload.get("answer")
    for row in waiting:
        question = row.question or {}
        choices = question.get("choices")
        if isinstance(choices, list) and not any(json_equal(answer, c) for c in choices):
            shown = ", ".join(str(c) for c in choices)
            return [f"answer {answer!r} is not one of the choices of question {qid}: {shown}"]
        schema = question.get("schema")
        if isinstance(schema, dict):
            problems = _schema_problems(schema, answer)
            if problems:
                return [f"the answer does not match the schema of question {qid}: {problems[0]}"]
    return []


def _schema_problems(schema: dict[str, Any], value: Any) -> list[str]:
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    try:
        validator = Draft7Validator(schema)
        return [f"{'/'.join(str(p) for p in e.absolute_path) or 'answer'}: {e.message}"
                for e in validator.iter_errors(value)][:3]
    except SchemaError as exc:
        return [f"the question's schema is not valid: {exc.message}"]


def deliver_event(store: "Store", event: str, payload: Any, emit_id: str | None) -> list["WaitRow"]:
    """Settle every wait the event matches (one transaction): the waits delivered to."""
    rows = store.waiting_for(event, payload)
    if not rows:
        return []
    if event == ANSWER_EVENT:  # by its question's id only (the where is that)
        qid = payload.get("question_id") if isinstance(payload, dict) else None
        chosen = [(row.run_id, row.step) for row in rows if row.question_id == qid]
    else:
        chosen = [(row.run_id, row.step) for row in rows if matches(row, payload)]
    return store.deliver_waits(chosen, payload, emit_id)


_UNREAD: Any = object()  # waits_store's `config` when the caller has not read the project's configuration


def waits_store(root: Path, config: Any = _UNREAD, event: str | None = None) -> "Store | None":
    """The project's store, for the waits an emit delivers to; None when it has none (a
    wait is recorded in the store before its run waits: without one, nothing waits), or,
    the first time a process asks with the `event`, when no run waits for it (asked of an
    SQLite file without opening the store: store/peek.py). Kept open for the process
    (opening it, checking its schema and compiling the query again were about 10 ms of CPU
    an emit); opened again when its file was replaced, or in a forked child. `config`: the
    project's configuration (ProjectConfig, or None without a chainlang.toml) when the
    caller holds it; else chainlang.toml is read again."""
    from chainlang.tasks.stored import STORE_FILE, find_store, project_store

    key = (str(root), os.getpid())
    entry = _WAITS_STORES.get(key)
    if entry is not None:
        store, file, identity = entry
        if file is None or identity == _file_identity(file):
            return store
        del _WAITS_STORES[key]
        store.close()
    if config is not _UNREAD:  # store_exists's first test, on the caller's config: no parse of chainlang.toml
        url = config.store.url if config is not None and config.store is not None else None
        if url is None and not os.path.lexists(root / STORE_FILE):
            return None
    exists, plain_file = find_store(root)
    if not exists:
        return None
    if event is not None and plain_file is not None and key not in _PEEKED:
        from chainlang.store.peek import has_waits_for

        _PEEKED.add(key)  # once a process: asking (~1 ms, SQLite reads the schema) costs more than the open store
        if has_waits_for(plain_file, event) is False:
            return None  # not opened: SQLAlchemy's imports are ~0.4 s of a cold emit
    store = project_store(root)
    if len(_WAITS_STORES) >= 8:  # a process that emits in many projects (tests): keep the newest
        oldest = next(iter(_WAITS_STORES))
        _WAITS_STORES.pop(oldest)[0].close()
    file = store.path if store.dialect == "sqlite" else None
    _WAITS_STORES[key] = (store, file, _file_identity(file) if file is not None else None)
    return store


def _file_identity(file: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(file)
    except OSError:
        return None
    return info.st_dev, info.st_ino


_WAITS_STORES: dict[tuple[str, int], tuple["Store", Path | None, tuple[int, int] | None]] = {}
_PEEKED: set[tuple[str, int]] = set()  # the (root, pid) whose file waits_store asked once without opening it
