"""`chainlang waits [list|show RUN [STEP]|cancel RUN [STEP]]`: the runs of the project that wait
for an event or an answer (LANGUAGE.md §15), read from the store of the project of the working
directory (or of `--project DIR`).

Frozen values, payloads and questions may hold secrets: every row is masked with the project's
known secrets and the secret-looking values (`StoreRedaction.data`) before it is shown, as
`chainlang threads` and `tasks` do; a row written before the store masked is masked here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from chainlang.cli.moments import moment
from chainlang.cli.projectstore import open_project_store, project_root
from chainlang.errors import UsageError
from chainlang.output.progress.format import answer_command

if TYPE_CHECKING:
    from chainlang.store import Store
    from chainlang.store.waits import WaitRow

VALUE_WIDTH = 120  # a frozen value or a payload on a line of the text output

# how a settled wait was settled, said in words
_SETTLED = {"delivered": "delivered", "timed_out": "timed out", "cancelled": "cancelled"}


def waits_command(action: str, run: str | None, step: str | None, status: str | None, project: str | None,
                  as_json: bool) -> int:
    from chainlang.store import StoreError

    root = project_root(project)
    if action == "list":
        if run is not None:
            raise UsageError(f"chainlang waits list takes no RUN (to see one: chainlang waits show {run})")
        store = open_project_store(root)
        if store is None:
            rows: list[dict[str, Any]] = []
        else:
            with store:
                wanted = None if status == "all" else status or "waiting"
                rows = [_masked(store, row) for row in store.list_waits(status=wanted)]
        if as_json:
            print(json.dumps({"waits": rows}, ensure_ascii=False))
        elif not rows:
            print("no run waits" if status in (None, "waiting") else f"no waits with status {status}")
        else:
            for i, listed in enumerate(rows):
                if i:
                    print()
                print("\n".join(_block(listed)))
        return 0
    if status is not None:
        raise UsageError("--status goes with list")
    if run is None:
        raise UsageError(f"chainlang waits {action} needs a RUN (a run id, or its transcript; "
                         "see chainlang waits list)")
    run_id = _run_id(run)
    store = open_project_store(root)
    if store is None:
        _fail(f"run {run_id} has no wait (no run of this project has waited: it has no store)")
        return 1
    try:
        with store:
            row = _the_wait(store, run_id, step, action)
            if row is None:
                where = f" at step {step}" if step is not None else ""
                _fail(f"run {run_id} has no wait{where} (chainlang waits list shows the runs that wait)")
                return 1
            if action == "show":
                shown = _masked(store, row)
                print(json.dumps(shown, ensure_ascii=False) if as_json else "\n".join(_block(shown, full=True)))
                return 0
            cancelled = store.settle_wait(row.run_id, row.step, "cancelled")
            if cancelled is None:  # settled before (or meanwhile): say how
                settled = store.get_wait(row.run_id, row.step) or row
                if as_json:
                    print(json.dumps(_masked(store, settled), ensure_ascii=False))
                _fail(f"the wait of run {row.run_id} at step {row.step} is not waiting: {_how(settled)}; "
                      "nothing was cancelled")
                return 1
            shown = _masked(store, cancelled)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    _tell_engine(root, cancelled)
    if as_json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        what = f"question {cancelled.question_id}" if cancelled.question else f"wait for {cancelled.event}"
        print(f"cancelled the {what} of run {cancelled.run_id} at step {cancelled.step}")
        print(f"  a run waiting in the foreground fails that step now (error type cancelled); a detached one when "
              f"it is resumed: chainlang resume {_path(cancelled.transcript)} (or by chainlang serve)")
    return 0


def _run_id(run: str) -> str:
    """A run id, given as the id or as its transcript (the run id its first record names,
    or the name of a transcript that is not there: RUN_ID.jsonl)."""
    if run.endswith(".jsonl") and os.path.isfile(run):
        try:
            with open(run, "rb") as f:
                first = json.loads(f.readline(1024 * 1024))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{run}: not a transcript chainlang can read ({exc}); give the run id instead") from None
        if isinstance(first, dict) and isinstance(first.get("run_id"), str):
            return str(first["run_id"])
        raise UsageError(f"{run}: its first line names no run_id; give the run id instead")
    name = os.path.basename(run.rstrip("/"))
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name


def _the_wait(store: "Store", run_id: str, step: str | None, action: str) -> "WaitRow | None":
    """The wait of `run_id` at `step`; without a step, the run's one wait (the one still
    waiting when it has waited several times); UsageError when that is ambiguous."""
    if step is not None:
        return store.get_wait(run_id, step)
    every = store.list_waits(status=None, run_id=run_id)
    if len(every) <= 1:
        return every[0] if every else None
    waiting = [row for row in every if row.status == "waiting"]
    if len(waiting) == 1:
        return waiting[0]
    among = waiting or every
    steps = ", ".join(row.step for row in among)
    raise UsageError(f"run {run_id} has {'waits' if waiting else 'waited'} at steps {steps}: name one, "
                     f"e.g. chainlang waits {action} {run_id} {among[0].step}")


def _masked(store: "Store", row: "WaitRow") -> dict[str, Any]:
    """The row as --json shows it, what came from the run or the event masked (the store keeps
    them masked with the known secrets only: the where must still match them). Ids and paths
    are left alone: a run's transcript path looks like a token to the lexical rule."""
    shown = row.to_json()
    for key in ("values", "question", "payload"):
        if key in shown:
            shown[key] = store.redaction.data(shown[key])
    if isinstance(shown.get("where"), str):
        shown["where"] = store.redaction.text(shown["where"])
    return shown


