"""`repeat` in the checks: what its body, `until`, `state` and `next` can reference, `loop.NAME`
(CL052 loop-ref), and its worst case against `limits.max_steps` (CL051 repeat-budget).

The scope analysis (checks/scope.py) hands a repeat step to `walk_repeat` and a reference
whose root is `loop` to `loop_ref`: the body, `until` and `next` see `loop.pass` and the
names `state` declares; `state` is evaluated before the first pass, so it sees the steps
before the loop and not `loop` (unless the repeat sits in another one's body). `until` and
`next` are evaluated after a pass: they see the pass's steps, as an expression just after
the body would. Inside nested repeats `loop` is the innermost one's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import did_you_mean
from chainlang.expr import types as T
from chainlang.expr.ast import Name, Ref
from chainlang.model.bindings import Binding
from chainlang.model.build_loops import LOOP, PASS, RepeatStep
from chainlang.model.nodes import BlockStep, EventStep, IfStep, Step

if TYPE_CHECKING:
    from chainlang.checks.scope import Analyser, Document, ExprSite, RefInfo, Scope

RULES = (rules.REPEAT_BUDGET,)  # CL050 and CL052 are reported where they are found (build, scope)


def loop_type(step: RepeatStep) -> T.Object:
    """What `loop` is in the body: the pass number and the state's names (any value: `next` may change it)."""
    props: dict[str, Any] = {PASS: T.NUMBER}
    props.update({name: T.ANY for name in step.state})
    return T.Object(props, strict=True)


def walk_repeat(analyser: "Analyser", step: RepeatStep, doc: "Document", outer: "Scope") -> None:
    """The expression sites of a repeat: `state` (before the loop), the body, then `until` and `next`."""
    from chainlang.checks.scope import Scope

    for value in step.state.values():
        analyser.value_sites(value, "state", doc, outer)
    loops = {**outer.loops, LOOP: loop_type(step)}
    body = Scope(loops=loops, payload=outer.payload, trail=outer.trail, current=outer.current,
                 enclosing=outer.enclosing, captured=outer.captured)
    analyser.walk_steps(step.steps, doc, body)
    # after a pass: where an expression just after the body's last step stands
    after = Scope(loops=loops, payload=outer.payload, trail=doc.trails[id(step)] + ((id(step), "steps", len(step.steps)),),
                  current=None, enclosing=outer.enclosing, captured=outer.captured)
    if step.until is not None:
        analyser.condition_site(step.until, "until", doc, after)
    for value in step.next.values():
        analyser.value_sites(value, "next", doc, after)


def loop_ref(analyser: "Analyser", ref: Ref, site: "ExprSite", scope: "Scope") -> "RefInfo | None":
    """`loop`, `loop.pass`, `loop.NAME`: checked against the enclosing repeat's state. None: `loop`
    is not a repeat's here, and may be something else (a field of a hook's payload)."""
    from chainlang.checks.scope import RefInfo, _path

    segs = ref.segments
    first = segs[0]
    kind = scope.loops.get(LOOP)
    if not isinstance(kind, T.Object):
        if scope.payload is not None:
            return None
        return analyser.problem(ref, site, "loop", rules.LOOP_REF, "'loop' is only known inside a repeat",
                                "loop.pass and loop.NAME (a name of the repeat's state) are read in its body, "
                                "its until and its next", first.start, first.end)
    if len(segs) > 1:
        seg = segs[1]
        name = seg.name if isinstance(seg, Name) else getattr(seg, "value", None)
        if not isinstance(name, str) or name not in kind.props:
            names = sorted(kind.props)
            guess = did_you_mean(str(name), [n for n in names if n != PASS])
            declared = ", ".join(n for n in names if n != PASS) or "none"
            return analyser.problem(ref, site, "loop", rules.LOOP_REF,
                                    f"loop.{name}: the repeat's state declares no '{name}' (declared: {declared})",
                                    guess or f"declare it with its first value: state: {{{name}: ...}}; "
                                             "loop.pass is the pass number", seg.start, seg.end)
    return RefInfo(site, ref, "loop", _path(kind, segs[1:]), binding=Binding("loop", LOOP, "", segs[1:]))


# -- CL051: the worst case of the steps a run executes

def worst_steps(steps: list[Step]) -> int:
    """The most event steps `steps` can execute: a sequence and a parallel group add, an `if`
    takes its larger branch, a repeat multiplies its body by `max`, a foreach over a list
    written out by its length (a computed one counts once: its length is not known)."""
    return sum(_worst(step) for step in steps)


def _worst(step: Step) -> int:
    from chainlang.checks.budget import literal_length

    times = literal_length(step.foreach) if step.foreach is not None else 1
    return (times or 1) * _once(step)


def _once(step: Step) -> int:
    if isinstance(step, EventStep):
        return 1
    if isinstance(step, RepeatStep):
        return (step.max or 1) * worst_steps(step.steps)
    if isinstance(step, BlockStep):
        return worst_steps(step.steps)
    if isinstance(step, IfStep):
        return max(worst_steps(step.then), worst_steps(step.else_))
    branches = getattr(step, "branches", None)  # try/catch/finally (all may run), switch (one case runs)
    if branches is None:
        return 1
    counts = [worst_steps(steps) for _, steps in branches()]
    if type(step).__name__ == "SwitchStep":
        return max(counts, default=0)
    return sum(counts)


def _repeats(steps: list[Step]) -> list[RepeatStep]:
    """The outermost repeats of `steps` (not those inside another repeat's body)."""
    from chainlang.model.nodes import walk_steps

    inner: set[int] = set()
    out: list[RepeatStep] = []
    for step in walk_steps(steps):
        if isinstance(step, RepeatStep) and id(step) not in inner:
            out.append(step)
            inner.update(id(s) for s in walk_steps(step.steps))
    return out


def check(ctx: CheckContext) -> None:
    chain = ctx.chain
    if chain.kind != "chain":
        return
    repeats = [r for r in _repeats(chain.steps) if r.max is not None]
    if not repeats:
        return
    limit = chain.limits.max_steps
    worst = worst_steps(chain.steps)
    if worst <= limit:
        return
    costs = [(_worst(r), r) for r in repeats]
    cost, blamed = max(costs, key=lambda pair: pair[0])
    body = worst_steps(blamed.steps)
    nested = any(isinstance(s, RepeatStep) for s in _inner_steps(blamed))
    how = f"max {blamed.max:,} × {body:,} step{'s' if body != 1 else ''} a pass" + (", nested repeats multiply" if nested else "")
    where = blamed.max_node or blamed.node
    limit_text = "limits.max_steps" if chain.limits.node is not None and chain.limits.node.get("max_steps") is not None \
        else "the default limits.max_steps"
    most = max(1, (limit - (worst - cost)) // max(1, cost // max(1, blamed.max or 1)))
    ctx.report(rules.REPEAT_BUDGET,
               f"this repeat can execute {cost:,} steps ({how}): the chain's worst case is {worst:,} steps, "
               f"more than {limit_text} = {limit:,}",
               where, f"lower max to {most:,} or less, or raise limits.max_steps to {worst:,}")


def _inner_steps(step: RepeatStep) -> list[Step]:
    from chainlang.model.nodes import walk_steps

    return walk_steps(step.steps)
