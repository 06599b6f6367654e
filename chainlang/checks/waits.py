"""The checks of waiting inside a run (LANGUAGE.md §15): `wait:` steps and `user.ask`.

- CL014 unknown-event: a wait on an event nothing declares (did you mean, among the
  external events first: those are what a wait can wait for).
- CL068 wait-shape: a wait on a tool or a chain (they are called, not waited for); a wait
  or user.ask in a hook's action (an emit or a step fires hooks: they cannot wait), also
  through a named chain the action calls; a user.ask with foreach (it compiles to a wait
  only alone), with a step `timeout:`/`retry:` (they do not apply: its timeout is a param),
  or with both choices and schema.
- CL019 bad-duration: a literal user.ask timeout that is not a duration (as a wait's own).
- CL069 wait-no-timeout (a warning): a wait, or a user.ask, that may wait forever.
- CL070 wait-where: a where that reads nothing of the payload (the same for every event:
  the first one after the wait began is taken, whatever it says), one that reads the
  payload as `event.X` (bare names are its fields there), a step id that hides a payload
  field of the same name, and a comparison of a payload field with a value it can never
  equal (another type, or outside its enum).

The shape of the `wait:` mapping itself is the builder's (model/build_wait.py); a field
the payload cannot have is CL021 (checks/scope.py); `max_steps` is not spent waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import affordable, closest
from chainlang.durations import DURATION_HINT, MAX_DURATION, MAX_DURATION_TEXT, parse_duration
from chainlang.expr import types as T
from chainlang.expr.ast import Compare, Key, ListLit, Literal, Name, Ref, iter_nodes
from chainlang.load.loader import AnyNode, MapNode, ScalarNode
from chainlang.model.nodes import Chain, EventStep, Hook, Step, WaitStep, walk_steps

RULES = (rules.UNKNOWN_EVENT, rules.WAIT_SHAPE, rules.BAD_DURATION, rules.WAIT_NO_TIMEOUT, rules.WAIT_WHERE)

ASK = "user.ask"  # compile/wait_graph.py ASK_EVENT: a step of this event compiles to a wait
_TIMEOUT_HINT = "add timeout: 7d and on_timeout: fail, continue or break (what the chain does when it passes)"


def check(ctx: CheckContext) -> None:
    wheres = _WhereIndex(ctx)
    for step in walk_steps(ctx.chain.steps):
        _run_step(ctx, step, wheres)
    for hook in ctx.chain.hooks:
        for step in walk_steps(hook.action):
            _hook_step(ctx, hook, step)


class _WhereIndex:
    """The analysed where of each wait and the references in it, looked up once per file."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self._sites: dict[int, Any] | None = None
        self._refs: dict[int, list[Any]] = {}

    def of(self, step: WaitStep) -> tuple[Any, list[Any]]:
        if self._sites is None:
            analysis = self.ctx.analysis
            self._sites = {id(s.node): s for s in analysis.sites if s.context == "where"}
            for info in analysis.refs:
                if info.site.context == "where":
                    self._refs.setdefault(id(info.site), []).append(info)
        site = self._sites.get(id(step.where.node)) if step.where is not None else None
        return site, self._refs.get(id(site), []) if site is not None else []


def _run_step(ctx: CheckContext, step: Step, wheres: _WhereIndex) -> None:
    if isinstance(step, WaitStep):
        if _event_of_wait(ctx, step):
            if step.timeout_node is None:
                ctx.report(rules.WAIT_NO_TIMEOUT,
                           f"this wait has no timeout: the run waits forever if no {step.event} comes",
                           _key(step.node, "wait") or step.node, _TIMEOUT_HINT)
            if step.where is not None and step.where.expr is not None:
                _where(ctx, step, *wheres.of(step))
    elif isinstance(step, EventStep) and step.event == ASK:
        _ask(ctx, step)


