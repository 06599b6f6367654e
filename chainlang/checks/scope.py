"""Scope analysis: every expression site of a chain, and what each reference names.

Computed once per file and shared by the reference, type and param checks.
Visibility is structural: every step has a *trail* (the lists that contain it
and its index in each), so "does T finish before S starts?" is answered by
comparing two short trails rather than by copying scope sets per step.
"""

from __future__ import annotations

from bisect import bisect_left
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from chainlang.diagnostics import rules
from chainlang.diagnostics import Rule
from chainlang.expr import types as T
from chainlang.expr.ast import Computed, Index, Key, Name, Ref, computed_positions, iter_refs, ref_prefix
from chainlang.load.loader import AnyNode
from chainlang.model.bindings import Binding, ChainBindings
from chainlang.model.nodes import (
    BlockStep,
    Condition,
    EventStep,
    Hook,
    IfStep,
    Step,
    StepBase,
    TemplateValue,
    Value,
    walk_steps,
)
from chainlang.model.nodes import FailStep, SwitchStep, TryStep, WaitStep
from chainlang.checks.flow_scope import LIVE_FIELDS, error_ref, index_flow, live_run_ref, walk_flow
from chainlang.checks.loops import loop_ref, walk_repeat
from chainlang.checks.model_ask import result_type as model_ask_result_type
from chainlang.checks.thread_refs import not_as_indexes, thread_ref
from chainlang.model.build_loops import LOOP, RepeatStep
from chainlang.diagnostics.suggest import affordable, did_you_mean

if TYPE_CHECKING:
    from chainlang.checks.base import CheckContext
    from chainlang.config.secrets import DeclaredSecrets
    from chainlang.expr.ast import Expr

STEP_FIELDS = ("result", "status", "error", "params", "duration_ms")
RUN_FIELDS = ("id", "chain", "started_at", "thread", "status", "duration_ms", "failures")

Relation = Literal["before", "later", "sibling", "other-branch", "enclosing", "inside", "self"]


@dataclass(slots=True)
class ExprSite:
    """One expression in the file: a condition, or one `{expr}` of a template."""

    node: AnyNode  # the scalar holding the expression (a written-out foreach list: the list)
    expr: "Expr"
    base: int  # offset of the expression text inside node.text
    context: str  # if, foreach, condition, param, output, set
    template: TemplateValue | None = None  # the template it belongs to
    single: bool = False  # the template is exactly this one {expr}
    type: Any = None  # the inferred type of the expression
    issues: list[Any] = field(default_factory=list)  # TypeIssues found by the static type checker


@dataclass(slots=True)
class RefInfo:
    """One reference in an expression, resolved: what kind of name it is, its type, and the problem found with it."""
    site: ExprSite
    ref: Ref
    kind: str  # step, input, loop, run, thread, secret, payload, event, unknown
    type: Any  # a chainlang.expr.types Type
    problem: tuple[Rule, str, str | None, int, int] | None = None  # rule, message, hint, start, end (in expr)
    binding: Binding | None = None  # what it names, for the runtime (None: it names nothing)


@dataclass
class Analysis:
    """The references of a chain and their types, found once and shared by the checks."""
    sites: list[ExprSite] = field(default_factory=list)
    refs: list[RefInfo] = field(default_factory=list)
    ref_types: dict[int, Any] = field(default_factory=dict)  # id(Ref) → Type

    def type_of(self, ref: Ref) -> Any:
        return self.ref_types.get(id(ref), T.ANY)


@dataclass(slots=True)
class Scope:
    """The names visible at one place of a chain: loop variables, a hook's payload, the enclosing chain."""
    loops: dict[str, Any]  # loop variable → item type
    payload: Any | None  # hook payload type (bare names are payload fields), None outside hooks
    trail: tuple[tuple[int, str, int], ...]  # where the current step sits
    current: StepBase | None
    # for the action of a task.register / task.schedule step: the calling chain at that step,
    # whose earlier results the action captures (names it does not define resolve there)
    enclosing: "tuple[Document, Scope] | None" = None
    captured: dict[str, Any] | None = None  # a stored hook's captured values, by reference text


