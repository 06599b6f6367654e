"""CL042 / CL043: `after` names a hook that does not exist, or `after` lists form a cycle.

Hook order is compiled once (chainlang.compile.firing_order): a topological sort of the
`after` lists that picks the highest priority among the hooks free to go; a cycle leaves
no hook of it free, so it is an error here. The hooks that can run together are this
file's hooks plus every hooks file of the project.
"""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext, suggestion
from chainlang.checks.cycles import find_cycles
from chainlang.model.nodes import Hook

RULES = (rules.HOOK_AFTER_UNKNOWN, rules.HOOK_AFTER_CYCLE, rules.DUPLICATE_ID)


def universe(ctx: CheckContext) -> list[Hook]:
    hooks = list(ctx.chain.hooks)
    for chain in ctx.project.chains:
        if chain.kind == "hooks" and chain is not ctx.chain:
            hooks.extend(chain.hooks)
    return hooks


def check(ctx: CheckContext) -> None:
    hooks = universe(ctx)
    by_id = {h.id: h for h in hooks if h.id}
    mine = {id(h) for h in ctx.chain.hooks}
    for hook in ctx.chain.hooks:  # hooks in force together name their firings by id: one each
        other = next((h for h in hooks if h.id == hook.id and id(h) not in mine), None) if hook.id else None
        if other is not None and hook.id_node is not None:
            ctx.report(rules.DUPLICATE_ID, f"hook id '{hook.id}' is also used by {other.file or 'another hook'}",
                       hook.id_node, "hooks in force together need different ids: rename one")
    for hook in ctx.chain.hooks:
        for name, node in hook.after:
            if name not in by_id:
                ctx.report(rules.HOOK_AFTER_UNKNOWN, f"'after' names no hook '{name}'", node,
                           suggestion(name, by_id) or "give the other hook that id, or remove it from after")
            elif by_id[name] is hook:
                ctx.report(rules.HOOK_AFTER_CYCLE, f"hook '{name}' cannot run after itself", node)
    _cycles(ctx, hooks, by_id)


def _cycles(ctx: CheckContext, hooks: list[Hook], by_id: dict[str, Hook]) -> None:
    mine = {id(h) for h in ctx.chain.hooks}

    def edges(name: str) -> list[str]:
        return [a for a, _ in by_id[name].after if a in by_id and a != name]

    for cycle in find_cycles([h.id for h in hooks if h.id], edges):
        _report(ctx, cycle, by_id, mine)


def _report(ctx: CheckContext, cycle: list[str], by_id: dict[str, Hook], mine: set[int]) -> None:
    # report at the first hook of the cycle that lives in this file
    for name in cycle:
        hook = by_id[name]
        if id(hook) in mine:
            nxt = cycle[(cycle.index(name) + 1) % len(cycle)]
            node = next((n for a, n in hook.after if a == nxt), hook.id_node or hook.node)
            loop = " → ".join(cycle[cycle.index(name):] + cycle[: cycle.index(name)] + [name])
            ctx.report(rules.HOOK_AFTER_CYCLE, f"hooks order themselves in a cycle: {loop}", node,
                       "remove one of the after entries")
            return
