"""CL060–CL062: the `triggers:` of a chain file, checked against the project (LANGUAGE.md §12).

- CL060 trigger-cron: a cron that does not parse or never fires (`0 8 30 2 *`), a `tz`
  that is not a zone of the IANA database.
- CL061 trigger-event: an event that is neither declared (`events:`), a tool, nor a named
  chain (with a "did you mean").
- CL062 trigger-inputs: a cron trigger's `inputs` that are not the chain's inputs or do
  not fit their schemas, or leave a required one out; an event whose payload (its declared
  schema) cannot fill the chain's inputs: not an object, a field the chain has no input
  for (the chain would refuse it), a required input the payload may lack, a field whose
  type is not the input's.

An event trigger's `where` is typed like a hook condition on `post:EVENT` (bare names are
fields of the payload): its problems come under the rules of every expression (CL021,
CL027...). CL063 (the shape of a trigger) is reported when the file is read
(model/build_triggers.py).
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import did_you_mean

RULES = (rules.TRIGGER_CRON, rules.TRIGGER_EVENT, rules.TRIGGER_INPUTS, rules.BAD_TRIGGER)

_SAME_TYPE = {"integer": {"integer", "number"}, "number": {"number", "integer"}}


def check(ctx: CheckContext) -> None:
    chain = ctx.chain
    for trigger in getattr(chain, "triggers", ()):
        if trigger.kind == "cron":
            _cron(ctx, trigger)
            _cron_inputs(ctx, trigger)
        elif _event_known(ctx, trigger):
            _where(ctx, trigger)
            _payload_fills_inputs(ctx, trigger)


# -- cron


def cron_problem(expr: str) -> str | None:
    """Why a cron expression cannot be a trigger's (None: it fires)."""
    from chainlang.schedules import ScheduleError, _check_cron, _cron_next

    try:
        _check_cron(expr)
        _cron_next(expr, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except ScheduleError as exc:
        return str(exc)
    except (StopIteration, OverflowError):
        return f"cron {expr!r} never fires (no date matches all its fields)"
    return None


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    from zoneinfo import available_timezones

    return frozenset(available_timezones())


def zone_problem(name: str) -> str | None:
    """Why `name` is not a time zone (None: it is one)."""
    from zoneinfo import ZoneInfo

    if name in _zones() or name == "UTC":
        return None
    try:
        ZoneInfo(name)
        return None
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        return f"unknown time zone {name!r}"


def _cron(ctx: CheckContext, trigger: Any) -> None:
    problem = cron_problem(trigger.cron)
    if problem is not None:
        ctx.report(rules.TRIGGER_CRON, problem, trigger.cron_node or trigger.node,
                   "'0 8 * * 1-5' is 08:00 on weekdays; a day-of-month must exist in the month it names")
    if trigger.tz is not None and zone_problem(trigger.tz) is not None:
        guess = did_you_mean(trigger.tz, sorted(_zones()))
        ctx.report(rules.TRIGGER_CRON, f"unknown time zone {trigger.tz!r}", trigger.tz_node or trigger.node,
                   guess or "write an IANA zone name such as Europe/Berlin or America/New_York (default: UTC)")


def _cron_inputs(ctx: CheckContext, trigger: Any) -> None:
    from chainlang.schemas.cache import messages as validate_params

    declared = ctx.chain.inputs
    where = trigger.inputs_node or trigger.node
    for name, value in trigger.inputs.items():
        node = _value_node(trigger.inputs_node, name) or where
        if name not in declared:
            hint = did_you_mean(name, list(declared))
            ctx.report(rules.TRIGGER_INPUTS, f"'{name}' is not an input of this chain (declared: "
                       f"{', '.join(sorted(declared)) or 'none'})", node, hint)
            continue
        for message in validate_params(declared[name].schema, value):
            ctx.report(rules.TRIGGER_INPUTS, f"input '{name}': {message}", node)
    for name, spec in declared.items():
        if name not in trigger.inputs and "default" not in spec.schema:
            ctx.report(rules.TRIGGER_INPUTS, f"the trigger does not give the required input '{name}'", where,
                       f"add it: inputs: {{{name}: ...}}, or give the input a default")


def _value_node(mapping: Any, key: str) -> Any:
    return mapping.get(key) if mapping is not None else None


# -- events


def _event_known(ctx: CheckContext, trigger: Any) -> bool:
    name = trigger.event
    if name in ctx.registry:
        return True
    guess = ctx.registry.suggest(name)
    hint = f"did you mean '{guess}'?" if guess else (
        f"declare it: events: {{{name}: {{description: ..., payload: {{type: object}}}}}}")
    ctx.report(rules.TRIGGER_EVENT, f"trigger on unknown event '{name}': it is neither declared (events:) nor a tool",
               trigger.event_node or trigger.node, hint)
    return False


def payload_schema(ctx: CheckContext, name: str) -> Any:
    """The schema of what `post:NAME` carries: a tool's result, an external event's payload."""
    spec = ctx.registry.get(name)
    return getattr(spec, "result_schema", None) if spec is not None else None


def _where(ctx: CheckContext, trigger: Any) -> None:
    """Type `where` as the condition of a hook on post:EVENT, with the hook machinery."""
    from chainlang.checks.scope import Analyser, Document, ExprSite, Scope
    from chainlang.expr import types as T

    if trigger.where is None or trigger.where.expr is None:
        return
    schema = payload_schema(ctx, trigger.event)
    payload = T.type_from_schema(schema) if schema else T.ANY
    analyser = Analyser(ctx)
    analyser._collect = None  # nothing of this is compiled into the chain: only its problems matter
    doc = Document([])
    analyser.main_doc = doc
    site = ExprSite(trigger.where.node, trigger.where.expr, 0, "condition")
    analyser.site(site, doc, Scope(loops={}, payload=payload, trail=((0, "steps", -1),), current=None))
    for info in analyser.analysis.refs:
        if info.problem is not None:
            rule, message, hint, start, end = info.problem
            ctx.report(rule, message.replace("this hook's payload", f"the payload of {trigger.event}"),
                       ctx.expr_span(site.node, start, end), hint)
    from chainlang.checks.expr_types import _BY_CATEGORY, _split_hint

    for issue in site.issues:
        message, hint = _split_hint(issue.message)
        ctx.report(_BY_CATEGORY.get(issue.category, rules.TYPE_MISMATCH), message,
                   ctx.expr_span(site.node, issue.start, issue.end), hint)


def _payload_fills_inputs(ctx: CheckContext, trigger: Any) -> None:
    schema = payload_schema(ctx, trigger.event)
    at = trigger.event_node or trigger.node
    declared = ctx.chain.inputs
    if not isinstance(schema, dict) or not schema:
        return  # nothing known of the payload: checked when it arrives
    kind = schema.get("type")
    if kind is not None and kind != "object" and not (isinstance(kind, list) and "object" in kind):
        ctx.report(rules.TRIGGER_INPUTS, f"the payload of {trigger.event} is {kind}, not an object: it cannot be the "
                   "chain's inputs", at, "trigger on an event whose payload is an object of the chain's inputs")
        return
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    required = set(schema.get("required") or ())
    for field_name, field_schema in props.items():
        if field_name not in declared:
            ctx.report(rules.TRIGGER_INPUTS, f"the payload of {trigger.event} has the field '{field_name}', which is "
                       "not an input of this chain (the chain would refuse it)", at,
                       f"declare it: inputs: {{{field_name}: {{type: ..., default: ...}}}}")
            continue
        wanted = declared[field_name].schema.get("type")
        given = field_schema.get("type") if isinstance(field_schema, dict) else None
        if isinstance(wanted, str) and isinstance(given, str) and given not in _SAME_TYPE.get(wanted, {wanted}):
            ctx.report(rules.TRIGGER_INPUTS, f"the payload's '{field_name}' is {given}, but the input '{field_name}' "
                       f"is {wanted}", at)
    for name, spec in declared.items():
        if "default" in spec.schema or name in required:
            continue
        why = "may be missing from" if name in props else "is not a field of"
        ctx.report(rules.TRIGGER_INPUTS, f"the required input '{name}' {why} the payload of {trigger.event}", at,
                   f"give the input a default, or make '{name}' a required field of the payload")
