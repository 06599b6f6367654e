"""The records of a run's journal (LANGUAGE.md §9), one type each, and their one codec.

Every record is a small slotted dataclass. The journal adds the envelope (`run_id`,
`seq`, `ts`) when it writes one; `Envelope` is what it knows of a record it read.
`fields(record)` gives the JSON members of a record in a fixed order, leaving out the
optional members that are not set; `decode(data)` turns a JSON object read back into
its record, or raises `RecordError` saying which member is wrong. The writer, the
progress views, the reader and resume all use these types: there is no other notion of
what a record holds.

Values inside records (params, results, inputs, outputs, errors) are plain JSON, checked
by the interpreter before it records them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Union

from chainlang.status import HOOK_STATUSES, RUN_STATUSES, STEP_STATUSES, HookStatus, RunStatus, StepStatus

__all__ = [
    "RECORD_TYPES",
    "Clock",
    "Decide",
    "Envelope",
    "HookDropped",
    "HookFinished",
    "HookFired",
    "ModelCall",
    "Record",
    "RecordError",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "StepProgress",
    "StepStarted",
    "WaitFinished",
    "WaitStarted",
    "decode",
    "fields",
]


class RecordError(ValueError):
    """A JSON object that is not a valid record; the message names the member."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the journal adds to every record it writes."""

    run_id: str
    seq: int
    ts: str


@dataclass(slots=True)
class RunStarted:
    """The first record, and again at the start of each resumption."""

    TYPE: ClassVar[str] = "run_started"
    chain: str | None
    file: str
    file_sha256: str
    inputs: dict[str, Any]
    now: str | None
    started_at: str
    tools: list[str]
    resumed: bool
    # an emit (§6.1): {"event", "data", "id"?}; `file` is then the project directory and
    # `file_sha256` the digest of the hooks in force
    emit: dict[str, Any] | None = None
    # the thread the run is attached to from its start (§13: --thread, or the input thread_id)
    thread: str | None = None


@dataclass(slots=True)
class StepStarted:
    """One attempt of an event step begins. `max_attempts` is set when the event is called
    (not for a step that ends before its call: skipped, invalid params...)."""

    TYPE: ClassVar[str] = "step_started"
    step: str
    event: str
    attempt: int
    params: Any
    max_attempts: int | None = None


@dataclass(slots=True)
class StepProgress:
    """A progress message of a running step (`ctx.progress`)."""
    TYPE: ClassVar[str] = "step_progress"
    step: str
    event: str
    message: str
    fraction: float | None = None


@dataclass(slots=True)
class Decide:
    """A decision of the decide model: what it was asked and its answer (reused on resume)."""

    TYPE: ClassVar[str] = "decide"
    step: str
    event: str
    asked: dict[str, Any]
    action: str
    reason: str
    source: str
    params: dict[str, Any] | None = None

    def answer(self) -> dict[str, Any]:
        """The decision as `Decision.from_record` reads it."""
        out: dict[str, Any] = {"action": self.action, "reason": self.reason, "source": self.source}
        if self.params is not None:
            out["params"] = self.params
        return out


@dataclass(slots=True)
class HookFired:
    """A hook's condition held (§6.1): `when` is pre, post or error, `step` the step path of the
    event (none for an emitted external event), `trigger` the hook's trigger as written."""

    TYPE: ClassVar[str] = "hook_fired"
    hook: str
    when: str
    event: str
    step: str | None = None
    trigger: str | None = None


@dataclass(slots=True)
class HookFinished:
    """A hook's action ended: `ok`, `failed` or `cancelled` (by the run's end, or a failure
    elsewhere). Resume never runs again an action that has this record."""

    TYPE: ClassVar[str] = "hook_finished"
    hook: str
    status: HookStatus
    error: dict[str, Any] | None
    duration_ms: float
    step: str | None = None


@dataclass(slots=True)
class HookDropped:
    """A hook that did not fire although its condition held (`reason`: `depth`, `single`),
    or whose running action a new firing replaced (`restart`)."""

    TYPE: ClassVar[str] = "hook_dropped"
    hook: str
    when: str
    event: str
    reason: str
    message: str
    step: str | None = None


@dataclass(slots=True)
class StepFinished:
    """The attempt ended: `ok`, `failed`, `skipped` or `cancelled`. `reason` says why a step
    was skipped or cancelled; `broke` marks the step the decide model stopped the chain at."""

    TYPE: ClassVar[str] = "step_finished"
    step: str
    event: str
    status: StepStatus
    result: Any
    error: dict[str, Any] | None
    duration_ms: float
    attempt: int
    reason: str | None = None
    broke: bool | None = None


@dataclass(slots=True)
class RunFinished:
    """The last record of a run: its status, outputs, error and duration."""
    TYPE: ClassVar[str] = "run_finished"
    status: RunStatus
    outputs: dict[str, Any]
    error: dict[str, Any] | None
    duration_ms: float


