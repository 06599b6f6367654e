"""What a reference sees at run time: the recorded steps of a run, and each reference bound once.

A `Scope` holds the records of the steps that ran in one sequence of a chain. Blocks that
run in order share their scope; every parallel branch and every `foreach` iteration gets a
child scope (it sees everything before it, but not its siblings), which is merged back
into the parent in document order when the group ends. So "the most recent completed
`tools.now`" is a dictionary lookup up a chain of scopes as deep as the blocks around the
step, whatever the length of the run.

A `Binder` turns each `Ref` of a compiled chain into an accessor, once, with the rules of
the checker (LANGUAGE.md §3): the longest dotted prefix naming an event of the chain (or a
registered one) is a step, then step ids, `inputs`, `run`, `thread`, loop variables.
Scopes are the evaluator's resolver: `scope(ref)` looks the accessor up by the identity of
the `Ref` (AST nodes are shared between expressions with the same text, but a binding
depends only on the chain, not on where in it the text appears).
"""

from __future__ import annotations

from typing import Any, Callable

from chainlang.expr.ast import Index, Name, Ref
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import walk_path

STEP_FIELDS = frozenset({"result", "status", "error", "params", "duration_ms"})

Accessor = Callable[["Scope"], Any]


class Rec:
    """What one executed step recorded (§3): result, status, error, params, duration_ms."""

    __slots__ = ("status", "result", "error", "params", "duration_ms")

    def __init__(self, status: str, result: Any = None, error: dict[str, Any] | None = None,
                 params: Any = None, duration_ms: float = 0.0) -> None:
        self.status = status
        self.result = result
        self.error = error
        self.params = params
        self.duration_ms = duration_ms

    @property
    def ran(self) -> bool:
        """It ran (ok or failed): a reference by event name may pick it. Skipped and
        cancelled steps are passed over for an earlier one that ran."""
        return self.status == "ok" or self.status == "failed"

    def field(self, name: str) -> Any:
        if name == "result":
            return self.result
        if name == "status":
            return self.status
        if name == "error":
            return self.error
        if name == "params":
            return self.params
        return self.duration_ms


