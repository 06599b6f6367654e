"""CL035: a step calls an event outside its chain's `allow` list."""

from __future__ import annotations

from fnmatch import fnmatchcase

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.checks.calls import chain_steps, direct_calls

RULES = (rules.NOT_ALLOWED,)


def check(ctx: CheckContext) -> None:
    allow = ctx.chain.allow
    if allow is None:
        return
    patterns = [p for p, _ in allow]
    for step in direct_calls(chain_steps(ctx.chain)):
        if not any(fnmatchcase(step.event, p) for p in patterns):
            ctx.report(rules.NOT_ALLOWED, f"'{step.event}' is not in this chain's allow list", step.event_node or step.node,
                       f"add '{step.event}' (or a glob such as '{step.event.split('.')[0]}.*') to allow:, or remove the step")
