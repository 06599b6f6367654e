"""The firing order of hooks (LANGUAGE.md §6): the one function every place that orders
hooks uses — the compiled hook set of a run or an emit, a sub-chain's hooks merged with
its caller's, and the `hooks` list of `chainlang graph`.

A topological sort of the `after` lists that picks by priority: among the hooks whose
`after` hooks have all been placed, the one with the highest `priority` goes next, ties
in the order the hooks were given (their source order). So `after` delays a hook only
as long as it must: with `a` (priority 10, after `b`), `b` (0), `c` (20), `d` and `e`
(-5), the order is c, b, a, d, e — `a` goes as soon as `b` is placed, before the
lower-priority `d` and `e`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Orderable", "firing_order"]


@dataclass(frozen=True, slots=True)
class Orderable:
    """What the order of one hook depends on."""

    id: str | None  # the name `after` lists use; None: no other hook can name it
    priority: int = 0
    after: Iterable[str] = ()


def firing_order(hooks: Sequence[Orderable]) -> list[int]:
    """The positions of `hooks` (given in source order) in firing order.

    An `after` naming no hook of `hooks` is ignored (the checker reports it, CL042, where
    it is an error; at run time a sub-chain's hook may name one that is not in force).
    When two hooks share an id, `after` names the first. An `after` cycle is a static
    error (CL043) and never reaches a run; should one get here all the same, the order
    stays total: the hook that would go next were it not for the cycle (highest
    priority, then source order) is placed, and the sort goes on."""
    first: dict[str, int] = {}
    for i, hook in enumerate(hooks):
        if hook.id and hook.id not in first:
            first[hook.id] = i
    waiting_on: list[set[int]] = []  # per hook: the hooks it must follow, not yet placed
    followers: list[list[int]] = [[] for _ in hooks]  # per hook: the hooks that follow it
    for i, hook in enumerate(hooks):
        before = {first[name] for name in hook.after if name in first} - {i}
        waiting_on.append(before)
        for j in before:
            followers[j].append(i)

    def key(i: int) -> tuple[int, int]:
        return (-hooks[i].priority, i)

    ready = [key(i) for i in range(len(hooks)) if not waiting_on[i]]
    heapq.heapify(ready)
    placed = [False] * len(hooks)
    order: list[int] = []
    while len(order) < len(hooks):
        if not ready:  # only a cycle is left: break it where the order would go next
            stuck = min((i for i in range(len(hooks)) if not placed[i]), key=key)
            waiting_on[stuck].clear()
            heapq.heappush(ready, key(stuck))
        _, i = heapq.heappop(ready)
        placed[i] = True
        order.append(i)
        for j in followers[i]:
            waiting_on[j].discard(i)
            if not waiting_on[j] and not placed[j]:
                heapq.heappush(ready, key(j))
    return order
