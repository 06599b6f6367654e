"""Cycle finding for small dependency graphs (hook order, hook re-triggering, chain calls).

Iterative, so a hostile file with thousands of nodes cannot exhaust the Python stack.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

N = TypeVar("N", bound=Hashable)


def find_cycles(nodes: Iterable[N], edges: Callable[[N], Iterable[N]]) -> list[list[N]]:
    """One cycle per back edge found by depth-first search, each as [a, b, ..., a-less]: a → b → ... → a."""
    state: dict[N, int] = {}  # 1 on the stack, 2 finished
    cycles: list[list[N]] = []
    seen: set[frozenset[N]] = set()
    for start in nodes:
        if start in state:
            continue
        path: list[N] = [start]
        stack = [iter(edges(start))]
        state[start] = 1
        while stack:
            advanced = False
            for nxt in stack[-1]:
                mark = state.get(nxt)
                if mark == 1:
                    cycle = path[path.index(nxt):]
                    key = frozenset(cycle)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(cycle)
                elif mark is None:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(edges(nxt)))
                    advanced = True
                    break
            if not advanced:
                state[path.pop()] = 2
                stack.pop()
    return cycles


def reachable(start: N, edges: Callable[[N], Iterable[N]]) -> set[N]:
    """Every node reachable from `start` by one or more edges."""
    out: set[N] = set()
    todo = list(edges(start))
    while todo:
        node = todo.pop()
        if node not in out:
            out.add(node)
            todo.extend(edges(node))
    return out