class Document:
    """One sequence of steps (a chain's steps, or a hook's action) and its index."""

    def __init__(self, steps: list[Step]) -> None:
        self.trails: dict[int, tuple[tuple[int, str, int], ...]] = {}
        self.order: dict[int, int] = {}  # id(step) → position in document order
        self.occurrences: dict[str, list[EventStep]] = {}
        self.ids: dict[str, StepBase] = {}
        self._index(steps, 0, "steps", ())
        self._ordinals = {name: [self.order[id(s)] for s in steps] for name, steps in self.occurrences.items()}

    def _index(self, steps: list[Step], container: int, kind: str, trail: tuple[tuple[int, str, int], ...]) -> None:
        for i, step in enumerate(steps):
            here = trail + ((container, kind, i),)
            self.trails[id(step)] = here
            self.order[id(step)] = len(self.order)
            if step.id and step.id not in self.ids:
                self.ids[step.id] = step
            if isinstance(step, EventStep):
                if step.event:
                    self.occurrences.setdefault(step.event, []).append(step)
            elif isinstance(step, BlockStep):
                self._index(step.steps, id(step), "parallel" if step.parallel else "steps", here)
            elif isinstance(step, IfStep):
                self._index(step.then, id(step), "then", here)
                self._index(step.else_, id(step), "else", here)
            elif isinstance(step, (TryStep, SwitchStep)):  # checks/flow_scope.py
                index_flow(self, step, here)

    def latest_before(self, name: str, current: StepBase | None, trail: tuple[tuple[int, str, int], ...]) -> EventStep | None:
        """The last occurrence of `name` in document order that finishes before `current` starts.

        Occurrences after `current` in document order can only be later or inside it, so the
        search starts at the nearest preceding occurrence (bisect) and walks back. An occurrence
        in a parallel sibling (or the other branch of an if) means every occurrence of that
        whole block is one too: they are contiguous in document order, so the walk jumps
        past the block. Each reference costs O(depth × log n), whatever the file."""
        steps = self.occurrences.get(name)
        if not steps:
            return None
        ordinals = self._ordinals[name]
        i = (len(steps) if current is None else bisect_left(ordinals, self.order[id(current)])) - 1
        while i >= 0:
            relation, container = self._divergence(steps[i], trail)
            if relation == "before":
                return steps[i]
            if relation not in ("sibling", "other-branch") or container not in self.order:
                i -= 1
                continue
            i = bisect_left(ordinals, self.order[container]) - 1  # skip the whole block
        return None

    def nearest(self, name: str, current: StepBase | None, trail: tuple[tuple[int, str, int], ...]) -> Relation | None:
        """When no occurrence is before `current`: how the nearest ones stand to it.

        A preceding one can only be a sibling or in the other branch; a following one is
        the step itself, later, or inside it."""
        steps = self.occurrences.get(name)
        if not steps:
            return None
        ordinals = self._ordinals[name]
        i = len(steps) if current is None else bisect_left(ordinals, self.order[id(current)])
        if i > 0:
            return self.relation(steps[i - 1], trail)
        return self.relation(steps[i], trail) if i < len(steps) else None

    def relation(self, target: StepBase, trail: tuple[tuple[int, str, int], ...]) -> Relation:
        """How `target` stands to the position `trail` (the step being checked)."""
        return self._divergence(target, trail)[0]

    def _divergence(self, target: StepBase, trail: tuple[tuple[int, str, int], ...]) -> tuple[Relation, int]:
        """The relation, and the id of the block where the two positions part."""
        other = self.trails[id(target)]
        n = min(len(other), len(trail))
        for i in range(n):
            a, b = other[i], trail[i]
            if a == b:
                continue
            if a[1] != b[1]:  # then vs else of the same if
                return "other-branch", a[0]
            if a[1] == "parallel":
                return "sibling", a[0]
            return ("before" if a[2] < b[2] else "later"), a[0]
        if len(other) == len(trail):
            return "self", 0
        return ("enclosing" if len(other) < len(trail) else "inside"), 0