def _hook_step(ctx: CheckContext, hook: Hook, step: Step) -> None:
    """A hook's action runs inside an emit or inside the step that fired it: it cannot wait."""
    whose = {"registered": "a registered hook's action", "scheduled": "a scheduled task's action"}.get(
        hook.kind, "a hook's action")
    trigger = "{cron: ...}" if hook.kind == "scheduled" else "{event: NAME}"
    fires = "it runs when its time comes" if hook.kind == "scheduled" else "it runs when its event fires"
    hint = (f"waiting is for runs: put the wait in a chain that starts by itself (triggers: [{trigger}] in its "
            "chain file), and keep in the action what need not wait")
    if isinstance(step, WaitStep):
        ctx.report(rules.WAIT_SHAPE, f"{whose} cannot wait: {fires}, not as a run of its own",
                   _key(step.node, "wait") or step.node, hint)
        _event_of_wait(ctx, step)
        return
    if not isinstance(step, EventStep) or not step.event or step.event_node is None:
        return
    if step.event == ASK:
        ctx.report(rules.WAIT_SHAPE, f"{whose} cannot ask the user and wait for the answer: {fires}, not as a run "
                                     "of its own", step.event_node,
                   hint + "; or tell the user without waiting with user.notify")
        return
    waits = _chains_that_wait(ctx).get(step.event)
    if waits is not None:
        ctx.report(rules.WAIT_SHAPE, f"{whose} cannot wait, and the chain {step.event} waits ({waits})",
                   step.event_node, hint)


# -- wait: ---------------------------------------------------------------------------


def _event_of_wait(ctx: CheckContext, step: WaitStep) -> bool:
    """Report a wait's event that is unknown, or not external; whether it is one to wait for."""
    if not step.event or step.event_node is None:
        return False  # no event, or a bad name: the builder said so
    spec = ctx.registry.get(step.event)
    if spec is None:
        external = [s.name for s in ctx.registry if s.kind == "external"]
        guess = closest(step.event, external) or (ctx.registry.suggest(step.event) if affordable(len(ctx.registry))
                                                  else None)
        hint = (f"did you mean '{guess}'?" if guess else
                "declare it under events: with its payload schema (an event that comes from outside)")
        ctx.report(rules.UNKNOWN_EVENT, f"unknown event '{step.event}'", step.event_node, hint)
        return False
    if spec.kind != "external":
        what = "a chain" if spec.kind == "chain" else "a tool"
        ctx.report(rules.WAIT_SHAPE, f"a wait waits for an external event; {step.event} is {what}: call it as a step",
                   step.event_node, f"write - {step.event}: {{...}} to run it; a wait is for an event declared under "
                                    "events: (it arrives by chainlang emit or POST /events/NAME)")
        return False
    return True


def _where(ctx: CheckContext, step: WaitStep, site: Any, infos: list[Any]) -> None:
    assert step.where is not None and step.where.expr is not None
    if site is None:
        return
    schema = getattr(ctx.registry.get(step.event), "params_schema", None)
    props = schema.get("properties") if isinstance(schema, dict) else None
    for info in infos:  # a step id comes before a payload field of the same name (`order`, not `order.result`)
        root = info.ref.segments[0]
        if (len(info.ref.segments) == 1 and info.binding is not None and info.binding.kind == "id" and isinstance(props, dict)
                and isinstance(root, Name) and root.name in props):
            ctx.report(rules.WAIT_WHERE, f"'{root.name}' here is the step with id {root.name}, not the field "
                                         f"{root.name} of the payload", ctx.expr_span(site.node, site.base + root.start,
                                                                                    site.base + root.end),
                       f"rename the step (its id: {root.name}): a step id comes before a payload field in a where")
    payload = [info for info in infos if info.kind == "payload"]
    hooklike = [info for info in infos if info.kind == "event"]
    for info in hooklike:  # a hook's condition reads its payload as `event.X`; a wait's where as bare names
        rest = ".".join(seg.name if isinstance(seg, Name) else str(getattr(seg, "value", "?"))
                        for seg in info.ref.segments[1:]) or "FIELD"
        ctx.report(rules.WAIT_WHERE, "in a wait's where, the payload's fields are bare names, not event.FIELD",
                   ctx.expr_span(site.node, site.base + info.ref.start, site.base + info.ref.end), f"write {rest}")
    if not payload and not hooklike:
        ctx.report(rules.WAIT_WHERE,
                   f"this where reads no field of the payload of {step.event}: it is the same for every event, so "
                   f"the first {step.event} after the wait began is taken, whatever it carries",
                   step.where.node, "compare a field of the payload (a bare name) with the run's value, such as "
                                    "draft_id == draft.result.id")
        return
    fields = {id(info.ref): info for info in payload if info.problem is None}
    for node in iter_nodes(step.where.expr):
        if isinstance(node, Compare) and node.op in ("==", "!=", "in", "not_in"):
            _comparison(ctx, site, node, fields, schema)