@dataclass(slots=True)
class Clock:
    """A reading of the run's clock by a step (given back to it on resume)."""

    TYPE: ClassVar[str] = "clock"
    value: str
    step: str | None = None


@dataclass(slots=True)
class ModelCall:
    """One exchange with a model tier (§13), recorded before its answer is used and given back
    to the step on resume instead of asking again. `request` is what was sent (secrets
    masked, long texts cut); `answer` the model's text (masked), None when the call failed
    (`error`); `usage` the tokens it took (`prompt_tokens`, `completion_tokens`);
    `finish_reason` why the answer ended, as the endpoint said ("stop"; "length": cut at a
    length limit), left out when it did not say."""

    TYPE: ClassVar[str] = "model_call"
    step: str
    tier: str
    model: str
    task: str
    request: dict[str, Any]
    answer: str | None
    usage: dict[str, Any]
    duration_ms: float
    error: dict[str, Any] | None = None
    finish_reason: str | None = None


@dataclass(slots=True)
class WaitStarted:
    """A `wait` (or `user.ask`) step began to wait (§15), recorded before the run waits:
    the event it waits for, its `where` with the run's values it reads frozen (`values`,
    by reference text), its deadline (UTC, None: no timeout) and, for `user.ask`, the
    question (`{id, question, choices?, schema?}`)."""

    TYPE: ClassVar[str] = "wait_started"
    step: str
    event: str
    where: str | None
    values: dict[str, Any]
    deadline: str | None
    question: dict[str, Any] | None = None


@dataclass(slots=True)
class WaitFinished:
    """The wait ended: `ok` (an event matched: its `payload` and the emit's id), `timed_out`
    or `cancelled` (`chainlang waits cancel`). Written after the store recorded the delivery."""

    TYPE: ClassVar[str] = "wait_finished"
    step: str
    status: str
    payload: Any
    emit_id: str | None = None
    at: str | None = None  # when the wait was settled (ISO 8601 UTC): user.ask's `at`


Record = Union[RunStarted, StepStarted, StepProgress, Decide, HookFired, HookFinished, HookDropped, StepFinished,
               RunFinished, Clock, ModelCall, WaitStarted, WaitFinished]

_CLASSES: dict[str, Any] = {cls.TYPE: cls for cls in (RunStarted, StepStarted, StepProgress, Decide, HookFired, HookFinished,
                                                      HookDropped, StepFinished, RunFinished, Clock, ModelCall,
                                                      WaitStarted, WaitFinished)}
WAIT_STATUSES: frozenset[str] = frozenset({"ok", "timed_out", "cancelled"})
RECORD_TYPES: frozenset[str] = frozenset(_CLASSES)

# per type, in the order members are written: (member, accepted Python types, required, nullable)
_STR, _INT, _NUM, _BOOL, _OBJ, _LIST, _ANY = (str,), (int,), (int, float), (bool,), (dict,), (list,), None
_SCHEMA: dict[str, tuple[tuple[str, Any, bool, bool], ...]] = {}  # type → (name, types, required, nullable)


def _members(cls: Any, *spec: tuple[str, Any, bool, bool]) -> None:
    _SCHEMA[cls.TYPE] = spec


_members(RunStarted, ("chain", _STR, True, True), ("file", _STR, True, False), ("file_sha256", _STR, True, False),
         ("inputs", _OBJ, True, False), ("now", _STR, True, True), ("started_at", _STR, True, False),
         ("tools", _LIST, True, False), ("resumed", _BOOL, True, False), ("emit", _OBJ, False, False),
         ("thread", _STR, False, False))
_members(StepStarted, ("step", _STR, True, False), ("event", _STR, True, False), ("attempt", _INT, True, False),
         ("max_attempts", _INT, False, False), ("params", _ANY, True, True))
_members(StepProgress, ("step", _STR, True, False), ("event", _STR, True, False), ("message", _STR, True, False),
         ("fraction", _NUM, False, True))
_members(Decide, ("step", _STR, True, False), ("event", _STR, True, False), ("asked", _OBJ, True, False),
         ("action", _STR, True, False), ("params", _OBJ, False, False), ("reason", _STR, True, False),
         ("source", _STR, True, False))
_members(HookFired, ("hook", _STR, True, False), ("when", _STR, True, False), ("event", _STR, True, False),
         ("step", _STR, False, False), ("trigger", _STR, False, False))
_members(HookFinished, ("hook", _STR, True, False), ("step", _STR, False, False), ("status", _STR, True, False),
         ("error", _OBJ, True, True), ("duration_ms", _NUM, True, False))
_members(HookDropped, ("hook", _STR, True, False), ("when", _STR, True, False), ("event", _STR, True, False),
         ("step", _STR, False, False), ("reason", _STR, True, False), ("message", _STR, True, False))
