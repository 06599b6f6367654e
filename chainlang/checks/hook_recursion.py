"""CL044: a hook whose action can re-trigger itself (directly, through other hooks or sub-chains)
must bound that with max_depth."""

from __future__ import annotations

from fnmatch import fnmatchcase

from chainlang import rules
from chainlang.checks.base import CheckContext
from chainlang.checks.calls import transitive_events
from chainlang.checks.hook_order import universe
from chainlang.graphs import reachable
from chainlang.model.nodes import Hook

RULES = (rules.HOOK_RECURSION,)


def check(ctx: CheckContext) -> None:
    if not any(h.action and h.trigger for h in ctx.chain.hooks):
        return
    hooks = [h for h in universe(ctx) if h.trigger is not None]
    calls = {id(h): transitive_events(h.action, ctx.project) for h in hooks}
    by_key = {id(h): h for h in hooks}

    def fires(hook: Hook, events: set[str]) -> bool:
        assert hook.trigger is not None
        return any(fnmatchcase(e, hook.trigger.pattern) for e in events)

    def edges(key: int) -> list[int]:
        return [id(other) for other in hooks if fires(other, calls[key])]

    for hook in ctx.chain.hooks:
        if hook.trigger is None or not hook.action or hook.max_depth is not None:
            continue
        if id(hook) in reachable(id(hook), edges):
            direct = fires(hook, calls[id(hook)])
            how = "directly" if direct else "through other hooks or chains"
            ctx.report(rules.HOOK_RECURSION, f"hook {hook.label} can re-trigger itself {how}: its action calls an event that "
                       f"matches its trigger '{hook.trigger.phase}:{hook.trigger.pattern}'", hook.trigger.node,
                       "add max_depth: N to bound the recursion, or change the action")
    del by_key