def _comparison(ctx: CheckContext, site: Any, node: Compare, fields: dict[int, Any], schema: Any) -> None:
    """A payload field compared with a value it can never equal: the where is never true (or always)."""
    pairs: list[tuple[Any, Any]]
    if node.op in ("in", "not_in"):
        pairs = [(node.left, _items(node.right))]
    else:
        pairs = [(node.left, node.right), (node.right, node.left)]
    for field, other in pairs:
        if other is None or not isinstance(field, Ref) or id(field) not in fields:
            continue
        field_type = ctx.analysis.type_of(field)
        other_type = T.check_expression(other, ctx.analysis.type_of)[0] if not isinstance(other, list) else \
            T.union(*(T.check_expression(item, ctx.analysis.type_of)[0] for item in other))
        name = field.dotted()
        never = "false" if node.op in ("==", "in") else "true"
        field_kinds, other_kinds = _kinds(field_type), _kinds(other_type)
        if field_kinds and other_kinds and not field_kinds & other_kinds:
            ctx.report(rules.WAIT_WHERE,
                       f"'{name}' is {_phrase(field_kinds)} in the payload, compared with {_phrase(other_kinds)}: "
                       f"never equal, so this comparison is always {never}",
                       _span(ctx, site, node), f"compare it with {_phrase(field_kinds)}" + (
                           f": {name} == true (or just {name})" if field_kinds == {"boolean"} else ""))
            return
        enum = _enum(schema, field)
        values = _literals(other)
        if enum is not None and values is not None:
            outside = [v for v in values if not any(_json_equal(v, e) for e in enum)]
            if outside:
                shown = ", ".join(_text(e) for e in enum)
                always = f": this comparison is always {never}" if len(outside) == len(values) else ""
                ctx.report(rules.WAIT_WHERE, f"{_text(outside[0])} is not a value '{name}' can have (one of {shown})"
                           + always, _span(ctx, site, node), _enum_hint(outside[0], enum))
            return


def _span(ctx: CheckContext, site: Any, node: Any) -> Any:
    return ctx.expr_span(site.node, site.base + node.start, site.base + node.end)


def _items(node: Any) -> list[Any] | None:
    """The items of a written-out list, the container of `in` (other containers: not judged)."""
    return list(node.items) if isinstance(node, ListLit) else None


def _kinds(t: Any) -> set[str] | None:
    """The JSON kinds a type's values have (None: some are unknown)."""
    out: set[str] = set()
    for member in T.members(t):
        k = T.kind(member)
        if k is None:
            return None
        out.add(k)
    return out


_NAMES = {"string": "a string", "number": "a number", "boolean": "a boolean", "null": "null", "list": "a list",
          "object": "an object"}


def _phrase(kinds: set[str]) -> str:
    return " or ".join(_NAMES.get(k, k) for k in sorted(kinds))


def _enum(schema: Any, field: Ref) -> list[Any] | None:
    """The enum of the payload field `field` reads, from the event's payload schema."""
    for seg in field.segments:
        if not isinstance(seg, (Name, Key)) or not isinstance(schema, dict):
            return None
        props = schema.get("properties")
        schema = props.get(seg.name if isinstance(seg, Name) else seg.value) if isinstance(props, dict) else None
    enum = schema.get("enum") if isinstance(schema, dict) else None
    return enum if isinstance(enum, list) and enum else None


def _literals(other: Any) -> list[Any] | None:
    nodes = other if isinstance(other, list) else [other]
    if not all(isinstance(n, Literal) for n in nodes):
        return None
    return [n.value for n in nodes]


def _json_equal(a: Any, b: Any) -> bool:
    from chainlang.expr.values import json_equal

    return bool(json_equal(a, b))


def _text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else f"'{value}'"


