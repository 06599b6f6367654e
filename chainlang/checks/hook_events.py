"""CL041: a hook triggers on an event that is neither a tool, a named chain, nor declared."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext

RULES = (rules.HOOK_UNKNOWN_EVENT,)


def check(ctx: CheckContext) -> None:
    for hook in ctx.chain.hooks:
        trigger = hook.trigger
        if trigger is None:
            continue
        pattern = trigger.pattern
        if any(c in pattern for c in "*?["):
            if not ctx.registry.match(pattern):
                ctx.report(rules.HOOK_UNKNOWN_EVENT, f"trigger '{trigger.phase}:{pattern}' matches no known event", trigger.node,
                           "declare the events under events:, or check the glob")
            continue
        if pattern in ctx.registry:
            continue
        guess = ctx.registry.suggest(pattern)
        hint = f"did you mean '{trigger.phase}:{guess}'?" if guess else (
            f"declare it: events: {{{pattern}: {{description: ..., payload: {{type: object}}}}}}")
        ctx.report(rules.HOOK_UNKNOWN_EVENT, f"trigger on unknown event '{pattern}'", trigger.node, hint)