class Analyser:
    def __init__(self, ctx: "CheckContext") -> None:
        self.ctx = ctx
        self.analysis = Analysis()
        self._result_types: dict[str, Any] = {}
        self.bindings = ChainBindings()
        self._collect: ChainBindings | None = self.bindings  # a hook's own while walking that hook
        self._secrets: "DeclaredSecrets | None" = None  # the project's declared secrets, when first needed

    # -- walking --

    def run(self) -> Analysis:
        chain = self.ctx.chain
        doc = Document(chain.steps)
        self.main_doc = doc
        root = Scope(loops={}, payload=None, trail=(), current=None)
        self.walk_steps(chain.steps, doc, root)
        end = Scope(loops={}, payload=None, trail=((0, "steps", len(chain.steps)),), current=None)
        for value in chain.outputs.values():
            self.value_sites(value, "output", doc, end)
        for hook in chain.hooks:  # each hook's references are bound apart: it is compiled on its own
            self._collect = ChainBindings()
            self.walk_hook(hook)
            hook.bindings = self._collect
        self._collect = self.bindings
        chain.bindings = self.bindings
        return self.analysis

    def walk_hook(self, hook: Hook) -> None:
        payload = None if hook.kind == "scheduled" else self.payload_type(hook)
        doc = Document(hook.action)
        enclosing = self.enclosing_scope(hook)
        scope = Scope(loops={}, payload=payload, trail=((0, "steps", -1),), current=None, enclosing=enclosing,
                      captured=hook.captured)
        if hook.condition:
            self.condition_site(hook.condition, "condition", doc, scope)
        for value in hook.set.values():
            self.value_sites(value, "set", doc, scope)
        self.walk_steps(hook.action, doc, Scope(loops={}, payload=payload, trail=(), current=None, enclosing=enclosing,
                                                captured=hook.captured))

    def enclosing_scope(self, hook: Hook) -> "tuple[Document, Scope] | None":
        """The calling chain just before the step that registers or schedules `hook`."""
        if hook.origin is None:
            return None
        doc = self.main_doc
        step = next((s for s in walk_steps(self.ctx.chain.steps) if s.path == hook.origin), None)
        if step is None:
            return None
        return doc, Scope(loops={}, payload=None, trail=doc.trails[id(step)], current=step)

    def walk_steps(self, steps: list[Step], doc: Document, outer: Scope) -> None:
        for step in steps:
            trail = doc.trails[id(step)]
            scope = Scope(loops=outer.loops, payload=outer.payload, trail=trail, current=step, enclosing=outer.enclosing,
                          captured=outer.captured)
            if step.if_:
                self.condition_site(step.if_, "if", doc, scope)
            inner = scope
            if step.foreach:
                item_type = self.condition_site(step.foreach, "foreach", doc, scope)
                element = item_type.item if isinstance(item_type, T.Array) else T.ANY
                inner = Scope(loops={**scope.loops, step.as_: element}, payload=scope.payload, trail=trail, current=step,
                              enclosing=scope.enclosing, captured=scope.captured)
            if isinstance(step, EventStep):
                for value in step.params.values():
                    if not value.deferred:  # a chain passed as data is checked as its own hook/chain
                        self.value_sites(value, "param", doc, inner)
                if step.decide is not None and self._collect is not None:
                    self.decide_site(step, doc, inner)
            elif isinstance(step, RepeatStep):  # checks/loops.py
                walk_repeat(self, step, doc, inner)
            elif isinstance(step, BlockStep):
                self.walk_steps(step.steps, doc, inner)
            elif isinstance(step, IfStep):
                if step.condition:
                    self.condition_site(step.condition, "if", doc, inner)
                self.walk_steps(step.then, doc, inner)
                self.walk_steps(step.else_, doc, inner)
            elif isinstance(step, (TryStep, SwitchStep, FailStep)):  # checks/flow_scope.py
                walk_flow(self, step, doc, inner)
            elif isinstance(step, WaitStep) and step.where is not None:
                # bare names are the event's payload fields; the run's values read as anywhere (§15)
                waiting = Scope(loops=inner.loops, payload=self.wait_payload_type(step), trail=inner.trail,
                                current=step, enclosing=inner.enclosing, captured=inner.captured)
                self.condition_site(step.where, "where", doc, waiting)

    def condition_site(self, cond: Condition, context: str, doc: Document, scope: Scope) -> Any:
        if cond.expr is None:
            return T.ANY
        site = ExprSite(cond.node, cond.expr, 0, context)
        return self.site(site, doc, scope)

    def value_sites(self, value: Value, context: str, doc: Document, scope: Scope) -> None:
        from chainlang.expr.template import Embedded

        for tv in value.templates:
            single = tv.template.single is not None
            for part in tv.template.parts:
                if isinstance(part, Embedded):
                    self.site(ExprSite(tv.node, part.expr, part.offset, context, tv, single), doc, scope)

    def decide_site(self, step: EventStep, doc: Document, scope: Scope) -> None:
        """A `decide` text that parses as an expression whose every reference names
        something here is judged without a model: its references are bound like any
        other. Anything else is natural language for the model (no diagnostics)."""
        from chainlang.expr import parse_expression
        from chainlang.expr.errors import ExprSyntaxError

        assert step.decide is not None
        try:
            expr = parse_expression(step.decide)
        except ExprSyntaxError:
            return
        site = ExprSite(step.node, expr, 0, "decide")
        infos = [self.resolve(ref, site, doc, scope) for ref in iter_refs(expr)]
        if not infos or any(info.binding is None for info in infos):
            return
        bindings = self.bindings
        for info in infos:
            bindings.refs.setdefault(id(info.ref), info.binding)  # type: ignore[arg-type]
            bindings.keep.append(info.ref)
        bindings.decide[id(step)] = expr
        bindings.keep.append(step)

    def site(self, site: ExprSite, doc: Document, scope: Scope) -> Any:
        self.analysis.sites.append(site)
        collect = self._collect
        secrets: list[RefInfo] = []
        threads: list[Ref] = []  # thread[EXPR].KEY: EXPR is typed as an id (checks/thread_refs.py)
        for ref in iter_refs(site.expr):
            info = self.resolve(ref, site, doc, scope)
            self.analysis.refs.append(info)
            self.analysis.ref_types[id(ref)] = info.type
            for k in computed_positions(ref.segments):  # what each x[expr] indexes: its type (checks/expr)
                prefix = ref_prefix(ref, k)
                self.analysis.ref_types[id(prefix)] = self.resolve(prefix, site, doc, scope).type
            if collect is not None and info.binding is not None:
                collect.refs.setdefault(id(ref), info.binding)
                collect.keep.append(ref)
            if info.kind == "secret" and info.problem is None:
                secrets.append(info)
            elif info.kind == "thread":
                threads.append(ref)
        if secrets:
            _secret_kept_whole(site.expr, secrets)
        site.type, site.issues = T.check_expression(site.expr, self.analysis.type_of)
        if threads and site.issues:
            site.issues = not_as_indexes(site.issues, threads)
        return site.type

    # -- resolution --

    def resolve(self, ref: Ref, site: ExprSite, doc: Document, scope: Scope) -> RefInfo:
        if scope.enclosing is not None and _root_name(ref) == "inputs":
            # an action has no inputs of its own: these are the registering chain's (captured)
            outer_doc, outer_scope = scope.enclosing
            outer = self.resolve_here(ref, site, outer_doc, outer_scope)
            if outer.problem is None and outer.binding is not None:
                outer.binding = dataclasses.replace(outer.binding, captured=True)
                return outer
        info = self.resolve_here(ref, site, doc, scope)
        # a name, or an input, unknown to the action may be the registering chain's (captured)
        missing = info.problem is not None and info.problem[0] in (rules.REF_UNKNOWN, rules.REF_INPUT)
        if missing and scope.enclosing is not None:
            outer_doc, outer_scope = scope.enclosing
            captured = self.resolve_here(ref, site, outer_doc, outer_scope)
            if captured.problem is None:
                if captured.binding is not None:  # read from the registering chain when its step runs
                    captured.binding = dataclasses.replace(captured.binding, captured=True)
                return captured
        if missing and scope.captured:
            key = ref.dotted()
            if key in scope.captured:
                return RefInfo(site, ref, "captured", T.type_of_value(scope.captured[key]),
                               binding=Binding("captured", key))
        return info

    def resolve_here(self, ref: Ref, site: ExprSite, doc: Document, scope: Scope) -> RefInfo:
        segs = ref.segments
        first = segs[0]
        if not isinstance(first, Name):  # the grammar makes this impossible; stay total anyway
            return self.unknown(ref, site, "a reference must start with a name", None)
        root = first.name
        if root == "secrets":  # a reserved root (LANGUAGE.md §16): no step, loop or event shadows it
            return self.secret_ref(ref, site)
        names = _leading_names(segs)

        # the longest dotted prefix naming an event used in this document or registered
        for k in range(len(names), 1, -1):
            candidate = ".".join(names[:k])
            if candidate in doc.occurrences or candidate in self.ctx.registry:
                return self.event_ref(ref, site, doc, scope, candidate, k)
        if root in doc.ids:
            return self.id_ref(ref, site, doc, scope, doc.ids[root])
        if root == "error" and (caught := error_ref(self, ref, site, scope)) is not None:  # a catch's (flow_scope.py)
            return caught
        if root == LOOP and (looped := loop_ref(self, ref, site, scope)) is not None:  # a repeat's (checks/loops.py)
            return looped
        if root in scope.loops:
            return RefInfo(site, ref, "loop", _path(scope.loops[root], segs[1:]), binding=Binding("loop", root, "", segs[1:]))
        if root == "inputs":
            info = self.input_ref(ref, site)
            info.binding = Binding("input", "", "", segs[1:])
            return info
        if root == "run" and len(segs) > 1 and isinstance(segs[1], Name) and segs[1].name in LIVE_FIELDS:
            return live_run_ref(self, ref, site)
        if root == "run":
            if len(segs) > 1 and not (isinstance(segs[1], Name) and segs[1].name in RUN_FIELDS):
                bad = segs[1]
                return self.problem(ref, site, "run", rules.REF_UNKNOWN, "'run' has the fields " + ", ".join(RUN_FIELDS[:-1]) + " and " + RUN_FIELDS[-1],
                                    _suggest(getattr(bad, "name", ""), RUN_FIELDS), bad.start, bad.end)
            return RefInfo(site, ref, "run", T.STRING if len(segs) > 1 else T.ANY, binding=Binding("run", "", "", segs[1:]))
        if root == "thread":  # a stored thread's data (§13): thread.ID.KEY, thread[EXPR].KEY
            return thread_ref(self, ref, site, doc, scope)
        if scope.payload is not None:
            if root == "event":
                return RefInfo(site, ref, "event", T.ANY, binding=Binding("event", "", "", segs[1:]))
            info = self.payload_ref(ref, site, scope.payload)
            info.binding = Binding("payload", "", "", segs)
            return info
        return self.unknown(ref, site, f"'{root}' names nothing here", self.root_suggestion(ref, doc, scope))

    def event_ref(self, ref: Ref, site: ExprSite, doc: Document, scope: Scope, name: str, k: int) -> RefInfo:
        segs = ref.segments
        occurrences = doc.occurrences.get(name, [])
        rest = segs[k:]
        end_of_name = segs[k - 1].end
        if rest and isinstance(rest[0], Computed):  # which of several steps: only a literal index says
            return self.problem(ref, site, "step", rules.REF_INDEX,
                                f"a computed index cannot choose among the {name} steps",
                                f"pick one with a literal index ({name}[0], {name}[-1]), or index the latest "
                                f"result: {name}.result[...]", rest[0].start, rest[0].end)
        if rest and isinstance(rest[0], Index):
            index = rest[0]
            count = len(occurrences)
            if not -count <= index.value < count:
                where = f"{count} {name} step{'s' if count != 1 else ''}" if count else f"no {name} step"
                valid = f"use an index from 0 to {count - 1} (or -1 for the last)" if count else f"add a {name} step before this one"
                return self.problem(ref, site, "step", rules.REF_INDEX, f"{name}[{index.value}]: this chain has {where}",
                                    valid, ref.start, index.end)
            target = occurrences[index.value]
            binding = _step_binding("path", target.path, rest[1:])
            relation = doc.relation(target, scope.trail)
            if relation != "before" and scope.current is not None:
                return _bound(self.relation_problem(ref, site, f"{name}[{index.value}]", relation, ref.start, index.end),
                              binding)
            return _bound(self.field_ref(ref, site, target, rest[1:]), binding)
        if scope.current is None and scope.trail and scope.trail[0][2] == -1:
            # a hook's condition or set: no step of the action has run yet
            return self.problem(ref, site, "step", rules.REF_FORWARD,
                                f"{name} runs in this hook's action, after the condition is evaluated", None,
                                ref.start, end_of_name)
        binding = _step_binding("latest", name, rest)
        latest = doc.latest_before(name, scope.current, scope.trail)
        if latest is not None:
            return _bound(self.field_ref(ref, site, latest, rest), binding)
        nearest = doc.nearest(name, scope.current, scope.trail)
        if nearest is None:
            return self.problem(ref, site, "step", rules.REF_UNKNOWN, f"{name} does not run in this chain before this point",
                                f"add a {name} step before this one", ref.start, end_of_name)
        return _bound(self.relation_problem(ref, site, name, nearest, ref.start, end_of_name), binding)

    def id_ref(self, ref: Ref, site: ExprSite, doc: Document, scope: Scope, target: StepBase) -> RefInfo:
        segs = ref.segments
        binding = _step_binding("id", target.id or "", segs[1:])
        relation = doc.relation(target, scope.trail) if scope.trail and scope.trail[0][2] != -1 else "later"
        if relation != "before":
            label = f"step '{target.id}'"
            return _bound(self.relation_problem(ref, site, label, relation, ref.start, segs[0].end), binding)
        if len(segs) > 1 and isinstance(segs[1], Index):
            return self.problem(ref, site, "step", rules.REF_INDEX, f"'{target.id}' names one step; it has no occurrences to index",
                                f"index its result instead: {target.id}.result[{segs[1].value}]", segs[1].start, segs[1].end)
        return _bound(self.field_ref(ref, site, target, segs[1:]), binding)

    def relation_problem(self, ref: Ref, site: ExprSite, label: str, relation: Relation, start: int, end: int) -> RefInfo:
        if relation == "sibling":
            return self.problem(ref, site, "step", rules.REF_SIBLING,
                                f"{label} runs in parallel with this step, so its result is not ready",
                                "move the step that needs it after the parallel group", start, end)
        messages = {
            "later": (f"{label} only runs after this point", f"move {label} before this step, or this step after it"),
            "other-branch": (f"{label} is in the other branch of the same if, so it never runs before this step", None),
            "self": (f"{label} refers to this very step, whose result does not exist yet", None),
            "enclosing": (f"{label} is a block that contains this step and has not finished yet", None),
            "inside": (f"{label} runs inside this step, after this expression is evaluated", None),
        }
        message, hint = messages[relation]
        return self.problem(ref, site, "step", rules.REF_FORWARD, message, hint, start, end)

    def field_ref(self, ref: Ref, site: ExprSite, target: StepBase, rest: tuple[Any, ...]) -> RefInfo:
        result_type = self.result_type(target)
        if rest and isinstance(rest[0], Name) and rest[0].name in STEP_FIELDS:
            field_name, path = rest[0].name, rest[1:]
        else:
            field_name, path = "result", rest
        if field_name == "status":
            base = T.STRING
        elif field_name == "duration_ms":
            base = T.NUMBER
        elif field_name == "result":
            base = result_type
        else:
            base = T.ANY
        found = T.path_type(base, path) if path else base
        if found is None:
            missing = _first_missing(base, path)
            event = target.event if isinstance(target, EventStep) else (target.id or "this step")
            seg = missing or path[0]
            props = _props(base, path, seg)
            label = getattr(seg, "name", None) or getattr(seg, "value", "?")
            where = _path_text(path[: path.index(seg)] if seg in path else ())
            owner = f"the result of {event}" if field_name == "result" else f"{event}.{field_name}"
            return self.problem(ref, site, "step", rules.REF_PATH,
                                f"{owner} has no '{label}'" + (f" at {where}" if where else ""),
                                _suggest(str(label), props) or (f"its fields: {', '.join(sorted(props))}" if props else None),
                                seg.start, seg.end)
        return RefInfo(site, ref, "step", found)

    def input_ref(self, ref: Ref, site: ExprSite) -> RefInfo:
        segs = ref.segments
        inputs = self.ctx.chain.inputs
        if len(segs) == 1:
            return RefInfo(site, ref, "input", T.ANY)
        name_seg = segs[1]
        name = getattr(name_seg, "name", None) or getattr(name_seg, "value", None)
        if not isinstance(name, str) or name not in inputs:
            declared = ", ".join(sorted(inputs)) or "none"
            return self.problem(ref, site, "input", rules.REF_INPUT, f"the chain declares no input '{name}' (declared: {declared})",
                                _suggest(str(name), inputs) or "declare it under inputs:", name_seg.start, name_seg.end)
        return RefInfo(site, ref, "input", _path(T.type_from_schema(inputs[name].schema), segs[2:]))

    def secret_ref(self, ref: Ref, site: ExprSite) -> RefInfo:
        """`secrets.NAME`: a secret that the project's chainlang.toml declares (a string, read
        when a run starts; never captured by a stored action, which reads it when it fires)."""
        segs = ref.segments
        declared = self._declared_secrets()
        how = 'declare it in chainlang.toml: [secrets] NAME = {env = "VARIABLE"} (or {file = "PATH"})'
        name_seg = segs[1] if len(segs) > 1 else None
        name = name_seg.name if isinstance(name_seg, Name) else name_seg.value if isinstance(name_seg, Key) else None
        if name_seg is None or not isinstance(name, str):  # `secrets` alone, secrets[0], secrets[expr]
            listed = ", ".join(declared.names)
            return self.problem(ref, site, "secret", rules.REF_SECRET, "a secret is referenced by its name: secrets.NAME",
                                f"declared here: {listed}" if listed else how, ref.start, ref.end)
        if len(segs) > 2:
            extra = segs[2]
            return self.problem(ref, site, "secret", rules.REF_SECRET,
                                f"secrets.{name} is a string: it has no fields or items",
                                f"use the whole value: {{secrets.{name}}}", extra.start, segs[-1].end)
        found = RefInfo(site, ref, "secret", T.STRING, binding=Binding("secret", name))
        if declared.unreadable:  # chainlang.toml cannot be loaded: that is reported where it is read
            return found
        example = f'[secrets] {name} = {{env = "{name.upper()}"}}'
        if declared.config is None:
            return self.problem(ref, site, "secret", rules.REF_SECRET,
                                f"secrets.{name}: this chain is in no project (there is no chainlang.toml beside it "
                                "or above it), so it has no secrets",
                                f"create chainlang.toml in the project's directory, with {example}",
                                name_seg.start, name_seg.end)
        if name not in declared.config.secrets:
            from chainlang.config.project import display_path

            shown = display_path(declared.config.path)
            listed = ", ".join(declared.names) or "none"
            return self.problem(ref, site, "secret", rules.REF_SECRET,
                                f"secrets.{name} is not declared in {shown} (declared: {listed})",
                                _suggest(name, declared.names) or f"add it to the [secrets] table of {shown}: "
                                f'{name} = {{env = "{name.upper()}"}} (or {{file = "PATH"}})',
                                name_seg.start, name_seg.end)
        return found

    def _declared_secrets(self) -> "DeclaredSecrets":
        """The secrets of the project this file is in (looked up once per file)."""
        if self._secrets is None:
            from pathlib import Path

            from chainlang.config.secrets import declared_secrets

            file = self.ctx.chain.file
            directory = Path(file).resolve().parent if file and not file.startswith("<") else Path.cwd()
            self._secrets = declared_secrets(directory)
        return self._secrets

    def payload_ref(self, ref: Ref, site: ExprSite, payload: Any) -> RefInfo:
        found = T.path_type(payload, ref.segments)
        if found is None:
            # the first segment that leads nowhere (error.kind: 'kind', not 'error')
            k = next((k for k in range(1, len(ref.segments)) if T.path_type(payload, ref.segments[:k + 1]) is None), 0)
            seg = ref.segments[k]
            label = seg.name if isinstance(seg, Name) else str(getattr(seg, "value", "?"))
            props = _object_props(T.path_type(payload, ref.segments[:k]) if k else payload)
            where = (".".join(_leading_names(ref.segments[:k])) or None) if k else None
            return self.problem(ref, site, "payload", rules.REF_UNKNOWN,
                                f"'{label}' is not a field of " + (f"'{where}' in " if where else "")
                                + ("the payload of the event this wait waits for" if site.context == "where"
                                   else "this hook's payload"),
                                _suggest(label, props) or (f"its fields: {', '.join(sorted(props))}" if props else None),
                                seg.start, seg.end)
        return RefInfo(site, ref, "payload", found)

    def unknown(self, ref: Ref, site: ExprSite, message: str, hint: str | None) -> RefInfo:
        first = ref.segments[0]
        return self.problem(ref, site, "unknown", rules.REF_UNKNOWN, message, hint, first.start, first.end)

    def problem(self, ref: Ref, site: ExprSite, kind: str, rule: Rule, message: str, hint: str | None,
                start: int, end: int) -> RefInfo:
        return RefInfo(site, ref, kind, T.ANY, (rule, message, hint, start, end))

    def root_suggestion(self, ref: Ref, doc: Document, scope: Scope) -> str | None:
        root = ref.segments[0].name  # type: ignore[union-attr]
        if root in self.ctx.chain.inputs:
            return f"inputs are referenced as inputs.{root}"
        dotted = _leading_names(ref.segments)
        if len(dotted) >= 2:  # a misspelled event: compare the dotted prefix with the events of the chain
            for k in range(len(dotted), 1, -1):
                hint = _suggest(".".join(dotted[:k]), list(doc.occurrences))
                if hint:
                    return hint
        if not affordable(len(doc.ids) + len(doc.occurrences)):
            return None
        names = set(doc.ids) | set(scope.loops) | {"inputs", "run", "thread", "secrets"}
        names |= {event.split(".")[0] for event in doc.occurrences}
        names.discard(root)
        hint = _suggest(root, names)
        if hint:
            return hint
        return "references start with a step id, an event that ran before (tools.now.result), inputs.NAME, or a loop variable"

    # -- types --

    def wait_payload_type(self, step: "WaitStep") -> Any:
        """What a wait's event carries: its declared payload schema (any, for an unknown event)."""
        spec = self.ctx.registry.get(step.event) if step.event else None
        schema = getattr(spec, "params_schema", None) if spec is not None else None
        return T.type_from_schema(schema) if schema else T.ANY

    def result_type(self, target: StepBase) -> Any:
        if isinstance(target, WaitStep):  # the payload of the event that came (null when it timed out and went on)
            payload = self.wait_payload_type(target)
            return T.union(payload, T.NULL) if target.on_timeout == "continue" else payload
        if not isinstance(target, EventStep) or not target.event:
            return T.ANY
        name = target.event
        if name == "model.ask":  # typed by the step's own `schema` param
            return model_ask_result_type(target)
        if name not in self._result_types:
            spec = self.ctx.registry.get(name)
            schema = getattr(spec, "result_schema", None) if spec else None
            self._result_types[name] = T.type_from_schema(schema) if schema else T.ANY
        base = self._result_types[name]
        if target.foreach is not None:
            return T.Array(base)
        return base

    def payload_type(self, hook: Hook) -> Any:
        trigger = hook.trigger
        if trigger is not None and trigger.phase == "error":  # {error: {type, message}, params}
            from chainlang.checks.hook_events import error_payload_type
            spec = None if any(c in trigger.pattern for c in "*?[") else self.ctx.registry.get(trigger.pattern)
            return error_payload_type(spec.params_schema if spec is not None else None)
        if trigger is None or any(c in trigger.pattern for c in "*?["):
            return T.ANY
        spec = self.ctx.registry.get(trigger.pattern)
        if spec is None:
            return T.ANY
        schema = spec.params_schema if trigger.phase == "pre" else spec.result_schema
        return T.type_from_schema(schema) if schema else T.ANY


