"""What the workflows and the activities send each other: one dataclass in, one out, per
activity (as Temporal's samples do: `hello_activity.py`'s `ComposeGreetingInput`).

Temporal's default converter writes a dataclass as a JSON object and reads it back by the
activity's type hints; it ignores members it does not know and fills in the defaults of
members it does not get. So a member is only ever *added*, with a default: a worker that
does not know it yet, or a history recorded before it, still reads the message.

The converter also sorts the keys of every mapping it writes. A user's values (a step's
params and result, the values a tool captured, a thread's data, a model's messages and
schema) keep the order they were written in, so they travel as JSON text, in the members
whose names end in `_json`; everything else is typed.

Runs recorded before these dataclasses sent JSON text both ways: `received` reads such a
message too, so a run under way when the workers are upgraded keeps going (and its
history replays: tests/test_temporal_replay.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["LimitHit", "ModelAnswered", "ModelAsked", "ModelBudget", "ModelUse", "ProgressReport", "ThreadEvent",
           "ThreadEventAdded", "ThreadRead", "ThreadReads", "ThreadRefs", "ToolCall", "ToolOutcome", "WaitDelivery",
           "WaitKey", "WaitOpen", "WaitOpened", "from_json", "received", "to_json"]


def to_json(value: Any) -> str:
    """A user's value as JSON text, its keys in their order."""
    return json.dumps(value, ensure_ascii=False)


def from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# a reference to a thread's data: the snapshot's key → [thread id, the reference's encoded
# path] (chainlang.engine.temporal.threadrefs); the order of the keys does not matter
ThreadRefs = dict[str, list[Any]]


@dataclass
class ThreadRead:
    """The value of one thread reference as a worker read it, or why it could not be read."""

    value_json: str = "null"
    error: str | None = None

    @classmethod
    def legacy(cls, entry: dict[str, Any]) -> "ThreadRead":
        if "error" in entry:
            return cls(error=str(entry["error"]))
        return cls(value_json=to_json(entry.get("value")))


def _legacy_reads(reads: dict[str, Any] | None) -> dict[str, ThreadRead] | None:
    return None if reads is None else {key: ThreadRead.legacy(entry) for key, entry in reads.items()}


@dataclass
class ModelBudget:
    """What the run's model budget has left for a tool's own model calls (None: no limit)."""

    calls: int | None = None
    tokens: int | None = None


@dataclass
class ModelUse:
    """What a tool's own model calls spent."""

    calls: int = 0
    tokens: int = 0


@dataclass
class ProgressReport:
    """One `ctx.progress(message, fraction)` of a tool."""

    message: str
    fraction: float | None = None


@dataclass
class LimitHit:
    """A limit of the run (§8) that a tool's model call ran into: the workflow stops the run."""

    limit: str
    message: str


@dataclass
class ToolCall:
    """chainlang.tool's input: one attempt of one step's tool."""

    run_id: str
    chain: str | None
    step: str
    event: str
    attempt: int
    params_json: str
    now: str | None = None  # the run's pinned clock (ISO), or None: the worker's
    captured_json: str = "{}"  # what the step's action captured (task.* events)
    allow: list[list[str]] = field(default_factory=list)
    budget: ModelBudget = field(default_factory=ModelBudget)
    reads: ThreadRefs | None = None  # the run's thread references, read again after the tool ran
    expose: list[str] = field(default_factory=list)  # the secrets the step may send to a model or the user (§16)

    @property
    def params(self) -> dict[str, Any]:
        return dict(json.loads(self.params_json))

    @classmethod
    def legacy(cls, call: dict[str, Any]) -> "ToolCall":
        left = call.get("budget") or [None, None]
        return cls(call["run_id"], call.get("chain"), call["step"], call["event"], call["attempt"],
                   to_json(call["params"]), call.get("now"), to_json(call.get("captured") or {}),
                   [list(group) for group in call.get("allow") or ()], ModelBudget(left[0], left[1]), call.get("reads"),
                   list(call.get("expose") or ()))


@dataclass
class ToolOutcome:
    """chainlang.tool's output: what the tool returned or why it failed (`error`, the message
    as the step records it), and what it reported on the way, for the workflow to record.
    A tool's failure is an outcome, never an activity failure (see activities.py)."""

    result_json: str = "null"
    error: str | None = None
    limit: LimitHit | None = None
    notes: list[str] = field(default_factory=list)
    progress: list[ProgressReport] = field(default_factory=list)
    clock: list[str] = field(default_factory=list)  # the readings of the run's clock, ISO
    model_calls_json: str = "[]"  # the model_call records of the tool's own model calls
    used: ModelUse = field(default_factory=ModelUse)
    reads: dict[str, ThreadRead] | None = None
    error_type: str = "tool_error"  # the step's error type for `error` (chainlang.status.ErrorType)

    @property
    def result(self) -> Any:
        return json.loads(self.result_json)

    @classmethod
    def legacy(cls, out: dict[str, Any]) -> "ToolOutcome":
        limit = out.get("limit")
        calls, tokens = out.get("used") or (0, 0)
        return cls(to_json(out.get("result")), out.get("error"), LimitHit(*limit) if limit else None,
                   list(out.get("notes") or ()), [ProgressReport(m, f) for m, f in out.get("progress") or ()],
                   list(out.get("clock") or ()), to_json(out.get("models") or []), ModelUse(calls, tokens),
                   _legacy_reads(out.get("reads")))


