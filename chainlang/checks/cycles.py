"""Cycle finding for small dependency graphs (hook order, hook re-triggering, chain calls).

Iterative, so a hostile file with thousands of nodes cannot exhaust the Python stack.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Iterator, TypeVar

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


def strongly_connected(nodes: Iterable[N], edges: Callable[[N], Iterable[N]]) -> dict[N, int]:
    """Tarjan's strongly connected components, iterative: node → component number.

    Linear in nodes + edges; two nodes share a number exactly when each reaches the other.
    """
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    component: dict[N, int] = {}
    counter = 0
    components = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[N, Iterator[N]]] = [(root, iter(edges(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges(child))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component
