"""`chainlang threads [list|show|create|archive]`: the project's stored threads (LANGUAGE.md
§13), read from the store of the project of the working directory (or of `--project DIR`)."""

from __future__ import annotations

import json
from typing import Any

from chainlang.cli.moments import moment
from chainlang.cli.projectstore import open_project_store, project_root
from chainlang.errors import UsageError

SUMMARY_WIDTH = 60  # the summary in a line of the list
RESULT_WIDTH = 100  # an event's result in a line of show


def describe(thread: Any) -> dict[str, Any]:
    """A thread as `--json` shows it."""
    return {"thread_id": thread.id, "status": thread.status, "summary": thread.summary,
            "created_at": thread.created_at, "updated_at": thread.updated_at}


def threads_command(action: str, thread_id: str | None, status: str | None, summary: str | None,
                    limit: int | None, project: str | None, as_json: bool, now: str | None = None) -> int:
    from chainlang.runtime.admission import parse_now
    from chainlang.store import StoreError

    if now is not None and action not in ("create", "archive"):
        raise UsageError("--now goes with create and archive (the moment they record)")
    at = parse_now(now)  # a run pinned with --now writes its thread on that clock: pin these the same

    root = project_root(project)
    if action == "list":
        if thread_id is not None:
            raise UsageError(f"chainlang threads list takes no THREAD_ID (to see one: chainlang threads show {thread_id})")
        store = open_project_store(root)
        # masked again when shown: a row stored before the store masked holds its secrets
        rows = [] if store is None else [store.redaction.data(describe(t)) for t in store.list_threads(status=status)]
        if store is not None:
            store.close()
        if as_json:
            print(json.dumps({"threads": rows}, ensure_ascii=False))
        elif not rows:
            print("no threads" + (f" with status {status}" if status else ""))
        else:
            width = max(len(row["thread_id"]) for row in rows)
            for row in rows:
                print(f"{row['thread_id']:{width}}  {row['status']:8} {moment(row['updated_at'])}  "
                      f"{_short(row['summary'], SUMMARY_WIDTH)}".rstrip())
        return 0
    if thread_id is None:
        raise UsageError(f"chainlang threads {action} needs a THREAD_ID (see chainlang threads list)")
    if summary is not None and action != "create":
        raise UsageError("--summary goes with create")
    store = open_project_store(root, create=action == "create")
    if store is None:
        raise UsageError(f"{thread_id}: no such thread (this project has no threads; create one with: "
                         f"chainlang threads create {thread_id})")
    try:
        with store:
            if action == "create":
                thread = store.create_thread(thread_id, summary=summary or "", at=at)
            elif action == "archive":
                thread = store.archive(thread_id, at=at) if store.get_thread(thread_id) is not None else None
            else:
                thread = store.get_thread(thread_id)
            if thread is None:
                from chainlang.runtime.threads import unknown_thread

                raise UsageError(unknown_thread(thread_id, store))
            if action == "show":
                events = store.thread_events(thread_id, limit=limit)
                _show(store.redaction.data(describe(thread)),
                      [store.redaction.data({"seq": e.seq, **e.to_json()}) for e in events], as_json, limit)
                return 0
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        print(json.dumps(store.redaction.data(describe(thread)), ensure_ascii=False))
    else:
        print(f"{thread.id}: {thread.status}")
    return 0


def _show(thread: dict[str, Any], events: list[dict[str, Any]], as_json: bool, limit: int | None) -> None:
    """A thread (`describe`'s form) and its events (`{"seq": ..., **ThreadEvent.to_json()}`), both masked."""
    if as_json:
        print(json.dumps({**thread, "events": events}, ensure_ascii=False))
        return
    print(f"thread {thread['thread_id']}: {thread['status']}")
    print(f"summary: {thread['summary'] or '(none yet)'}")
    print(f"created: {moment(thread['created_at'])}  updated: {moment(thread['updated_at'])}")
    if not events:
        print("no events")
        return
    print(f"events (the last {len(events)}):" if limit is not None and len(events) == limit else "events:")
    for e in events:
        name = e["event"] if e.get("key") is None else f"{e['event']} ({e['key']})"
        where = f"  [run {e['run_id']} step {e.get('step')}]" if e.get("run_id") is not None else ""
        print(f"  {e['seq']}  {moment(e['timestamp'])}  {name}: "
              f"{_short(json.dumps(e['result'], ensure_ascii=False), RESULT_WIDTH)}{where}")



def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