class Scope:
    """The records visible at one point of a run (see the module docstring)."""

    __slots__ = ("parent", "binder", "inputs", "facts", "latest", "paths", "ids", "loop_name", "loop_value")

    def __init__(self, binder: "Binder", inputs: dict[str, Any], facts: dict[str, Any],
                 parent: "Scope | None" = None, loop_name: str | None = None, loop_value: Any = None) -> None:
        self.parent = parent
        self.binder = binder
        self.inputs = inputs
        self.facts = facts
        self.latest: dict[str, Rec] = {}  # event name → most recent record that ran
        self.paths: dict[str, Rec] = {}  # static step path → record
        self.ids: dict[str, Rec] = {}  # step id → record
        self.loop_name = loop_name
        self.loop_value = loop_value

    def child(self, loop_name: str | None = None, loop_value: Any = None) -> "Scope":
        return Scope(self.binder, self.inputs, self.facts, self, loop_name, loop_value)

    def __call__(self, ref: Ref) -> Any:
        accessor = self.binder.plan.get(id(ref))
        if accessor is None:
            accessor = self.binder.bind(ref)
        return accessor(self)

    # -- recording

    def record(self, path: str, event: str | None, step_id: str | None, rec: Rec) -> None:
        self.paths[path] = rec
        if step_id is not None:
            self.ids[step_id] = rec
        if event is not None and rec.ran:
            self.latest[event] = rec

    def merge(self, child: "Scope") -> None:
        """A finished branch or iteration: its records become visible after the group."""
        self.paths.update(child.paths)
        self.ids.update(child.ids)
        self.latest.update(child.latest)

    # -- lookups (up the chain of scopes)

    def find_latest(self, event: str) -> Rec | None:
        scope: Scope | None = self
        while scope is not None:
            rec = scope.latest.get(event)
            if rec is not None:
                return rec
            scope = scope.parent
        return None

    def find_path(self, path: str) -> Rec | None:
        scope: Scope | None = self
        while scope is not None:
            rec = scope.paths.get(path)
            if rec is not None:
                return rec
            scope = scope.parent
        return None

    def find_id(self, step_id: str) -> Rec | None:
        scope: Scope | None = self
        while scope is not None:
            rec = scope.ids.get(step_id)
            if rec is not None:
                return rec
            scope = scope.parent
        return None

    def find_loop(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if scope.loop_name == name:
                return scope.loop_value
            scope = scope.parent
        return None

    def visible(self) -> dict[str, Any]:
        """Every visible result by step id and event name, nearest first: the context a
        decide model is shown for a natural-language condition."""
        out: dict[str, Any] = {}
        scope: Scope | None = self
        while scope is not None:
            for key, rec in list(scope.ids.items()) + list(scope.latest.items()):
                out.setdefault(key, rec.result)
            scope = scope.parent
        return out


class Binder:
    """Binds the references of one chain (see the module docstring).

    `events` maps each event used in the chain to the static paths of its steps in
    document order (for `name[i]`); `ids` are the chain's step ids; `registered` tells
    whether a dotted name is an event of the registry."""

    def __init__(self, events: dict[str, list[str]], ids: set[str], registered: Callable[[str], bool]) -> None:
        self.events = events
        self.ids = ids
        self.registered = registered
        self.plan: dict[int, Accessor] = {}
        self._refs: list[Ref] = []  # keeps every bound Ref alive, so its id() is never reused

    def bind(self, ref: Ref) -> Accessor:
        accessor = self._accessor(ref)
        self.plan[id(ref)] = accessor
        self._refs.append(ref)
        return accessor

    def _accessor(self, ref: Ref) -> Accessor:
        segs = ref.segments
        names: list[str] = []
        for seg in segs:
            if type(seg) is not Name:
                break
            names.append(seg.name)
        for k in range(len(names), 1, -1):
            candidate = ".".join(names[:k])
            if candidate in self.events or self.registered(candidate):
                return self._event(candidate, segs[k:])
        root = names[0] if names else ""
        rest = segs[1:]
        if root in self.ids:
            return _step_field(lambda scope: scope.find_id(root), rest)
        if root == "inputs":
            return lambda scope: walk_path(scope.inputs, rest) if rest else scope.inputs
        if root == "run":
            return lambda scope: walk_path(scope.facts, rest) if rest else scope.facts
        if root == "thread":
            start, end = ref.start, ref.end

            def thread(scope: Scope) -> Any:
                raise ExprEvalError("reference", "thread.* references need the thread store, which this version "
                                    "does not implement yet", start, end)
            return thread
        return lambda scope: walk_path(scope.find_loop(root), rest) if rest else scope.find_loop(root)

    def _event(self, name: str, rest: tuple[Any, ...]) -> Accessor:
        if rest and type(rest[0]) is Index:
            paths = self.events.get(name, [])
            index = rest[0].value
            if not -len(paths) <= index < len(paths):
                return lambda scope: None
            path = paths[index]
            return _step_field(lambda scope: scope.find_path(path), rest[1:])
        return _step_field(lambda scope: scope.find_latest(name), rest)


def _step_field(find: Callable[[Scope], Rec | None], rest: tuple[Any, ...]) -> Accessor:
    """`x.result.a`, `x.status`, or the shorthand `x.a` (= `x.result.a`)."""
    if rest and type(rest[0]) is Name and rest[0].name in STEP_FIELDS:
        field, path = rest[0].name, rest[1:]
    else:
        field, path = "result", rest
    if field == "result":
        if not path:
            def whole(scope: Scope) -> Any:
                rec = find(scope)
                return None if rec is None else rec.result
            return whole

        def result(scope: Scope) -> Any:
            rec = find(scope)
            return None if rec is None else walk_path(rec.result, path)
        return result

    def other(scope: Scope) -> Any:
        rec = find(scope)
        if rec is None:
            return None
        value = rec.field(field)
        return walk_path(value, path) if path else value
    return other