@dataclass
class ThreadEvent:
    """chainlang.thread_event's input: one step's result, into a thread of the worker's store."""

    thread: str
    event: str
    result_json: str
    run_id: str
    path: str
    key: str | None  # the step's key in the thread (None: a stored hook's action)
    at: str  # ISO
    reads: ThreadRefs | None = None

    @classmethod
    def legacy(cls, event: dict[str, Any]) -> "ThreadEvent":
        return cls(event["thread"], event["event"], to_json(event["result"]), event["run_id"], event["path"],
                   event["key"], event["at"], event.get("reads"))


@dataclass
class ThreadEventAdded:
    """chainlang.thread_event's output: the store's error, if it refused the event."""

    error: str | None = None
    reads: dict[str, ThreadRead] | None = None

    @classmethod
    def legacy(cls, out: dict[str, Any]) -> "ThreadEventAdded":
        return cls(out.get("error"), _legacy_reads(out.get("reads")))


@dataclass
class ThreadReads:
    """chainlang.thread_reads' input (`refs`) and output (`values`)."""

    refs: ThreadRefs = field(default_factory=dict)
    values: dict[str, ThreadRead] = field(default_factory=dict)

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> "ThreadReads":
        # the input was the refs, the output the values: told apart by their shape
        if all(isinstance(entry, list) for entry in data.values()):
            return cls(refs=data)
        return cls(values=_legacy_reads(data) or {})


@dataclass
class ModelAsked:
    """chainlang.model's input: one question to one of the worker's model tiers."""

    tier: str
    task: str
    messages_json: str
    schema_json: str | None = None
    schema_name: str = "answer"

    @classmethod
    def legacy(cls, asked: dict[str, Any]) -> "ModelAsked":
        schema = asked.get("schema")
        return cls(asked["tier"], asked["task"], to_json(asked["messages"]), None if schema is None else to_json(schema),
                   asked.get("schema_name") or "answer")


@dataclass
class ModelAnswered:
    """chainlang.model's output: the answer and what it used, or the model's error, or a
    configuration error (the tier cannot be asked at all)."""

    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    config_error: str | None = None
    finish_reason: str | None = None  # why the answer ended, as the endpoint said ("length": cut)
    schema_notes: list[str] = field(default_factory=list)  # what was simplified in the schema sent

    @classmethod
    def legacy(cls, out: dict[str, Any]) -> "ModelAnswered":
        return cls(out.get("text") or "", {k: int(v) for k, v in (out.get("usage") or {}).items()}, out.get("error"),
                   out.get("config_error"), out.get("finish_reason"), list(out.get("schema_notes") or []))


@dataclass
class WaitOpen:
    """chainlang.wait_open's input: one wait of a run (LANGUAGE.md §15), as the store's row
    (store/waits.py) registers it; `frozen_json`, `match_value_json` and `question_json` are
    a user's values."""

    run_id: str
    step: str
    event: str
    where: str | None
    frozen_json: str
    deadline: str | None
    transcript: str
    chain: str | None
    match_field: str | None = None
    match_value_json: str = "null"
    question_json: str = "null"


@dataclass
class WaitOpened:
    """chainlang.wait_open's output: the row's deadline (the first registration's), or the
    store's error."""

    deadline: str | None = None
    error: str | None = None


@dataclass
class WaitKey:
    """The input of chainlang.wait_time_out and chainlang.wait_finish: which wait."""

    run_id: str
    step: str


@dataclass
class WaitDelivery:
    """How a wait was settled: the `wait_delivered` signal (serve, emit and `waits cancel`
    send it after settling the store's row) and chainlang.wait_time_out's output (the row
    as the store settled it: a delivery that won the race against the timer is kept)."""

    step: str
    status: str  # ok | timed_out | cancelled (wait_finished's)
    payload_json: str = "null"
    emit_id: str | None = None
    at: str | None = None
    error: str | None = None  # the store's, when it could not be read


M = TypeVar("M", ToolCall, ToolOutcome, ThreadEvent, ThreadEventAdded, ThreadReads, ModelAsked, ModelAnswered)


def received(kind: type[M], message: M | str) -> M:
    """`message` as `kind`: the dataclass as it came, or the JSON text a workflow or worker
    from before the dataclasses sent (a run under way when the workers were upgraded)."""
    if isinstance(message, kind):
        return message
    if isinstance(message, str):
        return kind.legacy(json.loads(message))
    raise TypeError(f"{kind.__name__} expected, got {type(message).__name__}")