def _secret_kept_whole(expr: "Expr", secrets: list[RefInfo]) -> None:
    """A secret may be inserted as it is, joined to text with `+`, and compared or tested
    (`==`, `contains`, `startswith`...: a boolean); a filter, an index or other arithmetic
    would make a new value out of it, which masking cannot recognize in what a run shows.
    The first such use is reported on the secret's reference (CL039)."""
    from chainlang.expr.ast import Binary, BoolOp, Compare, Filter, ListLit, Not, Subscript, Unary, children

    by_ref = {id(info.ref): info for info in secrets}
    found: list[tuple[Any, RefInfo]] = []

    def carries(node: Any) -> RefInfo | None:  # the secret whose value (or a copy of it) `node` yields
        cls = type(node)
        if cls is Ref:
            return by_ref.get(id(node))
        if cls is Compare or cls is BoolOp or cls is Not:  # a boolean: the value does not go on
            for child in children(node):
                carries(child)
            return None
        if cls is Filter:
            inner = carries(node.operand)
            in_args = [carries(arg) for arg in node.args]  # join(secrets.X), default(secrets.X): the value as it is
            if inner is not None:
                found.append((node, inner))
            return inner or next((a for a in in_args if a is not None), None)
        if cls is Binary or cls is Unary or cls is Subscript:
            parts = [carries(child) for child in children(node)]
            inner = next((p for p in parts if p is not None), None)
            if inner is not None and not (cls is Binary and node.op == "+"):
                found.append((node, inner))
            return inner
        if cls is ListLit:
            parts = [carries(item) for item in node.items]
            return next((p for p in parts if p is not None), None)
        return None

    carries(expr)
    for node, info in found:
        if info.problem is not None:
            continue
        name = info.ref.dotted()
        if type(node) is Filter:
            what = f"the filter {node.name}"
        elif type(node) is Binary:
            what = f"'{node.op}'"
        elif type(node) is Unary:
            what = f"'{node.op}'"
        else:
            what = "an index"
        info.problem = (rules.REF_SECRET, f"{what} would make a new value out of {name}, which masking could not "
                        "recognize wherever the run shows it",
                        f"use the secret as it is ({{{name}}}, or joined to text with +), and let the tool that "
                        "receives it transform it", node.start, node.end)


