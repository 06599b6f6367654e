"""What `chainlang graph` draws of a chain's hooks (LANGUAGE.md §6): for each hook, in firing
order, its trigger, its condition and what it does (set params, cancel the step, or the events
of its action), and for a hook a step registers or schedules, that step. The hooks' own
graphs are not compiled here: a drawing needs their words, not their bindings."""

from __future__ import annotations

from dataclasses import dataclass

from chainlang.compile.firing_order import Orderable, firing_order
from chainlang.model.nodes import Chain, EventStep, Hook, walk_steps

__all__ = ["HookSummary", "hook_summaries"]

MAX_ACTION_EVENTS = 6  # events named in a hook's box at most (then "…")


@dataclass(frozen=True, slots=True)
class HookSummary:
    """A hook as `chainlang graph` draws it: where it comes from, what triggers it and what it does."""
    label: str  # its id, or "#N", or "registered by step P"
    kind: str  # "hook" (under hooks:), "registered" (task.register), "scheduled" (task.schedule)
    origin: str | None  # the step path that registers or schedules it
    phase: str | None  # pre | post | error; None for a scheduled action
    pattern: str | None  # the event name or glob it triggers on
    condition: str | None
    does: tuple[str, ...]  # "set subject, cc", "cancel", "action: user.notify, email.send"


def hook_summaries(chain: Chain) -> tuple[HookSummary, ...]:
    """The chain's hooks in firing order (as `ExecutionGraph.hooks` lists their labels)."""
    hooks = chain.hooks
    order = firing_order([Orderable(h.id, h.priority, [name for name, _ in h.after]) for h in hooks])
    return tuple(_summary(hooks[i]) for i in order)


def _summary(hook: Hook) -> HookSummary:
    does: list[str] = []
    if hook.set:
        does.append("set " + ", ".join(hook.set))
    if hook.cancel:
        does.append("cancel")
    events = list(dict.fromkeys(s.event for s in walk_steps(hook.action) if isinstance(s, EventStep) and s.event))
    if events:
        shown = events[:MAX_ACTION_EVENTS] + (["…"] if len(events) > MAX_ACTION_EVENTS else [])
        does.append("action: " + ", ".join(shown))
    trigger = hook.trigger
    return HookSummary(hook.label, hook.kind, hook.origin, trigger.phase if trigger else None,
                       trigger.pattern if trigger else None, hook.condition.text if hook.condition else None,
                       tuple(does))
