"""CL014: a step calls an event that no tool, named chain or declaration provides."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.model.nodes import EventStep, walk_steps
from chainlang.diagnostics.suggest import affordable

RULES = (rules.UNKNOWN_EVENT,)


def check(ctx: CheckContext) -> None:
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    for step in steps:
        if not isinstance(step, EventStep) or not step.event or step.event_node is None:
            continue
        spec = ctx.registry.get(step.event)
        if spec is None:
            guess = ctx.registry.suggest(step.event) if affordable(len(ctx.registry)) else None
            hint = f"did you mean '{guess}'?" if guess else "list the known events with `chainlang events`; add tools with --tools"
            ctx.report(rules.UNKNOWN_EVENT, f"unknown event '{step.event}'", step.event_node, hint)
        elif spec.kind == "external":
            ctx.report(rules.UNKNOWN_EVENT, f"'{step.event}' is an external event: it arrives from outside and cannot be called as a step",
                       step.event_node, f"react to it with a hook (trigger: post:{step.event}), or fire it with `chainlang emit`")
