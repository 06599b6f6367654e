"""The text of the progress lines: one formatter, shared by the plain and the rich view.

`_Formatter` turns typed journal records (chainlang.journal.records) into lines, lists of
`(text, style)` segments, for a stream of a given encoding: symbols (Unicode, or ASCII on a
narrow stream), durations, and every text that comes from a chain, a tool or a result cut
to one visible line by `clean()`, with the run's secrets masked first (`secrets`, set by
the views' `use_secrets`). A record's members are read as attributes, and odd values
(a number for a step path, a string for a duration) are tolerated.
"""

from __future__ import annotations

import codecs
import math
import os
from typing import TYPE_CHECKING, Any

from chainlang.diagnostics import visible

if TYPE_CHECKING:
    from chainlang.journal.records import (Decide, HookDropped, HookFinished, HookFired, RunFinished, RunStarted,
                                           StepFinished, StepProgress, StepStarted, WaitFinished, WaitStarted)
    from chainlang.redaction import Redactor

MAX_TEXT = 200  # characters of one message, reason or error on a line
_MAX_NAME = 80  # characters of a step path or an event name
_MAX_NOTE = 1000  # characters of a notification line

# One piece of a line: its text and a style name ("" for none), rendered as ANSI escapes by
# the plain view and as rich styles by the rich view.
Segment = tuple[str, str]
Line = list[Segment]

_UNICODE_SYMBOLS = {
    "ok": "✓",
    "failed": "✗",
    "skipped": "-",
    "cancelled": "⊘",
    "other": "•",
    "retry": "↻",
    "progress": "…",
    "decide": "?",
    "run": "▶",
    "hook": "↳",
    "wait": "⧖",
    "ellipsis": "…",
    "sep": " · ",
}
_ASCII_SYMBOLS = {
    "ok": "+",
    "failed": "x",
    "skipped": "-",
    "cancelled": "/",
    "other": "*",
    "retry": "~",
    "progress": "...",
    "decide": "?",
    "run": ">",
    "hook": "^",
    "wait": "=",
    "ellipsis": "...",
    "sep": " - ",
}

_STEP_STATUSES = ("ok", "failed", "skipped", "cancelled")

_ANSI_RESET = "\x1b[0m"
_ANSI = {
    "ok": "\x1b[32m",
    "fail": "\x1b[1;31m",
    "warn": "\x1b[33m",
    "dim": "\x1b[2m",
    "info": "\x1b[36m",
    "decide": "\x1b[35m",
    "bold": "\x1b[1m",
}
_RICH_STYLES = {
    "": "",
    "ok": "green",
    "fail": "bold red",
    "warn": "yellow",
    "dim": "dim",
    "info": "cyan",
    "decide": "magenta",
    "bold": "bold",
}
_STATUS_STYLE = {"ok": "ok", "failed": "fail", "skipped": "dim", "cancelled": "warn"}
_RUN_STYLE = {"ok": "ok", "failed": "fail", "broken": "fail"}


def _isatty(stream: object) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def _narrow_encoding(encoding: object) -> str | None:
    """None when `encoding` carries all of Unicode (or is unknown: a StringIO), else its name."""
    if not isinstance(encoding, str) or not encoding:
        return None
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    return None if name.startswith("utf") else name


def _can_encode(text: str, encoding: str | None) -> bool:
    if encoding is None:
        return True
    try:
        text.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def _duration(ms: object) -> str:
    """`0.4 ms`, `12.3 ms`, `1.25 s`, `2m 05s`, `1h 02m 03s`; "" for a missing or odd value."""
    if type(ms) is float and 0.0 <= ms < 999.95:  # the common case first
        return f"{ms:.1f} ms"
    if type(ms) is not float and type(ms) is not int:
        return ""
    if not math.isfinite(ms) or ms < 0:
        return ""
    if ms < 999.95:
        return f"{ms:.1f} ms"
    seconds = ms / 1000
    if seconds < 59.995:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _elapsed(seconds: float) -> str:
    """A running time that does not flicker: `0.3 s`, `42.0 s`, then as `_duration`."""
    return f"{seconds:.1f} s" if seconds < 59.95 else _duration(seconds * 1000)


def _fraction(value: object) -> float | None:
    if (type(value) is float or type(value) is int) and math.isfinite(value):
        return min(1.0, max(0.0, float(value)))
    return None


