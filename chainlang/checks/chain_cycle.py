"""CL045: named chains that call each other in a cycle (a chain is an event; calling runs it).

A cycle is intended recursion when a chain on it sets `limits.max_depth`: that bounds it
at run time, as max_depth does for a hook that re-triggers itself (CL044)."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.checks.calls import chain_steps, direct_calls
from chainlang.checks.cycles import find_cycles

RULES = (rules.CHAIN_CYCLE,)


def check(ctx: CheckContext) -> None:
    me = ctx.chain.name
    if not me or ctx.project.named.get(me) is not ctx.chain:
        return
    named = ctx.project.named
    graph: dict[str, list[str]] | None = ctx.project.memo.get("chain_calls")
    if graph is None:  # the named-chain call graph, built once for all files
        graph = {name: sorted({s.event for s in direct_calls(chain_steps(chain)) if s.event in named})
                 for name, chain in named.items()}
        ctx.project.memo["chain_calls"] = graph

    def edges(name: str) -> list[str]:
        return graph[name]

    for cycle in find_cycles([me], edges):
        if me not in cycle or any(named[name].limits.max_depth_set for name in cycle):
            continue
        i = cycle.index(me)
        order = cycle[i:] + cycle[:i]
        callee = order[1] if len(order) > 1 else me
        step = next(s for s in direct_calls(chain_steps(ctx.chain)) if s.event == callee)
        loop = " → ".join(order + [me])
        ctx.report(rules.CHAIN_CYCLE, f"chains call each other in a cycle: {loop}", step.event_node or step.node,
                   "break the cycle, or bound the recursion with limits: {max_depth: N} on one of these chains")
