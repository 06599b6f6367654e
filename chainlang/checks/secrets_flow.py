"""CL066, CL067: the secrets taint rule (LANGUAGE.md §16).

A secret must not reach a model (the agents, `model.ask`, an event that uses a model tier,
the decide model) or the user (`user.notify`) unless the step that sends it says
`expose: [NAME]`. The check follows each `{secrets.NAME}` through what carries it:

- a step's params: a step that received a secret gives a tainted result (its `result`,
  `error` and `params` fields; not its `status`), and so on transitively;
- a `foreach` over a tainted list taints its loop variable;
- a hook: a `pre:` hook (and an `error:` one) on a step whose params are tainted, or a
  `post:` hook on a step whose result is, gets a tainted payload, which its action may send on;
- a sub-chain (a named chain, or `chain.run` with a literal path): a tainted param taints
  that input inside the callee; what the callee sends to a sink from it is reported at
  the calling step, and outputs computed from secrets taint the calling step's result;
- a `repeat`: a `state` or `next` value taints `loop.NAME` in the body, `until` and `next`
  (`next` reads the steps of the pass, as an expression just after the body would);
- a `try` or `switch` block: its result (its last step's, in each branch that may end it)
  holds what that step's does, and `{error}` in a catch what the try steps' errors may;
- a hook's `set:` on a `pre:` trigger: the value it sets becomes the firing step's param.
  (A switch's value is only compared with the case keys: it is sent nowhere.)

Every flow is reported once per secret and sink step (CL066), naming the secret, the way
it flows and the fix. The calling step's `expose` covers the chain it calls. CL067: an
`expose` naming no declared secret is an error (with did-you-mean); one that no flow the
checker sees needs is a warning. What the checker cannot see (a chain a model writes, a
tool's result, the store) is refused at run time (chainlang.runtime.secret_guard).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.checks.base import CheckContext, suggestion
from chainlang.diagnostics import rules
from chainlang.expr.ast import Key, Name, iter_refs
from chainlang.model.build_loops import LOOP, RepeatStep
from chainlang.model.nodes import Chain, EventStep, Hook, Step, StepBase, SwitchStep, TryStep, Value, walk_steps
from chainlang.registry.sinks import sink_of

if TYPE_CHECKING:
    from chainlang.checks.scope import Document
    from chainlang.expr.ast import Expr
    from chainlang.load.loader import AnyNode
    from chainlang.model.bindings import ChainBindings

RULES = (rules.SECRET_FLOW, rules.BAD_EXPOSE)

Trail = tuple[tuple[int, str, int], ...]  # a position in a Document (checks/scope.py)
Taint = dict[str, str]  # secret name → how it arrives ("secrets.crm_token → step crm.fetch's result")
MAX_PASSES = 8  # of the fixpoint over one sequence of steps (loops may carry a taint backwards)
MAX_DEPTH = 8  # chains calling chains followed from one file
DECIDE_MODEL = "the decide model"
ARROW = " → "
MAX_HOPS = 6  # of a way shown in a message (the first two, "…", the last three)


@dataclass(slots=True)
class Leak:
    """A secret reaching a sink at `step`: `how` it gets there, where (`node`) it is sent."""

    step: EventStep
    secret: str
    how: str
    node: "AnyNode"
    file: str
    sink: str  # where it goes, in words: "the user (user.notify)", "the decide model"


@dataclass
class Flow:
    """The taints of one sequence of steps (a chain's, or a hook's action)."""

    steps: list[Step]
    bindings: "ChainBindings | None"
    inputs: dict[str, Taint] = field(default_factory=dict)
    payload: Taint = field(default_factory=dict)
    own_secrets: bool = True  # False: only what the caller passes in counts (a callee's leaks of its own are its file's)
    params: dict[int, dict[str, Taint]] = field(default_factory=dict)  # id(step) → param → taint
    results: dict[int, Taint] = field(default_factory=dict)
    loops: dict[int, Taint] = field(default_factory=dict)  # id(step with foreach) → its loop variable's
    states: dict[int, dict[str, Taint]] = field(default_factory=dict)  # id(repeat) → loop.NAME → taint
    # what `pre:` hooks set on the steps they fire on: (the hook, param → taint of the value set)
    sets: list[tuple[Hook, dict[str, Taint]]] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    needed: dict[int, set[str]] = field(default_factory=dict)  # id(step) → the exposed names a flow used
    # the index of the steps (set by SecretsFlow.run): positions, containing steps, static paths
    doc: "Document | None" = None
    parents: dict[int, Step] = field(default_factory=dict)
    by_path: dict[str, Step] = field(default_factory=dict)


def _union(into: Taint, more: Taint, then: str = "") -> bool:
    changed = False
    for name, how in more.items():
        if name not in into:
            into[name] = _shortened(how + then) if then else how
            changed = True
    return changed


def _shortened(how: str) -> str:
    """A way that passes many steps, with its middle left out: the message stays readable,
    and a long chain of steps does not build ever longer texts."""
    hops = how.split(ARROW)
    if len(hops) <= MAX_HOPS:
        return how
    return ARROW.join(hops[:2] + ["…"] + hops[-(MAX_HOPS - 3):])


def _label(step: Step) -> str:
    return f"step {step.id or (step.event if isinstance(step, EventStep) else step.path)}"


class SecretsFlow:
    """The dataflow of one file, and of the chains it calls (kept in the project's memo)."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.registry = ctx.registry
        self.callees: dict[tuple[Any, ...], Flow] = {}
        self.running: set[int] = set()

    # -- one sequence of steps

    def run(self, flow: Flow, chain: Chain, depth: int = 0) -> Flow:
        from chainlang.checks.scope import Document

        steps = walk_steps(flow.steps)
        if not self.may_carry(flow, steps):
            return flow  # no secret in sight: nothing to follow (most chains)
        flow.doc = Document(flow.steps)
        flow.parents = _parents(flow.steps)
        flow.by_path = {s.path: s for s in steps}
        for _ in range(MAX_PASSES):
            changed = False
            for step in steps:
                if step.foreach is not None and step.foreach.expr is not None:
                    taint = self.expr_taint(flow, step.foreach.expr, step)
                    changed |= _union(flow.loops.setdefault(id(step), {}), taint, f" → the items of {_label(step)}")
                if isinstance(step, RepeatStep):
                    changed |= self.repeat_state(flow, step)
                if isinstance(step, (TryStep, SwitchStep)):  # a block's result is its last step's
                    result = flow.results.setdefault(id(step), {})
                    for label, branch in step.branches():
                        if branch and label != "finally":  # a finally runs last but leaves the result
                            changed |= _union(result, flow.results.get(id(branch[-1]), {}),
                                              f" → {_label(step)}'s result")
                if not isinstance(step, EventStep):
                    continue
                params = flow.params.setdefault(id(step), {})
                result = flow.results.setdefault(id(step), {})
                for key, value in step.params.items():
                    if value.deferred:  # a stored action: checked as its own hook, when it runs
                        continue
                    taint = self.value_taint(flow, value, step)
                    changed |= _union(params.setdefault(key, {}), taint)
                    changed |= _union(result, taint, f" → {_label(step)}'s result")
                for hook, values in flow.sets:
                    if _matches(hook, step.event):
                        for key, taint in values.items():
                            changed |= _union(params.setdefault(key, {}), taint)
                            changed |= _union(result, taint, f" → {_label(step)}'s result")
            if not changed:
                break
        for step in steps:
            if isinstance(step, EventStep) and step.event:
                self.sinks(flow, chain, step, depth)
        return flow

    def repeat_state(self, flow: Flow, step: RepeatStep) -> bool:
        """`loop.NAME` of a repeat: its `state` value (read before the loop, outside it), then
        what each pass's `next` gives it (read after the pass's steps)."""
        states = flow.states.setdefault(id(step), {})
        around = flow.parents.get(id(step))
        after = _after_body(flow, step)
        changed = False
        for name, value in step.state.items():
            taint = self.value_taint(flow, value, step, loops_from=around, outside=True)
            changed |= _union(states.setdefault(name, {}), taint, f" → loop.{name} of {_label(step)}")
        for name, value in step.next.items():
            taint = self.value_taint(flow, value, step, trail=after)
            changed |= _union(states.setdefault(name, {}), taint, f" → loop.{name} of {_label(step)} (next:)")
        return changed

    def may_carry(self, flow: Flow, steps: list[Step]) -> bool:
        """Whether anything in `steps` can hold a secret: a reference to one, an input or a
        payload that holds one, a value a hook sets, or a call of a chain (whose outputs may)."""
        if flow.inputs or flow.payload or any(values for _, values in flow.sets):
            return True
        refs = flow.bindings.refs.values() if flow.bindings is not None else ()
        if any(binding.kind == "secret" for binding in refs):
            return True
        named = self.ctx.project.named
        return any(isinstance(s, EventStep) and (s.event in named or s.event == "chain.run") for s in steps)

    def sinks(self, flow: Flow, chain: Chain, step: EventStep, depth: int) -> None:
        params = flow.params.get(id(step), {})
        exposed = {name for name, _ in step.expose}
        sink = sink_of(step.event, self.registry.get(step.event))
        if sink is not None:
            for key, taint in params.items():
                where = step.param_keys.get(key) or step.event_node or step.node
                for name, how in taint.items():
                    self.leak(flow, chain, step, name, f"{how} → {step.event}'s {key}", where, exposed, sink)
        if step.decide is not None and (flow.bindings is None or id(step) not in flow.bindings.decide):
            # a decide text for the model: it gets the params, and the results the chain has so far
            where = step.decide_node or step.node
            for taint in params.values():
                for name, how in taint.items():
                    self.leak(flow, chain, step, name, f"{how} → the decide model (this step's decide:)", where,
                              exposed, DECIDE_MODEL)
            doc, here = flow.doc, flow.doc.trails.get(id(step)) if flow.doc is not None else None
            for other in walk_steps(flow.steps):
                if here is not None and doc is not None and isinstance(other, EventStep) and \
                        id(other) in doc.trails and doc.relation(other, here) == "before":
                    for name, how in flow.results.get(id(other), {}).items():
                        self.leak(flow, chain, step, name, f"{how} → the decide model (the context of this "
                                  "step's decide:)", where, exposed, DECIDE_MODEL)
        self.call(flow, chain, step, depth, exposed)

    def leak(self, flow: Flow, chain: Chain, step: EventStep, name: str, how: str, node: "AnyNode",
             exposed: set[str], sink: str) -> None:
        if name in exposed:
            flow.needed.setdefault(id(step), set()).add(name)
            return
        if any(leak.step is step and leak.secret == name for leak in flow.leaks):
            return
        flow.leaks.append(Leak(step, name, how, node, chain.file, sink))

    # -- sub-chains

    def call(self, flow: Flow, chain: Chain, step: EventStep, depth: int, exposed: set[str]) -> None:
        """A step that runs a chain: its tainted params taint the callee's inputs."""
        from chainlang.checks.budget import budget_of

        found = budget_of(self.ctx).callee(chain, step)
        if found is None or depth >= MAX_DEPTH:
            return
        callee, label = found
        if callee.root is None or id(callee) in self.running:
            return
        params = flow.params.get(id(step), {})
        inputs: dict[str, Taint] = {}
        if step.event == "chain.run":
            whole = params.get("inputs", {})
            for tv in step.params.get("inputs", Value(None, None)).templates:
                name = tv.path[1] if len(tv.path) > 1 and isinstance(tv.path[1], str) else None
                for each in ([name] if name else list(callee.inputs)):
                    _union(inputs.setdefault(each, {}), self.template_taint(flow, tv, step))
            if not inputs and whole:
                for each in callee.inputs:
                    _union(inputs.setdefault(each, {}), whole)
        else:
            for key, taint in params.items():
                if taint:
                    _union(inputs.setdefault(key, {}), taint)
        inputs = {k: {n: f"{h} → input {k} of chain {label}" for n, h in v.items()} for k, v in inputs.items() if v}
        leaks = self.callee(callee, inputs, own=False, depth=depth + 1).leaks if inputs else []
        for leak in leaks:
            where = step.event_node or step.node
            for key, taint in params.items():
                if leak.secret in taint:
                    where = step.param_keys.get(key) or where
                    break
            line = leak.step.node.line
            shown = Path(leak.file).name if leak.file else label
            self.leak(flow, chain, step, leak.secret, f"{leak.how} (in {shown}, line {line})", where, exposed,
                      f"{leak.sink} in chain {label}")
        outputs = self.callee(callee, inputs, own=True, depth=depth + 1)
        result = flow.results.setdefault(id(step), {})
        for key, value in callee.outputs.items():
            taint = self.value_taint(outputs, value, None)
            _union(result, taint, f" → output {key} of chain {label} → {_label(step)}'s result")

    def callee(self, callee: Chain, inputs: dict[str, Taint], own: bool, depth: int) -> Flow:
        key = (id(callee), own, tuple(sorted((k, tuple(sorted(v.items()))) for k, v in inputs.items())))
        done = self.callees.get(key)
        if done is not None:
            return done
        _bound(self.ctx, callee)
        flow = Flow(callee.steps, callee.bindings, inputs=inputs, own_secrets=own)
        self.callees[key] = flow
        self.running.add(id(callee))
        try:
            self.run(flow, callee, depth)
        finally:
            self.running.discard(id(callee))
        return flow

    # -- what an expression carries

    def value_taint(self, flow: Flow, value: Value, step: Step | None, **where: Any) -> Taint:
        """What `value` carries at `step` (None: at the end of the chain, where outputs are);
        `where`: as expr_taint's."""
        out: Taint = {}
        for tv in value.templates:
            _union(out, self.template_taint(flow, tv, step, **where))
        return out

    def template_taint(self, flow: Flow, tv: Any, step: Step | None, **where: Any) -> Taint:
        from chainlang.expr.template import Embedded

        out: Taint = {}
        for part in tv.template.parts:
            if isinstance(part, Embedded):
                _union(out, self.expr_taint(flow, part.expr, step, **where))
        return out

    def expr_taint(self, flow: Flow, expr: "Expr", step: Step | None, trail: "Trail | None" = None,
                   loops_from: Step | None = None, outside: bool = False) -> Taint:
        """What `expr` carries at `step`. `trail`: the position step references are read from,
        when not `step`'s (a repeat's `next`: after its body). `outside`: loop variables are
        those around `loops_from` rather than `step` (a repeat's `state`, read before it)."""
        out: Taint = {}
        doc = flow.doc
        refs = flow.bindings.refs if flow.bindings is not None else {}
        for ref in iter_refs(expr):
            binding = refs.get(id(ref))
            if binding is None:
                name = _secret_name(ref)  # a chain whose analysis bound nothing (it did not check)
                if name is not None and flow.own_secrets:
                    out.setdefault(name, f"secrets.{name}")
                continue
            kind = binding.kind
            if binding.captured:  # read from the chain that registered the action: followed there, not here
                continue
            if kind == "secret":
                if flow.own_secrets:
                    out.setdefault(binding.name, f"secrets.{binding.name}")
            elif kind in ("latest", "path", "id"):
                if binding.field not in ("result", "error", "params") or doc is None:
                    continue
                target = self.target(binding, step, flow, trail)
                if target is not None:
                    _union(out, flow.results.get(id(target), {}))
            elif kind == "input":
                first = binding.path[0] if binding.path else None
                name = first.name if isinstance(first, Name) else first.value if isinstance(first, Key) else None
                for key, taint in flow.inputs.items():
                    if name is None or key == name:
                        _union(out, taint)
            elif kind == "loop":
                _union(out, _loop_taint(flow, binding, loops_from if outside else step))
            elif kind in ("payload", "event"):
                _union(out, flow.payload)
        return out

    @staticmethod
    def target(binding: Any, step: Step | None, flow: Flow, trail: "Trail | None" = None) -> "StepBase | None":
        """The step a step reference names, seen from `step` (None: from the chain's end), or
        from `trail` when given."""
        doc = flow.doc
        assert doc is not None
        if binding.kind == "id":
            return doc.ids.get(binding.name)
        if binding.kind == "path":
            return flow.by_path.get(binding.name)
        if trail is not None:
            return doc.latest_before(binding.name, None, trail)
        if step is None:
            return doc.latest_before(binding.name, None, ((0, "steps", len(flow.steps)),))
        trail = doc.trails.get(id(step))
        if trail is None:  # a step of a kind the index does not know
            return None
        return doc.latest_before(binding.name, step, trail)


def _loop_taint(flow: Flow, binding: Any, start: Step | None) -> Taint:
    """What a loop variable read at `start` carries: a foreach's item, a repeat's `loop.NAME`,
    or a catch's `{error}` (the errors of its try steps). The nearest enclosing one counts."""
    out: Taint = {}
    inner: Step | None = None
    holder = start
    while holder is not None:
        if binding.name == LOOP and isinstance(holder, RepeatStep):
            first = binding.path[0] if binding.path else None
            name = first.name if isinstance(first, Name) else first.value if isinstance(first, Key) else None
            for key, taint in flow.states.get(id(holder), {}).items():
                if name is None or key == name:
                    _union(out, taint)
            return out
        if binding.name == "error" and isinstance(holder, TryStep) and holder.catch is not None and \
                inner is not None and any(s is inner for s in holder.catch):
            for tried in walk_steps(holder.try_):
                _union(out, flow.results.get(id(tried), {}), " → {error} in the catch")
            return out
        if holder.foreach is not None and holder.as_ == binding.name:
            _union(out, flow.loops.get(id(holder), {}))
            return out
        inner, holder = holder, flow.parents.get(id(holder))
    return out


def _after_body(flow: Flow, step: RepeatStep) -> "Trail | None":
    """Where a repeat's `until` and `next` stand: just after the last step of its body."""
    doc = flow.doc
    here = doc.trails.get(id(step)) if doc is not None else None
    return None if here is None else here + ((id(step), "steps", len(step.steps)),)


def _parents(steps: list[Step]) -> dict[int, Step]:
    """id(step) → the step that contains it, whatever kind of block that is."""
    out: dict[int, Step] = {}
    for step in walk_steps(steps):
        for child in _children(step):
            out[id(child)] = step
    return out


def _children(step: Step) -> list[Step]:
    """The steps directly inside `step`, of any block kind (every list of steps it holds)."""
    import dataclasses

    from chainlang.model.nodes import StepBase

    found: list[Step] = []
    for each in dataclasses.fields(step):
        value = getattr(step, each.name, None)
        if isinstance(value, list):
            found.extend(item for item in value if isinstance(item, StepBase))  # type: ignore[misc]
    if isinstance(step, SwitchStep):  # a switch's cases hold their steps one level down
        for case in step.cases:
            found.extend(case.steps)
    return found


def _secret_name(ref: Any) -> str | None:
    segs = ref.segments
    if len(segs) >= 2 and isinstance(segs[0], Name) and segs[0].name == "secrets":
        second = segs[1]
        return second.name if isinstance(second, Name) else second.value if isinstance(second, Key) else None
    return None


def _bound(ctx: CheckContext, chain: Chain) -> None:
    """Bind the references of a chain this file calls, when its own check has not yet."""
    if chain.bindings is not None:
        return
    from chainlang.checks.scope import analyse
    from chainlang.diagnostics import DiagnosticSink

    try:
        analyse(CheckContext(chain, ctx.source, DiagnosticSink(chain.file), ctx.registry, ctx.project))
    except Exception:  # noqa: BLE001 - its own check reports what is wrong with it; here it just carries nothing
        return


# -- hooks


def _matches(hook: Hook, event: str) -> bool:
    trigger = hook.trigger
    return trigger is not None and fnmatch.fnmatchcase(event, trigger.pattern)


def hook_payload(engine: SecretsFlow, hook: Hook, sources: list[tuple[Chain, Flow]]) -> Taint:
    """What the steps that fire `hook` put in its payload: a `pre:` or `error:` hook gets the
    params, a `post:` hook the result."""
    out: Taint = {}
    trigger = hook.trigger
    if trigger is None or hook.kind != "hook":  # a registered hook fires in other runs; a scheduled one has none
        return out
    words = f"the payload of hook {hook.label} ({trigger.phase}:{trigger.pattern})"
    for chain, flow in sources:
        for step in walk_steps(chain.steps):
            if not isinstance(step, EventStep) or not _matches(hook, step.event):
                continue
            if trigger.phase == "post":
                _union(out, flow.results.get(id(step), {}), f" → {words}")
            else:
                for taint in flow.params.get(id(step), {}).values():
                    _union(out, taint, f" → {words}")
    return out


def hook_sets(engine: SecretsFlow, hooks: list[Hook]) -> list[tuple[Hook, dict[str, Taint]]]:
    """What each `pre:` hook's `set:` puts in the params of the steps it fires on (its values
    are rendered before the step runs, so what a sink step then sends may hold a secret)."""
    out: list[tuple[Hook, dict[str, Taint]]] = []
    for hook in hooks:
        trigger = hook.trigger
        if trigger is None or hook.kind != "hook" or trigger.phase != "pre" or not hook.set:
            continue
        here = Flow(hook.action, hook.bindings)
        values: dict[str, Taint] = {}
        for key, value in hook.set.items():
            words = f" → set: {key} of hook {hook.label} ({trigger.phase}:{trigger.pattern})"
            _union(values.setdefault(key, {}), engine.value_taint(here, value, None), words)
        out.append((hook, {key: taint for key, taint in values.items() if taint}))
    return out


# -- the check


def check(ctx: CheckContext) -> None:
    chain = ctx.chain
    if chain.root is None:
        return
    ctx.analysis  # binds the references followed here (computed once, shared with the other checks)
    engine = SecretsFlow(ctx)
    main = Flow(chain.steps, chain.bindings, sets=hook_sets(engine, chain.hooks))
    if chain.kind == "chain":
        engine.run(main, chain)
    flows = [main]
    sources = [(chain, main)] if chain.kind == "chain" else _project_sources(engine, ctx)
    for hook in chain.hooks:
        action = Flow(hook.action, hook.bindings, payload=hook_payload(engine, hook, sources))
        engine.run(action, chain)
        flows.append(action)
    for flow in flows:
        for leak in flow.leaks:
            name = leak.secret
            receiver = "the decide model" if leak.sink == DECIDE_MODEL else leak.step.event
            ctx.report(rules.SECRET_FLOW, f"secrets.{name} reaches {leak.sink}: {leak.how}", leak.node,
                       f"if {receiver} must receive it, add expose: [{name}] to this step; otherwise do not send it "
                       "there")
    _check_expose(ctx, chain, flows)


def _project_sources(engine: SecretsFlow, ctx: CheckContext) -> list[tuple[Chain, Flow]]:
    """For a hooks file: every chain of the project, whose steps may fire its hooks."""
    out = []
    for other in ctx.project.chains:
        if other.kind != "chain" or other.root is None:
            continue
        _bound(ctx, other)
        out.append((other, engine.run(Flow(other.steps, other.bindings), other)))
    return out


def _check_expose(ctx: CheckContext, chain: Chain, flows: list[Flow]) -> None:
    steps = [s for s in walk_steps(chain.steps) if isinstance(s, EventStep) and s.expose]
    for hook in chain.hooks:
        steps += [s for s in walk_steps(hook.action) if isinstance(s, EventStep) and s.expose]
    if not steps:
        return
    from chainlang.config.secrets import declared_secrets

    file = chain.file
    directory = Path(file).resolve().parent if file and not file.startswith("<") else Path.cwd()
    declared = declared_secrets(directory)
    needed: dict[int, set[str]] = {}
    for flow in flows:
        for key, names in flow.needed.items():
            needed.setdefault(key, set()).update(names)
    for step in steps:
        for name, node in step.expose:
            if declared.unreadable:
                continue
            if declared.config is None:
                ctx.report(rules.BAD_EXPOSE, f"expose: {name}: this chain is in no project (there is no "
                           "chainlang.toml beside it or above it), so it has no secrets", node,
                           f'declare it in chainlang.toml: [secrets] {name} = {{env = "{name.upper()}"}}')
                continue
            if name not in declared.config.secrets:
                listed = ", ".join(declared.names) or "none"
                ctx.report(rules.BAD_EXPOSE, f"expose: {name} is not a declared secret (declared: {listed})", node,
                           suggestion(name, declared.names) or "name a secret of the [secrets] table of chainlang.toml")
                continue
            if name not in needed.get(id(step), set()):
                ctx.report(rules.BAD_EXPOSE, f"expose: {name}: no flow of secrets.{name} to a model or the user "
                           f"through this step ({step.event}) is visible to the checker", node,
                           "remove it; keep it only if the value reaches the step another way (a tool's result), "
                           "which the run refuses without it", severity="warning")
