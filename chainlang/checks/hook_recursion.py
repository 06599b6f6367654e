"""CL044: a hook whose action can re-trigger itself (directly, through other hooks or
sub-chains) without a bound.

A hook "reaches" another when its action (or a named chain it runs) calls an event
that the other hook triggers on. A loop of hooks is bounded as soon as one hook on
it sets max_depth, so only loops made entirely of unbounded hooks are reported.
"""

from __future__ import annotations

from collections import deque
from fnmatch import fnmatchcase

from chainlang import rules
from chainlang.checks.base import CheckContext
from chainlang.checks.calls import transitive_events
from chainlang.checks.hook_order import universe
from chainlang.model.nodes import Hook

RULES = (rules.HOOK_RECURSION,)


def check(ctx: CheckContext) -> None:
    if not any(h.action and h.trigger and h.max_depth is None for h in ctx.chain.hooks):
        return
    # only unbounded hooks can carry an unbounded loop
    hooks = [h for h in universe(ctx) if h.trigger is not None and h.action and h.max_depth is None]
    calls = {id(h): transitive_events(h.action, ctx.project) for h in hooks}

    def fires(hook: Hook, caller: Hook) -> str | None:
        """The event through which `caller`'s action triggers `hook`, if any."""
        assert hook.trigger is not None
        return next((e for e in sorted(calls[id(caller)]) if fnmatchcase(e, hook.trigger.pattern)), None)

    # who each hook triggers, computed once: exact triggers by name, globs by matching
    exact: dict[str, list[Hook]] = {}
    globs: list[Hook] = []
    for h in hooks:
        assert h.trigger is not None
        if any(c in h.trigger.pattern for c in "*?["):
            globs.append(h)
        else:
            exact.setdefault(h.trigger.pattern, []).append(h)

    def triggered_by(caller: Hook) -> list[Hook]:
        found: dict[int, Hook] = {}
        for event in calls[id(caller)]:
            for h in exact.get(event, ()):
                found[id(h)] = h
            for h in globs:
                if fnmatchcase(event, h.trigger.pattern):  # type: ignore[union-attr]
                    found[id(h)] = h
        return list(found.values())

    triggers = {id(caller): triggered_by(caller) for caller in hooks}

    for hook in ctx.chain.hooks:
        if hook.trigger is None or not hook.action or hook.max_depth is not None:
            continue
        loop = _shortest_loop(hook, triggers)
        if loop is None:
            continue
        trigger = f"{hook.trigger.phase}:{hook.trigger.pattern}"
        if len(loop) == 1:
            event = fires(hook, hook)
            message = f"hook {hook.label} re-triggers itself: its action calls {event}, which matches its trigger '{trigger}'"
        else:
            names = " → ".join(h.label for h in loop + [hook])
            message = f"hook {hook.label} can re-trigger itself through other hooks: {names}"
        ctx.report(rules.HOOK_RECURSION, message, hook.trigger.node,
                   "add max_depth: N to one hook of the loop to bound it, or change the action")


def _shortest_loop(start: Hook, triggers: dict[int, list[Hook]]) -> list[Hook] | None:
    """Breadth-first: the shortest chain of hooks start → ... → start, as [start, ...]."""
    parent: dict[int, Hook | None] = {id(start): None}
    queue: deque[Hook] = deque([start])
    while queue:
        current = queue.popleft()
        for other in triggers[id(current)]:
            if other is start:
                path = [current]
                while parent[id(path[-1])] is not None:
                    path.append(parent[id(path[-1])])  # type: ignore[arg-type]
                return list(reversed(path))
            if id(other) not in parent:
                parent[id(other)] = current
                queue.append(other)
    return None