def _how(row: "WaitRow") -> str:
    """How a settled wait was settled, in words."""
    what = _SETTLED.get(row.status, row.status)
    if row.status == "delivered" and row.emit_id:
        what += f" by emit {row.emit_id}"
    if row.settled_at:
        what += f" at {moment(row.settled_at)}"
    if row.finished_at:
        what += " (the run has gone on)"
    elif row.status != "waiting":
        what += f" (the run goes on when resumed: chainlang resume {_path(row.transcript)})"
    return what


def _block(row: dict[str, Any], full: bool = False) -> list[str]:
    """A wait (its masked --json form) as lines of text."""
    from chainlang.diagnostics import visible

    question = row.get("question") if isinstance(row.get("question"), dict) else None
    deadline = row.get("deadline")
    until = f"until {deadline} ({_left(deadline)})" if deadline else "(no timeout)"
    if question is not None:
        head = f"{row['run_id']} step {row['step']}: asks {question.get('id')} {until}"
    else:
        head = f"{row['run_id']} step {row['step']}: waits for {row['event']} {until}"
    if full or row.get("status") != "waiting":
        head += f" [{row.get('status')}]"
    lines = [head]
    if question is not None:
        lines.append(f"  question: {_one_line(question.get('question'))}")
        choices = question.get("choices")
        if isinstance(choices, list):
            lines.append("  choices: " + " / ".join(_value(c) for c in choices))
        if isinstance(question.get("schema"), dict):
            lines.append(f"  answer schema: {_value(question['schema'])}")
        if row.get("status") == "waiting":
            lines.append(f"  answer: {answer_command(question)}")
    elif row.get("where"):
        lines.append(f"  where: {_one_line(row['where'])}")
    values = row.get("values") if isinstance(row.get("values"), dict) else {}
    if values and question is None:
        lines.append("  with the run's values frozen when the wait began:")
        lines.extend(f"    {name} = {_value(value)}" for name, value in values.items())
    lines.append(f"  chain: {row.get('chain') or '(unknown)'}  transcript: {_path(str(row.get('transcript')))}"
                 + (f"  engine: {row['engine']}" if row.get("engine") not in (None, "embedded") else ""))
    if full:
        lines.append(f"  began: {moment(str(row.get('created_at')))}")
        if row.get("status") != "waiting":
            how = _SETTLED.get(str(row.get("status")), str(row.get("status")))
            if row.get("emit_id"):
                how += f" by emit {row['emit_id']}"
            lines.append(f"  {how}" + (f" at {moment(row['settled_at'])}" if row.get("settled_at") else ""))
            if row.get("status") == "delivered":
                lines.append(f"  payload: {_value(row.get('payload'))}")
            lines.append("  the run has recorded it" if row.get("finished_at") else
                         f"  the run has not gone on yet: chainlang resume {_path(str(row.get('transcript')))}")
    return [visible(line) for line in lines]


def _left(deadline: str) -> str:
    """How long until `deadline`: `in 1d 23h`, `in 40s`, `passed 3m ago`."""
    try:
        when = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        return "unreadable"
    seconds = (when - datetime.now(timezone.utc)).total_seconds()
    span = _span(abs(seconds))
    return f"in {span}" if seconds >= 0 else f"passed {span} ago"


def _span(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"



def _value(value: Any) -> str:
    return _one_line(json.dumps(value, ensure_ascii=False), VALUE_WIDTH)


def _one_line(value: Any, width: int = 300) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _path(transcript: str) -> str:
    """A transcript as the user would type it: relative to the working directory when under it."""
    if not os.path.isabs(transcript):
        return transcript
    try:
        relative = os.path.relpath(transcript)
    except ValueError:  # another drive (Windows)
        return transcript
    return transcript if relative.startswith("..") else relative


def _fail(message: str) -> None:
    import sys

    from chainlang.diagnostics import visible

    print(f"chainlang waits: {visible(message)}", file=sys.stderr)


def _tell_engine(root: Path, row: Any) -> None:
    """A run on Temporal hears of the cancel by a signal now (its workers would send it later)."""
    from chainlang.engine import wake_waits
    from chainlang.runtime.calls import run_loop

    for problem in run_loop(wake_waits(root, [row])):
        _fail(f"note: {problem}")
