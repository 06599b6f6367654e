"""The typed chain model: canonical steps, hooks and chains, each tied to its YAML node.

Every step form of the language (bare, compact, canonical, nested lists,
`parallel:`, `steps:`, `if/then/else`) is normalised to one of the three step
classes below; checks, the compiler and the interpreter see only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from chainlang.load.loader import AnyNode, MapNode, ScalarNode

if TYPE_CHECKING:
    from chainlang.model.bindings import ChainBindings
    from chainlang.expr.ast import Expr
    from chainlang.expr.template import Template

OnError = Literal["fail", "continue", "break"]


@dataclass(slots=True)
class Condition:
    """An `if:`, `foreach:` or hook `condition:` expression, parsed once.

    `node` is the expression's string, or (for `foreach`) a YAML list written out."""

    node: AnyNode
    expr: "Expr | None"  # None when it did not parse (a diagnostic was reported)

    @property
    def text(self) -> str:
        if isinstance(self.node, ScalarNode):
            return self.node.text
        import json

        from chainlang.load.loader import to_data

        return json.dumps(to_data(self.node), ensure_ascii=False)


@dataclass(slots=True)
class TemplateValue:
    """A string value holding at least one `{expr}`, parsed once."""

    node: ScalarNode
    template: "Template"
    path: tuple[str | int, ...]  # where it sits inside params/outputs/set


@dataclass(slots=True)
class Value:
    """A params/outputs/set value: the plain data plus the templates inside it."""

    node: AnyNode | None
    data: Any
    templates: list[TemplateValue] = field(default_factory=list)
    broken: bool = False  # a problem inside was already reported: later checks leave it alone
    # a chain passed as data (task.register / task.schedule `action`): its templates belong to
    # that chain, which runs later; they are checked there and not rendered when the step runs
    deferred: bool = False

    @property
    def literal(self) -> bool:
        return not self.templates


@dataclass(slots=True)
class Retry:
    """A step's `retry:`: attempts, delays, backoff and the error types it retries."""
    node: MapNode
    attempts: int = 1
    delay: float = 0.0
    backoff: float = 1.0
    max_delay: float | None = None
    on: tuple[str, ...] | None = None  # the error types retried; None: every failure a tool or timeout can retry
    jitter: bool = False  # spread the waits (deterministically: runtime/retry_policy.py)


@dataclass(slots=True)
class StepBase:
    """What every step has: its path, node, id, condition, loop, timeout and error handling."""
    path: str  # stable step path: "3", "3.1", "2.then.1", "hook:audit.1"
    node: AnyNode
    id: str | None = None
    id_node: ScalarNode | None = None
    if_: Condition | None = None
    foreach: Condition | None = None
    as_: str = "item"
    as_node: ScalarNode | None = None
    max_parallel: int | None = None  # of a parallel group, or of the items of a foreach
    timeout: float | None = None
    on_error: OnError = "fail"
    description: str | None = None


@dataclass(slots=True)
class EventStep(StepBase):
    """A step that calls an event (a tool, a chain, a standard event) with params."""
    event: str = ""
    event_node: ScalarNode | None = None
    params: dict[str, Value] = field(default_factory=dict)
    params_node: MapNode | None = None
    params_broken: bool = False  # the params were rejected as a whole (already reported)
    # keys of params in file order with their key nodes, for param-level positions
    param_keys: dict[str, ScalarNode] = field(default_factory=dict)
    decide: str | None = None
    decide_node: ScalarNode | None = None
    retry: Retry | None = None
    # `expose: [NAME]` (§16): the secrets this step may send to a model or user.notify, with their nodes
    expose: list[tuple[str, ScalarNode]] = field(default_factory=list)
    expose_node: AnyNode | None = None


@dataclass(slots=True)
class BlockStep(StepBase):
    """`steps:` (sequential) or `parallel:` / a nested list (concurrent branches)."""

    parallel: bool = False
    steps: list["Step"] = field(default_factory=list)


@dataclass(slots=True)
class IfStep(StepBase):
    """An `if:` block: a condition, the steps of `then` and of `else`."""
    condition: Condition | None = None
    then: list["Step"] = field(default_factory=list)
    else_: list["Step"] = field(default_factory=list)


# try/catch/finally, switch and fail (LANGUAGE.md §2); their child paths: 3.try.1, 3.catch.1,
# 3.finally.1, 3.case1.1 (cases numbered in file order: a key may hold any character), 3.default.1
@dataclass(slots=True)
class TryStep(StepBase):
    """`try:` steps, `catch:` steps run when one of them failed, `finally:` steps run last,
    however the block ended."""

    try_: list["Step"] = field(default_factory=list)
    catch: list["Step"] | None = None  # None: no catch (a failure of try stays a failure)
    finally_: list["Step"] | None = None

    def branches(self) -> list[tuple[str, list["Step"]]]:
        """The step lists in the order they may run."""
        out: list[tuple[str, list[Step]]] = [("try", self.try_)]
        if self.catch is not None:
            out.append(("catch", self.catch))
        if self.finally_ is not None:
            out.append(("finally", self.finally_))
        return out


@dataclass(slots=True)
class SwitchCase:
    """One case of a `switch`: its key and its steps."""
    key: str  # the case key as text (`1`, `true` compare as their JSON text)
    node: ScalarNode  # the key as written
    steps: list["Step"] = field(default_factory=list)


@dataclass(slots=True)
class SwitchStep(StepBase):
    """`switch: "{value}"`: the steps of the case whose key equals the value, else `default`."""

    value: Value | None = None
    cases: list[SwitchCase] = field(default_factory=list)
    default: list["Step"] | None = None

    def branches(self) -> list[tuple[str, list["Step"]]]:
        """One list per case (`case1`, ...), then `default`: at most one of them runs."""
        out: list[tuple[str, list[Step]]] = [(f"case{i + 1}", case.steps) for i, case in enumerate(self.cases)]
        if self.default is not None:
            out.append(("default", self.default))
        return out