def _enum_hint(value: Any, enum: list[Any]) -> str:
    texts = [e for e in enum if isinstance(e, str)]
    guess = closest(value, texts) if isinstance(value, str) else None
    return f"did you mean '{guess}'?" if guess else "compare it with one of the values of the enum"


# -- user.ask ---------------------------------------------------------------------------


def _ask(ctx: CheckContext, step: EventStep) -> None:
    node = step.node if isinstance(step.node, MapNode) else None
    if step.foreach is not None:
        ctx.report(rules.WAIT_SHAPE, "user.ask cannot run once per item of a foreach: it asks one question and waits",
                   _key(node, "foreach") or step.event_node or step.node,
                   "ask one question about all the items (name them in the question; the answers in choices or a "
                   "schema)")
        return
    misplaced = False
    for key, why in (("timeout", "its timeout is a param: user.ask: {question: ..., timeout: 1d}"),
                     ("retry", "it waits for an answer: there is nothing to retry")):
        key_node = _key(node, key)
        if key_node is not None:
            misplaced = misplaced or key == "timeout"
            ctx.report(rules.WAIT_SHAPE, f"a step {key}: does not apply to user.ask", key_node, why)
    if step.params_broken:
        return
    if "choices" in step.param_keys and "schema" in step.param_keys:
        ctx.report(rules.WAIT_SHAPE, "user.ask takes choices or a schema, not both", step.param_keys["schema"],
                   "choices lists the answers accepted; a schema checks an answer of any shape (its enum is a list "
                   "of answers too)")
    timeout = step.params.get("timeout")
    if timeout is None:
        if not misplaced:
            ctx.report(rules.WAIT_NO_TIMEOUT, "this user.ask has no timeout: the run waits forever if nobody answers",
                       step.event_node or step.node,
                       "add timeout: 7d to its params (the step fails with type timeout then; on_error: continue goes "
                       "on without an answer)")
        return
    if timeout.literal and isinstance(timeout.data, str) and timeout.node is not None:
        seconds = parse_duration(timeout.data)
        if seconds is None:
            ctx.report(rules.BAD_DURATION, f"the timeout of user.ask: '{timeout.data}' is not a duration",
                       timeout.node, DURATION_HINT)
        elif seconds <= 0 or seconds > MAX_DURATION:
            ctx.report(rules.BAD_DURATION, f"the timeout of user.ask: '{timeout.data}' is out of range (more than 0, "
                                           f"at most {MAX_DURATION_TEXT})", timeout.node,
                       "a longer wait belongs to a scheduled task (task.schedule)" if seconds > 0 else None)


# -- helpers ----------------------------------------------------------------------------


def _key(node: AnyNode | None, key: str) -> ScalarNode | None:
    return node.key_node(key) if isinstance(node, MapNode) else None


def _chains_that_wait(ctx: CheckContext) -> dict[str, str]:
    """The named chains of the project that wait (a wait, a user.ask, or a call of one that
    waits), each with where: computed once per project."""
    memo = ctx.project.memo
    if "waits.chains" in memo:
        return memo["waits.chains"]  # type: ignore[no-any-return]
    named = ctx.project.named
    found: dict[str, str] = {}
    callers: dict[str, list[tuple[str, str]]] = {}  # callee → (caller, where it calls)
    for name, chain in named.items():
        for step in walk_steps(chain.steps):
            if isinstance(step, WaitStep) or (isinstance(step, EventStep) and step.event == ASK):
                found.setdefault(name, f"{_where_text(chain, step)}: {'a wait' if isinstance(step, WaitStep) else ASK}")
            elif isinstance(step, EventStep) and step.event in named and step.event != name:
                callers.setdefault(step.event, []).append((name, _where_text(chain, step)))
    queue = list(found)
    while queue:  # a chain that calls a chain that waits waits too (each chain once: linear)
        callee = queue.pop()
        for caller, at in callers.get(callee, ()):
            if caller not in found:
                found[caller] = f"{at} calls {callee}"
                queue.append(caller)
    memo["waits.chains"] = found
    return found


def _where_text(chain: Chain, step: Step) -> str:
    return f"{Path(chain.file).name}:{step.node.line}" if chain.file else f"line {step.node.line}"
