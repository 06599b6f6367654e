"""The events hook triggers name.

- CL041: a hook triggers on an event that is neither a tool, a named chain, nor declared.
- CL058: an `error:` hook on events that cannot fail: an external event (declared under
  `events:`, fired from outside) has no tool behind it, so no step of it ever ends
  `failed` and the hook would never fire. An error, not a warning: such a hook is dead
  code that looks like a safety net (the author expects it to catch something).
"""

from __future__ import annotations

from typing import Any

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.expr import types as T

RULES = (rules.HOOK_UNKNOWN_EVENT, rules.ERROR_HOOK_NEVER_FIRES)

# the `error` field of an error: hook's payload (§6.1): what the failed step's error says
ERROR_FIELDS = T.Object({"type": T.STRING, "message": T.STRING}, strict=True)


def error_payload_type(params_schema: Any) -> T.Type:
    """The payload an `error:` hook sees: `{error: {type, message}, params}`, the params
    typed by the event's params schema (unknown, never wrong, when there is none)."""
    params = T.type_from_schema(params_schema) if params_schema else T.ANY
    return T.Object({"error": ERROR_FIELDS, "params": params}, strict=True)


def check(ctx: CheckContext) -> None:
    for hook in ctx.chain.hooks:
        trigger = hook.trigger
        if trigger is None:
            continue
        pattern = trigger.pattern
        if any(c in pattern for c in "*?["):
            matched = ctx.registry.match(pattern)
            if not matched:
                ctx.report(rules.HOOK_UNKNOWN_EVENT, f"trigger '{trigger.phase}:{pattern}' matches no known event", trigger.node,
                           "declare the events under events:, or check the glob")
            elif trigger.phase == "error":
                _never_fails(ctx, trigger, matched)
            continue
        if pattern in ctx.registry:
            if trigger.phase == "error":
                _never_fails(ctx, trigger, [pattern])
            continue
        guess = ctx.registry.suggest(pattern)
        hint = f"did you mean '{trigger.phase}:{guess}'?" if guess else (
            f"declare it: events: {{{pattern}: {{description: ..., payload: {{type: object}}}}}}")
        ctx.report(rules.HOOK_UNKNOWN_EVENT, f"trigger on unknown event '{pattern}'", trigger.node, hint)


def _never_fails(ctx: CheckContext, trigger: Any, events: list[str]) -> None:
    """CL058 when every event the trigger matches is external (a glob that also matches a
    tool or a chain can fire)."""
    for name in events:
        spec = ctx.registry.get(name)
        if spec is None or spec.kind != "external":
            return
    what = (f"'{events[0]}' is an external event" if len(events) == 1 and events[0] == trigger.pattern
            else f"every event '{trigger.pattern}' matches is external ({', '.join(events[:3])}"
                 f"{', ...' if len(events) > 3 else ''})")
    ctx.report(rules.ERROR_HOOK_NEVER_FIRES, f"trigger 'error:{trigger.pattern}' never fires: {what}, "
               "which has no tool and never fails", trigger.node,
               f"to react to the event when it arrives, use trigger: post:{trigger.pattern}")