@dataclass(slots=True)
class FailStep(StepBase):
    """`fail: MESSAGE`: ends the chain as failed (error type `fail`, the message templated)."""

    message: Value | None = None
    message_node: AnyNode | None = None


@dataclass(slots=True)
class WaitStep(StepBase):
    """`wait: {event, where, timeout, on_timeout}` (§15): the run stops until an event of
    that name whose `where` holds arrives; its result is the event's payload."""

    event: str = ""
    event_node: ScalarNode | None = None
    where: Condition | None = None
    wait_timeout: float | None = None  # the wait's own timeout (None: none; CL069 warns)
    timeout_node: AnyNode | None = None
    on_timeout: str = "fail"  # fail | continue (result null) | break
    wait_node: AnyNode | None = None  # the `wait:` mapping


Step = Union[EventStep, BlockStep, IfStep, TryStep, SwitchStep, FailStep, WaitStep]


@dataclass(slots=True)
class Trigger:
    """What a hook fires on: a phase (pre, post, error) and an event name or glob."""
    phase: Literal["pre", "post", "error"]
    pattern: str  # an event name or a glob (email.*)
    node: ScalarNode


@dataclass(slots=True)
class Hook:
    """A hook of a chain or hooks file, or the action a task.register or task.schedule step stores."""
    node: MapNode
    index: int  # position among the file's hooks (ties keep file order)
    # "hook": written under hooks:; "registered": the action of a task.register step (a hook
    # at run time); "scheduled": the action of a task.schedule step (a chain run later, no payload)
    kind: str = "hook"
    origin: str | None = None  # the step path that registers or schedules it
    id: str | None = None
    id_node: ScalarNode | None = None
    trigger: Trigger | None = None
    condition: Condition | None = None
    priority: int = 0
    after: list[tuple[str, ScalarNode]] = field(default_factory=list)
    action: list[Step] = field(default_factory=list)
    action_node: AnyNode | None = None
    cancel: bool = False
    set: dict[str, Value] = field(default_factory=dict)
    set_node: MapNode | None = None
    mode: str = "parallel"
    max: int | None = None
    max_depth: int | None = None
    on_error: str = "continue"  # "fail": a failing action fails the step (pre) or the run (post)
    description: str | None = None
    file: str = ""  # the file that defines it
    # what the references of its condition, set and action name: set by the checker's analysis
    bindings: "ChainBindings | None" = None
    # a stored hook: the values of the registering chain its action captured, by reference text
    captured: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """The hook's name in step paths and records: its id, else FILE-N (N counts from 1)."""
        if self.id:
            return self.id
        import os
        import re

        stem = os.path.basename(self.file).split(".")[0] or "hook"
        return f"{re.sub(r'[^a-z0-9_-]+', '-', stem.lower()).strip('-') or 'hook'}-{self.index + 1}"

    @property
    def label(self) -> str:
        if self.origin is not None:
            return self.id or f"{self.kind} by step {self.origin}"
        return self.id or f"#{self.index + 1}"


@dataclass(slots=True)
class Input:
    """One declared input of a chain: its name and JSON Schema."""
    name: str
    node: ScalarNode
    schema: dict[str, Any]
    schema_node: AnyNode | None


@dataclass(slots=True)
class EventDecl:
    """An external event declared with `events:` (no tool behind it)."""

    name: str
    node: ScalarNode
    description: str
    payload: dict[str, Any]
    payload_node: AnyNode | None = None


@dataclass(slots=True)
class Limits:
    """A chain's `limits:`: steps, depth, timeout, parallelism and model budgets."""
    max_steps: int = 1000
    max_depth: int = 8
    max_depth_set: bool = False  # written in the file: an intended bound on recursion
    timeout: float | None = None
    max_parallel: int = 16
    # budgets of the run and everything it starts (LANGUAGE.md §13); None: unbounded
    max_model_calls: int | None = None
    max_tokens: int | None = None  # prompt + answer tokens
    node: MapNode | None = None  # the `limits:` mapping as written, for diagnostics about a limit


@dataclass(slots=True)
class Chain:
    """A chain or hooks file as the checker and compiler see it: steps, hooks, inputs, outputs, limits."""
    file: str
    kind: Literal["chain", "hooks"]
    root: AnyNode | None
    name: str | None = None
    name_node: ScalarNode | None = None
    description: str | None = None
    inputs: dict[str, Input] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    hooks: list[Hook] = field(default_factory=list)
    outputs: dict[str, Value] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    allow: list[tuple[str, ScalarNode]] | None = None
    events: dict[str, EventDecl] = field(default_factory=dict)
    triggers: list[Any] = field(default_factory=list)  # model.build_triggers.ChainTrigger (serve starts the chain)
    # what each reference names: set by the checker's scope analysis, compiled into the graph
    bindings: "ChainBindings | None" = None


def walk_steps(steps: list[Step]) -> "list[Step]":
    """Every step in document order, blocks before their children."""
    out: list[Step] = []
    stack: list[Step] = list(reversed(steps))
    while stack:
        step = stack.pop()
        out.append(step)
        if isinstance(step, BlockStep):
            stack.extend(reversed(step.steps))
        elif isinstance(step, IfStep):
            stack.extend(reversed(step.else_))
            stack.extend(reversed(step.then))
        elif isinstance(step, (TryStep, SwitchStep)):
            for _, branch in reversed(step.branches()):
                stack.extend(reversed(branch))
    return out