def _step_binding(kind: Any, name: str, rest: tuple[Any, ...]) -> Binding:
    """`x.result.a`, `x.status`, or the shorthand `x.a` (= `x.result.a`)."""
    if rest and isinstance(rest[0], Name) and rest[0].name in STEP_FIELDS:
        return Binding(kind, name, rest[0].name, rest[1:])
    return Binding(kind, name, "result", rest)


def _bound(info: RefInfo, binding: Binding) -> RefInfo:
    """`info`, with what it names. A reference with a problem is bound too: warnings do not
    stop a run, and a `decide` text is judged by whether its names exist."""
    if info.kind != "unknown":
        info.binding = binding
    return info


def _leading_names(segs: tuple[Any, ...]) -> list[str]:
    names = []
    for seg in segs:
        if not isinstance(seg, Name):
            break
        names.append(seg.name)
    return names


def _path(base: Any, segs: tuple[Any, ...]) -> Any:
    if not segs:
        return base
    found = T.path_type(base, segs)
    return T.ANY if found is None else found


def _path_text(segs: tuple[Any, ...]) -> str:
    out = ""
    for seg in segs:
        if isinstance(seg, Name):
            out += ("." if out else "") + seg.name
        elif isinstance(seg, Index):
            out += f"[{seg.value}]"
        else:
            out += f"[{getattr(seg, 'value', '?')!r}]"
    return out


def _first_missing(base: Any, path: tuple[Any, ...]) -> Any:
    for i in range(1, len(path) + 1):
        if T.path_type(base, path[:i]) is None:
            return path[i - 1]
    return None


def _props(base: Any, path: tuple[Any, ...], seg: Any) -> list[str]:
    i = path.index(seg) if seg in path else 0
    parent = T.path_type(base, path[:i]) if i else base
    return _object_props(parent)


def _object_props(t: Any) -> list[str]:
    """Property names of an object type (of every object member of a union)."""
    names: list[str] = []
    for member in T.members(t):
        if isinstance(member, T.Object):
            names.extend(k for k in member.props if k not in names)
    return names


def _suggest(word: str, candidates: Any) -> str | None:
    return did_you_mean(word, candidates)


def analyse(ctx: "CheckContext") -> Analysis:
    return Analyser(ctx).run()


__all__ = ["Analysis", "ExprSite", "RefInfo", "analyse", "Key"]


def _root_name(ref: Ref) -> str | None:
    first = ref.segments[0] if ref.segments else None
    return first.name if isinstance(first, Name) else None
