"""What a list of steps calls, directly and through the named chains it runs (shared by call-graph checks)."""

from __future__ import annotations

from chainlang.checks.base import Project
from chainlang.model.nodes import Chain, EventStep, Step, walk_steps


def direct_calls(steps: list[Step]) -> list[EventStep]:
    return [s for s in walk_steps(steps) if isinstance(s, EventStep) and s.event]


def chain_steps(chain: Chain) -> list[Step]:
    """A chain's own steps and its hooks' actions: all that running it may call. Actions that a
    step registers or schedules run later, in runs of their own, so they are not calls."""
    return list(chain.steps) + [s for hook in chain.hooks if hook.kind == "hook" for s in hook.action]


def transitive_events(steps: list[Step], project: Project) -> set[str]:
    """Every event name `steps` may call, following named chains (bounded by the project's size)."""
    events: set[str] = set()
    todo = [steps]
    seen_chains: set[str] = set()
    while todo:
        for step in direct_calls(todo.pop()):
            events.add(step.event)
            callee = project.named.get(step.event)
            if callee is not None and step.event not in seen_chains:
                seen_chains.add(step.event)
                todo.append(chain_steps(callee))
    return events
