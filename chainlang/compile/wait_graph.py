"""Compiling a `wait:` step, and a `user.ask` step, into a graph node of kind `wait` (§15).

A wait's `where` is evaluated where the event arrives (serve, `chainlang emit`), not in the
run, so the run freezes what it reads of its own values when the wait begins: the plan
lists those references (`frozen`, by their text), and the names the checker bound to the
payload stay names. `match` is the where's equality key, `FIELD == <run value or literal>`
(alone, or one side of a top-level `and`): the store finds the waits an event can match by
it (store/waits.py) instead of evaluating every where of that event.

`user.ask {question, choices?, schema?, timeout?}` is a wait for `user.answered` whose where
is `question_id == '<the question's id>'`; its params are rendered when the step runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chainlang.expr.ast import BoolOp, Compare, Literal, Name, Ref, iter_refs
from chainlang.load.loader import ScalarNode

if TYPE_CHECKING:
    from chainlang.model.bindings import ChainBindings
    from chainlang.model.nodes import EventStep, WaitStep

__all__ = ["ASK_EVENT", "ANSWER_EVENT", "WaitPlan", "ask_plan", "wait_plan"]

ASK_EVENT = "user.ask"
ANSWER_EVENT = "user.answered"


@dataclass(frozen=True, slots=True)
class WaitPlan:
    """How a wait step waits: the event, the values its `where` reads frozen, the match key and the timeout."""
    event: str
    where: str | None  # as written
    frozen: tuple[tuple[str, Ref], ...]  # the run's values the where reads: (reference text, reference)
    # the equality key: (payload field, the reference text whose frozen value it must equal, or None
    # and a literal value)
    match: tuple[str, str | None, Any] | None
    timeout: float | None
    on_timeout: str  # fail | continue | break
    ask: dict[str, Any] | None = None  # user.ask: its params (compiled values), rendered when it runs


def wait_plan(step: "WaitStep", bindings: "ChainBindings") -> WaitPlan:
    expr = step.where.expr if step.where is not None else None
    frozen: dict[str, Ref] = {}
    payload_names: set[str] = set()
    if expr is not None:
        for ref in iter_refs(expr):
            binding = bindings.refs.get(id(ref))
            if binding is not None and binding.kind != "payload":
                frozen.setdefault(ref.dotted(), ref)
            elif isinstance(ref.segments[0], Name):
                payload_names.add(ref.segments[0].name)
    where = step.where.node.text if step.where is not None and isinstance(step.where.node, ScalarNode) else None
    return WaitPlan(step.event, where, tuple(frozen.items()),
                    _match(expr, bindings) if expr is not None else None, step.wait_timeout, step.on_timeout)


def ask_plan(step: "EventStep", params: dict[str, Any]) -> WaitPlan:
    """user.ask: a wait for user.answered keyed by the question's id (known when it runs)."""
    return WaitPlan(ANSWER_EVENT, None, (), ("question_id", None, None), None, "fail", ask=params)


def _match(expr: Any, bindings: "ChainBindings") -> tuple[str, str | None, Any] | None:
    if isinstance(expr, BoolOp) and expr.op == "and":
        return _match(expr.left, bindings) or _match(expr.right, bindings)
    if not (isinstance(expr, Compare) and expr.op == "=="):
        return None
    for field_side, other in ((expr.left, expr.right), (expr.right, expr.left)):
        field = _payload_field(field_side, bindings)
        if field is None:
            continue
        if isinstance(other, Literal) and isinstance(other.value, (str, int, float, bool)):
            return field, None, other.value
        if isinstance(other, Ref):
            binding = bindings.refs.get(id(other))
            if binding is not None and binding.kind != "payload":
                return field, other.dotted(), None
    return None


def _payload_field(side: Any, bindings: "ChainBindings") -> str | None:
    """The payload field `side` reads whole (`draft_id`), if it is one."""
    if not isinstance(side, Ref) or len(side.segments) != 1 or not isinstance(side.segments[0], Name):
        return None
    binding = bindings.refs.get(id(side))
    if binding is None or binding.kind != "payload":
        return None
    return side.segments[0].name
