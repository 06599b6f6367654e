"""CL018: two steps (or two hooks) of a file share an id."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.load.loader import ScalarNode
from chainlang.model.nodes import walk_steps

RULES = (rules.DUPLICATE_ID,)


def check(ctx: CheckContext) -> None:
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    _report(ctx, [(s.id, s.id_node) for s in steps if s.id and s.id_node], "step")
    _report(ctx, [(h.id, h.id_node) for h in ctx.chain.hooks if h.id and h.id_node], "hook")


def _report(ctx: CheckContext, named: list[tuple[str, ScalarNode]], what: str) -> None:
    first: dict[str, ScalarNode] = {}
    for name, node in named:
        if name in first:
            seen = first[name]
            ctx.report(rules.DUPLICATE_ID, f"{what} id '{name}' is already used at line {seen.line}, column {seen.column}", node,
                       f"{what} ids must be unique in a file; rename one")
        else:
            first[name] = node