class _Formatter:
    """Turns records into lines (lists of segments) for a stream of a given encoding."""

    def __init__(self, encoding: object) -> None:
        narrow = _narrow_encoding(encoding)
        unicode_ok = _can_encode("".join(_UNICODE_SYMBOLS.values()), narrow)
        self.symbols = _UNICODE_SYMBOLS if unicode_ok else _ASCII_SYMBOLS
        # the encoding that text must survive: utf-8 (only lone surrogates can fail) or a narrow one
        self._narrow = narrow
        self._target = narrow or "utf-8"
        self._ellipsis = self.symbols["ellipsis"]
        self.secrets: Redactor | None = None  # the run's redaction service (`use_secrets`)
        self._ok_symbol = self.symbols["ok"]
        self._names: dict[str, str] = {}  # event name -> its clean() text, for ok_line
        self._names_secrets = 0  # how many secrets the run had when _names was filled
        self.kind = "run"  # or "emit": what the run_started record began
        self._waits: dict[object, tuple[str, bool]] = {}  # step → (its event, a user.ask), for wait_finished

    def clean(self, value: object, limit: int = MAX_TEXT) -> str:
        """`value` as one visible line of at most `limit` characters that the stream can
        encode, with the run's secrets masked (before it is cut: no part of one shows)."""
        text = value if type(value) is str else ("" if value is None else str(value))
        secrets = self.secrets
        if secrets is not None and secrets.secrets:
            text = secrets.mask(text)
        if len(text) > 4 * limit:  # never spend time on a megabyte message
            text = text[: 4 * limit]
        if not text.isprintable():  # the rare case: newlines, tabs, controls, bidi, surrogates
            text = visible(" ".join(text.split()))
            text = text.encode(self._target, "backslashreplace").decode(self._target)
        elif self._narrow is not None and not text.isascii():
            text = text.encode(self._target, "backslashreplace").decode(self._target)
        if len(text) > limit:
            text = text[: limit - len(self._ellipsis)] + self._ellipsis
        return text

    def _step(self, rec: StepStarted | StepProgress | Decide | StepFinished) -> tuple[str, str]:
        return self.clean(rec.step, _MAX_NAME), self.clean(rec.event, _MAX_NAME)

    def _error(self, error: object) -> str:
        if isinstance(error, dict):
            message = error.get("message")
            if message is None or message == "":
                message = error.get("type")
            return self.clean(message)
        return self.clean(error)

    def run_started(self, rec: RunStarted) -> Line:
        chain, file = rec.chain, _relative(rec.file)
        emitted = rec.emit
        self.kind = "emit" if isinstance(emitted, dict) else "run"
        what = f"resume {self.kind}" if rec.resumed is True and emitted else "resume" if rec.resumed is True else self.kind
        line: Line = [(self.symbols["run"], "bold"), (" ", ""), (what, "bold")]
        if isinstance(emitted, dict):
            line.append((" " + self.clean(emitted.get("event"), _MAX_NAME), "bold"))
            if isinstance(emitted.get("id"), str):
                line.append((f" --id {self.clean(emitted['id'], _MAX_NAME)}", "dim"))
            if file:
                line.append((f" (in {self.clean(file)})", "dim"))
        elif chain:
            line.append((" " + self.clean(chain, _MAX_NAME), "bold"))
            if file:
                line.append((f" ({self.clean(file)})", "dim"))
        elif file:
            line.append((" " + self.clean(file), "bold"))
        if rec.now:
            line.append((f", clock pinned to {self.clean(rec.now, _MAX_NAME)}", "dim"))
        return line

    def retry(self, rec: StepStarted, attempt: int) -> Line:
        step, event = self._step(rec)
        limit = rec.max_attempts
        of = f"/{limit}" if type(limit) is int else ""
        return [(self.symbols["retry"], "warn"), (f" {step} {event} ", ""), (f"retry {attempt}{of}", "warn")]

    def progress(self, rec: StepProgress, fraction: float | None) -> Line:
        step, event = self._step(rec)
        percent = "" if fraction is None else f" {int(fraction * 100)}%"
        message = self.clean(rec.message)
        return [(self.symbols["progress"], "dim"), (f" {step} {event}{percent}", "dim"), (f" {message}" if message else "", "")]

    def decide(self, rec: Decide) -> Line:
        step, event = self._step(rec)
        reason = self.clean(rec.reason)
        return [
            (self.symbols["decide"], "decide"),
            (f" {step} {event} decide: ", ""),
            (self.clean(rec.action, _MAX_NAME), "decide"),
            (f" ({reason})" if reason else "", "dim"),
        ]

    def _ok(self, rec: StepFinished) -> tuple[str, str]:
        step, event = self._step(rec)
        tail = _duration(rec.duration_ms)
        return f" {step} {event}", f" {tail}" if tail else ""

    def ok_text(self, rec: StepFinished) -> str:
        """The uncoloured line of a step finished ok: the most frequent line, made directly
        (the same text as `finished(rec, "ok")`, in fewer calls)."""
        return self.ok_line(rec.step, rec.event, rec.duration_ms)

    def ok_line(self, step: object, event: object, duration_ms: object) -> str:
        """`ok_text` of a record with these members."""
        clean = self.clean
        path = clean(step, _MAX_NAME)
        secrets = self.secrets
        if secrets is not None and len(secrets.secrets) != self._names_secrets:  # the run learnt a secret
            self._names.clear()
            self._names_secrets = len(secrets.secrets)
        name = self._names.get(event) if type(event) is str else None
        if name is None:
            name = clean(event, _MAX_NAME)
            if type(event) is str and len(self._names) < 1024:  # a chain has few event names
                self._names[event] = name
        tail = _duration(duration_ms)
        return f"{self._ok_symbol} {path} {name} {tail}" if tail else f"{self._ok_symbol} {path} {name}"

    def finished(self, rec: StepFinished, status: str) -> Line:
        if status == "ok":
            head, tail = self._ok(rec)
            return [(self.symbols["ok"], "ok"), (head, ""), (tail, "dim")]
        step, event = self._step(rec)
        if status == "failed":
            message = self._error(rec.error)
            return [(self.symbols["failed"], "fail"), (f" {step} {event} ", ""), ("failed", "fail"), (f": {message}" if message else "", "")]
        style = _STATUS_STYLE.get(status, "warn")
        symbol = self.symbols[status] if status in ("skipped", "cancelled") else self.symbols["other"]
        reason = self.clean(rec.reason)  # why a step was skipped, when the engine says
        return [(symbol, style), (f" {step} {event} ", ""), (self.clean(status, _MAX_NAME), style), (f" ({reason})" if reason else "", "dim")]

    def _hook(self, rec: HookFired | HookFinished | HookDropped) -> str:
        """`hook KEY` and, for a firing around a step, `at STEP`."""
        key = self.clean(rec.hook, _MAX_NAME)
        step = rec.step
        return f" hook {key} at {self.clean(step, _MAX_NAME)}" if step else f" hook {key}"

    def hook_fired(self, rec: HookFired) -> Line:
        return [(self.symbols["hook"], "dim"), (self._hook(rec), ""),
                (f" fired on {self.clean(rec.when, _MAX_NAME)}:{self.clean(rec.event, _MAX_NAME)}", "dim")]

    def hook_finished(self, rec: HookFinished) -> Line:
        status = self.clean(rec.status, _MAX_NAME)
        if status == "ok":
            tail = _duration(rec.duration_ms)
            return [(self.symbols["ok"], "ok"), (self._hook(rec), ""), (f" ok {tail}" if tail else " ok", "dim")]
        message = self._error(rec.error)
        symbol = self.symbols["failed"] if status == "failed" else self.symbols.get(status, self.symbols["other"])
        style = "fail" if status == "failed" else "warn"
        return [(symbol, style), (self._hook(rec) + " ", ""), (status, style), (f": {message}" if message else "", "")]

    def hook_dropped(self, rec: HookDropped) -> Line:
        return [(self.symbols["skipped"], "dim"), (self._hook(rec) + " ", ""),
                (f"dropped ({self.clean(rec.reason, _MAX_NAME)}: {self.clean(rec.message)})", "dim")]

    def run_finished(self, rec: RunFinished) -> Line:
        status = self.clean(rec.status or "finished", _MAX_NAME)
        took = _duration(rec.duration_ms)
        # an interrupted run's message (how to resume, what to check) is printed whole by the
        # command after the view closes: here it would be cut, and said twice
        error = rec.error if status != "interrupted" else None
        message = self._error(error) if error else ""
        line: Line = [(f"{self.kind} {status}", _RUN_STYLE.get(status, "warn"))]
        if message:
            line.append((f": {message}", ""))
            if took:
                line.append((f" ({took})", "dim"))
        elif took:
            line.append((f" {'in' if status == 'ok' else 'after'} {took}", "dim"))
        return line

    def wait_started(self, rec: WaitStarted) -> list[Line]:
        """What the run waits for: the event, its where with the values it froze and the
        deadline; for a user.ask, the question, its choices and how to answer it."""
        step, event = self.clean(rec.step, _MAX_NAME), self.clean(rec.event, _MAX_NAME)
        question = rec.question if isinstance(rec.question, dict) else None
        if len(self._waits) >= 1024:  # a run waits at a few steps at once: bounded all the same
            self._waits.clear()
        self._waits[rec.step] = ("user.ask" if question is not None else event, question is not None)
        until = f" until {self.clean(rec.deadline, _MAX_NAME)}" if rec.deadline else " (no timeout)"
        symbol = (self.symbols["wait"], "info")
        if question is None:
            where = ""
            if rec.where:
                where = f" where {rec.where}"
                if isinstance(rec.values, dict) and rec.values:
                    where += " (" + ", ".join(f"{name} = {_json(value)}" for name, value in rec.values.items()) + ")"
            return [[symbol, (f" {step} ", ""), ("waits for", "info"), (f" {event}", "bold"),
                     (self.clean(where), "dim"), (until, "dim")]]
        choices = question.get("choices")
        shown = f" [{' / '.join(_json(c) for c in choices)}]" if isinstance(choices, list) else ""
        return [[symbol, (f" {step} ", ""), ("asks", "info"), (f" {self.clean(question.get('question'))}", "bold"),
                 (self.clean(shown), ""), (f" (question {self.clean(question.get('id'), _MAX_NAME)}{until})", "dim")],
                [("  answer with: ", "dim"), (self.clean(answer_command(question), _MAX_NOTE), "")]]

    def wait_finished(self, rec: WaitFinished) -> Line:
        """How a wait ended: delivered (by which emit), answered, timed out or cancelled."""
        step = self.clean(rec.step, _MAX_NAME)
        event, asked = self._waits.pop(rec.step, ("wait", False))  # a resumed run did not see its wait begin
        by = f" by emit {self.clean(rec.emit_id, _MAX_NAME)}" if rec.emit_id else ""
        if rec.status == "ok":
            return [(self.symbols["ok"], "ok"), (f" {step} {event} ", ""), ("answered" if asked else "delivered", "ok"),
                    (by, "dim")]
        if rec.status == "timed_out":
            return [(self.symbols["failed"], "warn"), (f" {step} {event} ", ""), ("timed out", "warn")]
        if rec.status == "cancelled":
            return [(self.symbols["cancelled"], "warn"), (f" {step} {event} ", ""), ("cancelled", "warn")]
        return [(self.symbols["other"], "warn"), (f" {step} {event} ", ""), (self.clean(rec.status, _MAX_NAME), "warn")]

    def elided(self, counts: dict[str, int]) -> Line:
        total = sum(counts.values())
        parts = ", ".join(f"{n:,} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        return [(f"{self._ellipsis} {total:,} more lines not shown ({parts}); the transcript has them all", "dim")]



def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def answer_command(question: dict[str, Any]) -> str:
    """The command that answers a user.ask question, its first choice as the example answer."""
    import json

    qid = json.dumps(str(question.get("id")))
    choices = question.get("choices")
    answer = _json(choices[0]) if isinstance(choices, list) and choices else '"..."'
    data = f'{{"question_id": {qid}, "answer": {answer}}}'
    if "'" in data:  # not quotable as one shell word
        data = f'{{"question_id": {qid}, "answer": ...}}'
    return f"chainlang emit user.answered --data '{data}'"


def waiting_note(rec: WaitStarted) -> str:
    """One line saying what a resumed run waits for at `rec`'s step (its wait_started was
    recorded, and shown, by the process that began the wait)."""
    question = rec.question if isinstance(rec.question, dict) else None
    until = f" until {rec.deadline}" if rec.deadline else " (no timeout)"
    if question is None:
        where = f" where {rec.where}" if rec.where else ""
        return f"resumed at step {rec.step}, which waits for {rec.event}{where}{until}"
    choices = question.get("choices")
    shown = f" [{' / '.join(_json(c) for c in choices)}]" if isinstance(choices, list) else ""
    return (f"resumed at step {rec.step}, which asks: {question.get('question')}{shown} (question "
            f"{question.get('id')}{until}); answer with: {answer_command(question)}")


def _relative(file: Any) -> Any:
    """A chain file as the user would type it: relative to the working directory when under it."""
    if not isinstance(file, str) or not os.path.isabs(file):
        return file
    try:
        return os.path.relpath(file) if not os.path.relpath(file).startswith("..") else file
    except ValueError:  # another drive (Windows)
        return file
