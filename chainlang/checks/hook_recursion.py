"""CL044: a hook whose action can re-trigger itself (directly, through other hooks or
sub-chains) without a bound.

The graph has hooks and events as nodes: a hook points at every event its action may
call (following named chains), an event at every hook it triggers. A hook can re-trigger
itself exactly when it lies on a cycle, i.e. in a strongly connected component with more
than one node — computed once, in time linear in the graph (thousands of hooks sharing a
trigger would make hook-to-hook edges quadratic). A loop is bounded as soon as one hook on
it sets max_depth, so bounded hooks are left out of the graph. The loop shown in a message
is found by a search inside the component, for a bounded number of hooks.
"""

from __future__ import annotations

from collections import deque
from fnmatch import fnmatchcase

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.checks.calls import transitive_events
from chainlang.checks.hook_order import universe
from chainlang.checks.cycles import strongly_connected
from chainlang.model.nodes import Hook

RULES = (rules.HOOK_RECURSION,)

MAX_PATHS = 50  # loops spelled out per file; later hooks get the message without the path

Node = tuple[str, object]  # ("hook", id(hook)) or ("event", name)


def check(ctx: CheckContext) -> None:
    if not any(h.action and h.trigger and h.max_depth is None for h in ctx.chain.hooks):
        return
    hooks = [h for h in universe(ctx) if h.trigger is not None and h.action and h.max_depth is None]
    calls = {id(h): sorted(transitive_events(h.action, ctx.project)) for h in hooks}
    events = sorted({e for called in calls.values() for e in called})
    exact: dict[str, list[Hook]] = {}
    globs: list[Hook] = []
    for h in hooks:
        assert h.trigger is not None
        if any(c in h.trigger.pattern for c in "*?["):
            globs.append(h)
        else:
            exact.setdefault(h.trigger.pattern, []).append(h)
    triggered: dict[str, list[Hook]] = {
        e: exact.get(e, []) + [h for h in globs if fnmatchcase(e, h.trigger.pattern)]  # type: ignore[union-attr]
        for e in events
    }

    def edges(node: Node) -> list[Node]:
        kind, key = node
        if kind == "hook":
            return [("event", e) for e in calls[key]]  # type: ignore[index]
        return [("hook", id(h)) for h in triggered[key]]  # type: ignore[index]

    roots: list[Node] = [("hook", id(h)) for h in hooks]
    component = strongly_connected(roots, edges)
    sizes: dict[int, int] = {}
    for member in component.values():
        sizes[member] = sizes.get(member, 0) + 1
    shown = 0
    for hook in ctx.chain.hooks:
        if hook.trigger is None or not hook.action or hook.max_depth is not None:
            continue
        found = component.get(("hook", id(hook)))
        if found is None or sizes[found] < 2:
            continue
        number: int = found
        trigger = f"{hook.trigger.phase}:{hook.trigger.pattern}"
        loop = _shortest_loop(hook, triggered, calls, component, number) if shown < MAX_PATHS else None
        shown += 1
        if loop is not None and len(loop) == 1:
            event = next(e for e in calls[id(hook)] if any(h is hook for h in triggered[e]))
            message = f"hook {hook.label} re-triggers itself: its action calls {event}, which matches its trigger '{trigger}'"
        elif loop is not None:
            names = " → ".join(h.label for h in loop + [hook])
            message = f"hook {hook.label} can re-trigger itself through other hooks: {names}"
        else:
            message = f"hook {hook.label} can re-trigger itself through other hooks (trigger '{trigger}')"
        ctx.report(rules.HOOK_RECURSION, message, hook.trigger.node,
                   "add max_depth: N to one hook of the loop to bound it, or change the action")


def _shortest_loop(start: Hook, triggered: dict[str, list[Hook]], calls: dict[int, list[str]],
                   component: dict[Node, int], number: int) -> list[Hook] | None:
    """Breadth-first inside the component: the shortest chain of hooks start → ... → start."""
    parent: dict[int, Hook | None] = {id(start): None}
    seen_events: set[str] = set()
    queue: deque[Hook] = deque([start])
    while queue:
        current = queue.popleft()
        for event in calls[id(current)]:
            if event in seen_events or component.get(("event", event)) != number:
                continue
            seen_events.add(event)
            for other in triggered[event]:
                if other is start:
                    path = [current]
                    while parent[id(path[-1])] is not None:
                        path.append(parent[id(path[-1])])  # type: ignore[arg-type]
                    return list(reversed(path))
                if id(other) not in parent and component.get(("hook", id(other))) == number:
                    parent[id(other)] = current
                    queue.append(other)
    return None