_members(StepFinished, ("step", _STR, True, False), ("event", _STR, True, False), ("status", _STR, True, False),
         ("result", _ANY, True, True), ("error", _OBJ, True, True), ("duration_ms", _NUM, True, False),
         ("attempt", _INT, True, False), ("reason", _STR, False, False), ("broke", _BOOL, False, False))
_members(RunFinished, ("status", _STR, True, False), ("outputs", _OBJ, True, False), ("error", _OBJ, True, True),
         ("duration_ms", _NUM, True, False))
_members(Clock, ("value", _STR, True, False), ("step", _STR, False, False))
_members(ModelCall, ("step", _STR, True, False), ("tier", _STR, True, False), ("model", _STR, True, False),
         ("task", _STR, True, False), ("request", _OBJ, True, False), ("answer", _STR, True, True),
         ("usage", _OBJ, True, False), ("duration_ms", _NUM, True, False), ("error", _OBJ, False, False),
         ("finish_reason", _STR, False, False))

_members(WaitStarted, ("step", _STR, True, False), ("event", _STR, True, False), ("where", _STR, True, True),
         ("values", _OBJ, True, False), ("deadline", _STR, True, True), ("question", _OBJ, False, False))
_members(WaitFinished, ("step", _STR, True, False), ("status", _STR, True, False), ("payload", _ANY, True, True),
         ("emit_id", _STR, False, False), ("at", _STR, False, False))

_NON_EMPTY = frozenset({"step", "event", "file", "value", "hook", "thread"})


def _step_started(r: Any) -> dict[str, Any]:
    if r.max_attempts is None:
        return {"step": r.step, "event": r.event, "attempt": r.attempt, "params": r.params}
    return {"step": r.step, "event": r.event, "attempt": r.attempt, "max_attempts": r.max_attempts, "params": r.params}


def _step_finished(r: Any) -> dict[str, Any]:
    out = {"step": r.step, "event": r.event, "status": r.status, "result": r.result, "error": r.error,
           "duration_ms": r.duration_ms, "attempt": r.attempt}
    if r.reason is not None:
        out["reason"] = r.reason
    if r.broke is not None:
        out["broke"] = r.broke
    return out


# the two records of every step, written without the general loop below (same members, same order)
_FAST_FIELDS: dict[str, Any] = {"step_started": _step_started, "step_finished": _step_finished}


def fields(record: Record) -> dict[str, Any]:
    """The JSON members of `record`, in declaration order; unset optional members left out."""
    fast = _FAST_FIELDS.get(record.TYPE)
    if fast is not None:
        return fast(record)  # type: ignore[no-any-return]
    out: dict[str, Any] = {}
    for name, _types, required, _nullable in _SCHEMA[record.TYPE]:
        value = getattr(record, name)
        if required or value is not None:
            out[name] = value
    return out


def decode(data: dict[str, Any]) -> Record:
    """The record a JSON object (the envelope and unknown members ignored) stands for."""
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _CLASSES:
        raise RecordError(f"unknown record type {kind!r}")
    cls = _CLASSES[kind]
    values: dict[str, Any] = {}
    for name, types, required, nullable in _SCHEMA[kind]:
        if name not in data:
            if required:
                raise RecordError(f"{kind} record needs {name!r}")
            continue
        value = data[name]
        if value is None:
            if not (nullable or not required):
                raise RecordError(f"{kind} record: {name!r} must not be null")
        elif types is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            raise RecordError(f"{kind} record: {name!r} must be {_kind(types)}, not {_json_kind(value)}")
        elif name in _NON_EMPTY and value == "":
            raise RecordError(f"{kind} record: {name!r} must be a non-empty string")
        values[name] = value
    record: Record = cls(**values)
    if isinstance(record, StepFinished) and record.status not in STEP_STATUSES:
        raise RecordError(f"step_finished record: unknown status {record.status!r}")
    if isinstance(record, HookFinished) and record.status not in HOOK_STATUSES:
        raise RecordError(f"hook_finished record: unknown status {record.status!r}")
    if isinstance(record, RunFinished) and record.status not in RUN_STATUSES:
        raise RecordError(f"run_finished record: unknown status {record.status!r}")
    if isinstance(record, WaitFinished) and record.status not in WAIT_STATUSES:
        raise RecordError(f"wait_finished record: unknown status {record.status!r}")
    if isinstance(record, (StepStarted, StepFinished)) and record.attempt < 1:
        raise RecordError(f"{kind} record: 'attempt' must be 1 or more")
    return record


def _kind(types: tuple[type, ...]) -> str:
    return {_STR: "a string", _INT: "an integer", _NUM: "a number", _BOOL: "a boolean", _OBJ: "an object",
            _LIST: "an array"}.get(types, "a JSON value")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "a number", float: "a number", dict: "an object", list: "an array"}.get(
        type(value), type(value).__name__)
