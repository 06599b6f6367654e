"""What a reference sees at run time: the recorded steps of a run, and each reference bound once.

A `Scope` holds the records of the steps that ran in one sequence of a chain. Blocks that
run in order share their scope; every parallel branch and every `foreach` iteration gets a
child scope (it sees everything before it, but not its siblings), which is merged back
into the parent in document order when the group ends. So "the most recent completed
`tools.now`" is a dictionary lookup up a chain of scopes as deep as the blocks around the
step, whatever the length of the run.

A `Binder` turns each `Ref` of a compiled chain into an accessor, once, from what the
checker's scope analysis found it names (chainlang.model.bindings; LANGUAGE.md §3): the
runtime does not resolve names again. Scopes are the evaluator's resolver: `scope(ref)` looks the accessor up by the identity of
the `Ref` (AST nodes are shared between expressions with the same text, but a binding
depends only on the chain, not on where in it the text appears).
"""

from __future__ import annotations

from typing import Any, Callable

from chainlang.expr.ast import Ref
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import walk_path
from chainlang.model.bindings import Binding, ChainBindings


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


class HookContext:
    """What the references of a hook see besides its action's steps: the trigger's payload
    (bare names) and `event` (name, params, result, payload)."""

    __slots__ = ("payload", "event", "captured")

    def __init__(self, payload: Any, event: dict[str, Any], captured: dict[str, Any] | None = None) -> None:
        self.payload = payload
        self.event = event
        self.captured = captured or {}  # a stored hook's values of the chain that registered it


class Scope:
    """The records visible at one point of a run (see the module docstring)."""

    __slots__ = ("parent", "binder", "inputs", "facts", "latest", "paths", "ids", "loop_name", "loop_value", "hook")

    def __init__(self, binder: "Binder", inputs: dict[str, Any], facts: dict[str, Any],
                 parent: "Scope | None" = None, loop_name: str | None = None, loop_value: Any = None,
                 hook: "HookContext | None" = None) -> None:
        self.hook: HookContext | None = hook if hook is not None or parent is None else parent.hook
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
    """Turns the bindings of one compiled chain (made by the checker's analysis, carried by
    the graph) into accessors, each once. It resolves nothing itself."""

    def __init__(self, bindings: ChainBindings) -> None:
        self.bindings = bindings.refs
        self.plan: dict[int, Accessor] = {}

    def bind(self, ref: Ref) -> Accessor:
        binding = self.bindings.get(id(ref))
        if binding is None:  # a graph compiled from a chain the checker did not bind: a bug
            raise ExprEvalError("reference", "this reference was not bound by the checks (internal error)",
                                ref.start, ref.end)
        accessor = _accessor(binding, ref)
        self.plan[id(ref)] = accessor
        return accessor


def accessor(binding: Binding, ref: Ref) -> Accessor:
    """How to read a bound reference in a scope (a captured one, as the registering chain)."""
    return _accessor(binding, ref)


def _accessor(binding: Binding, ref: Ref) -> Accessor:
    kind, name, rest = binding.kind, binding.name, binding.path
    if kind == "latest":
        return _step_field(lambda scope: scope.find_latest(name), binding.field, rest)
    if kind == "path":
        return _step_field(lambda scope: scope.find_path(name), binding.field, rest)
    if kind == "id":
        return _step_field(lambda scope: scope.find_id(name), binding.field, rest)
    if kind == "input":
        return lambda scope: walk_path(scope.inputs, rest, scope) if rest else scope.inputs
    if kind == "run":
        return lambda scope: walk_path(scope.facts, rest, scope) if rest else scope.facts
    if kind == "loop":
        return lambda scope: walk_path(scope.find_loop(name), rest, scope) if rest else scope.find_loop(name)
    if kind == "captured":
        return lambda scope: None if scope.hook is None else scope.hook.captured.get(name)
    if kind == "payload":
        return lambda scope: walk_path(scope.hook.payload, rest, scope) if scope.hook is not None else None
    if kind == "event":
        return lambda scope: (None if scope.hook is None else walk_path(scope.hook.event, rest, scope) if rest
                              else scope.hook.event)
    if kind == "live":  # run.status, run.duration_ms, run.failures: chainlang.runtime.live_run
        from chainlang.runtime.live_run import live_accessor

        return live_accessor(name, rest)
    if kind == "secret":  # a declared secret (LANGUAGE.md §16): chainlang.runtime.secret_refs
        from chainlang.runtime.secret_refs import reference as secret

        return secret(name, ref.start, ref.end)
    if kind == "thread":  # a stored thread's data (LANGUAGE.md §13): chainlang.runtime.threads
        from chainlang.runtime.threads import reference

        return reference(rest, ref.start, ref.end)
    start, end = ref.start, ref.end

    def unknown(scope: Scope) -> Any:  # a kind this runtime does not know: a bug
        raise ExprEvalError("reference", f"{kind} references are not known to this runtime (internal error)",
                            start, end)
    return unknown

def _step_field(find: Callable[[Scope], Rec | None], field: str, path: tuple[Any, ...]) -> Accessor:
    """`x.result.a`, `x.status.…` (the checker turned the shorthand `x.a` into `x.result.a`)."""
    if field == "result":
        if not path:
            def whole(scope: Scope) -> Any:
                rec = find(scope)
                return None if rec is None else rec.result
            return whole

        def result(scope: Scope) -> Any:
            rec = find(scope)
            return None if rec is None else walk_path(rec.result, path, scope)
        return result

    def other(scope: Scope) -> Any:
        rec = find(scope)
        if rec is None:
            return None
        value = rec.field(field)
        return walk_path(value, path, scope) if path else value
    return other
