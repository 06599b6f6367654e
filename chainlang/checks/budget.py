"""CL036: a chain whose worst case provably makes more model calls than `limits.max_model_calls`.

Each event declares the model calls it makes each time it runs, at least (its `model_calls`
effect). The worst case of a chain adds them up: a sequence and a parallel group add, an
`if`/`then`/`else` takes the larger branch, a `foreach` over a list written out multiplies
by its length, `retry` multiplies a step by its attempts, and a call to a named chain (or a
`chain.run` with a literal path) adds the callee's worst case. What cannot be known before
the run counts for nothing: a `foreach` over a computed list, hooks, the chains that
`agent.chain` writes. So the number is a lower bound of the worst case, and an error means
some run of the chain as written can exceed the budget.

`max_tokens` has no static check: how many tokens a call uses is only known when it is made.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterator

from chainlang.checks.base import CheckContext, Project
from chainlang.diagnostics import rules
from chainlang.expr.ast import ListLit
from chainlang.model.nodes import (BlockStep, Chain, Condition, EventStep, FailStep, IfStep, Step, SwitchStep, TryStep,
                                   WaitStep)

RULES = (rules.OVER_BUDGET,)

SHOWN = 4  # parts of the worst case named in the message; the rest are counted
MAX_LOADED = 64  # chain files read from disk for `chain.run` paths, per project


@dataclass(frozen=True, slots=True)
class Part:
    """Model calls of one event, reached one way: `event` ×`calls` [via `via`] `where`."""

    event: str
    calls: int
    where: str  # in the file being reported: "at line 9", "in the foreach at line 7"
    line: int  # where it starts, for the order of the message
    via: str = ""  # the chain called from that file through which the calls come


Cost = dict[tuple[str, str, str], Part]  # (event, via, where) → part: merged, so it stays small


def total(cost: Cost) -> int:
    return sum(p.calls for p in cost.values())


def _add(into: Cost, parts: Iterator[Part] | list[Part]) -> None:
    for part in parts:
        if part.calls <= 0:
            continue
        key = (part.event, part.via, part.where)
        old = into.get(key)
        into[key] = part if old is None else Part(part.event, old.calls + part.calls, part.where,
                                                   min(old.line, part.line), part.via)


def _scaled(cost: Cost, factor: int, where: str, line: int) -> Cost:
    """`cost` run `factor` times, every part now located at `where` (the loop or retry that repeats it)."""
    out: Cost = {}
    _add(out, (Part(p.event, p.calls * factor, where, line, p.via) for p in cost.values()))
    return out


def literal_length(foreach: Condition | None) -> int | None:
    """The number of items of a `foreach` over a list written out (`[a, b]`, `"[1, 2, 3]"`), else None."""
    if foreach is None or foreach.expr is None:
        return None
    return len(foreach.expr.items) if isinstance(foreach.expr, ListLit) else None


class Budget:
    """Worst cases of the chains of one project, each computed once (kept in the project's memo)."""

    def __init__(self, ctx: CheckContext) -> None:
        self.registry = ctx.registry
        self.project = ctx.project
        self.costs: dict[int, Cost] = {}  # id(chain) → its worst case
        self.running: set[int] = set()  # chains being worked out: a call back to one counts for nothing
        self.keep: list[Chain] = []  # chains read from disk, kept alive (their ids are keys)
        self.loaded: dict[str, Chain | None] = {}

    # -- the chains a step runs --

    def callee(self, chain: Chain, step: EventStep) -> tuple[Chain, str] | None:
        named = self.project.named.get(step.event)
        if named is not None:
            return named, step.event
        if step.event != "chain.run":
            return None
        path = step.params.get("path")
        if path is None or not path.literal or not isinstance(path.data, str):
            return None
        target = self.chain_file(chain, path.data)
        return (target, path.data) if target is not None else None

    def chain_file(self, caller: Chain, path: str) -> Chain | None:
        """The chain that `chain.run {path}` runs, when the checker can find it: a file of the project,
        or one below the caller's directory (read once)."""
        full = os.path.realpath(os.path.join(os.path.dirname(caller.file) or ".", path))
        known = self.project.memo.get("budget_files")
        if known is None:
            known = {os.path.realpath(c.file): c for c in self.project.chains if c.kind == "chain"}
            self.project.memo["budget_files"] = known
        if full in known:
            return known[full]  # type: ignore[no-any-return]
        if full in self.loaded:
            return self.loaded[full]
        chain = None
        inside = not os.path.isabs(path) and ".." not in path.replace("\\", "/").split("/")
        if inside and len(self.loaded) < MAX_LOADED and os.path.isfile(full):
            chain = self._load(full)
        self.loaded[full] = chain
        return chain

    def _load(self, path: str) -> Chain | None:
        from chainlang.errors import UsageError
        from chainlang.model.files import load_file

        try:
            chain = load_file(path).chain
        except (OSError, UsageError):
            return None
        self.keep.append(chain)
        return chain if chain.kind == "chain" and chain.root is not None else None

    # -- worst cases --

    def chain_cost(self, chain: Chain) -> Cost:
        """The worst case of `chain`. Callees are worked out first, without recursion in Python
        (a long line of chains calling chains cannot exhaust the stack)."""
        todo: list[tuple[Chain, bool]] = [(chain, False)]
        while todo:
            current, ready = todo.pop()
            key = id(current)
            if key in self.costs:
                continue
            if ready:
                self.costs[key] = self.steps_cost(current, current.steps)
                self.running.discard(key)
                continue
            if key in self.running:
                continue
            self.running.add(key)
            todo.append((current, True))
            for step in _event_steps(current.steps):
                found = self.callee(current, step)
                if found is not None and id(found[0]) not in self.costs and id(found[0]) not in self.running:
                    todo.append((found[0], False))
        return self.costs[id(chain)]

    def steps_cost(self, chain: Chain, steps: list[Step]) -> Cost:
        out: Cost = {}
        for step in steps:
            _add(out, list(self.step_cost(chain, step).values()))
        return out

    def step_cost(self, chain: Chain, step: Step) -> Cost:
        if step.foreach is not None:
            items = literal_length(step.foreach)
            if items is None:
                return {}  # a computed list may be empty: nothing can be proven
            line = step.foreach.node.line
            return _scaled(self.body_cost(chain, step), items, f"in the foreach at line {line}", line)
        return self.body_cost(chain, step)

    def flow_cost(self, chain: Chain, step: "TryStep | SwitchStep | FailStep") -> Cost:
        if isinstance(step, FailStep):
            return {}
        costs = [self.steps_cost(chain, branch) for _, branch in step.branches()]
        if isinstance(step, SwitchStep):
            return max(costs, key=total, default={})
        cost: Cost = {}
        for branch_cost in costs:
            _add(cost, list(branch_cost.values()))
        return cost

    def body_cost(self, chain: Chain, step: Step) -> Cost:
        """One run of the step (one item of its foreach)."""
        if isinstance(step, BlockStep):
            return self.steps_cost(chain, step.steps)
        if isinstance(step, IfStep):
            then, else_ = self.steps_cost(chain, step.then), self.steps_cost(chain, step.else_)
            return then if total(then) >= total(else_) else else_
        if isinstance(step, (TryStep, SwitchStep, FailStep)):  # try: every branch may run; switch: one case
            return self.flow_cost(chain, step)
        if isinstance(step, WaitStep):  # waiting asks no model
            return {}
        cost: Cost = {}
        line = step.node.line
        spec = self.registry.get(step.event) if step.event else None
        if spec is not None and spec.model_calls:
            _add(cost, [Part(step.event, spec.model_calls, f"at line {line}", line)])
        found = self.callee(chain, step)
        if found is not None:
            callee, label = found
            inner = self.costs.get(id(callee), {})  # absent: a call back into a chain being worked out
            _add(cost, (Part(p.event, p.calls, f"at line {line}", line, label) for p in inner.values()))
        if step.retry is not None and step.retry.attempts > 1 and cost:
            attempts = step.retry.attempts
            cost = _scaled(cost, attempts, f"at line {step.retry.node.line} (retry: {attempts} attempts)", line)
        return cost


def _event_steps(steps: list[Step]) -> Iterator[EventStep]:
    from chainlang.model.nodes import walk_steps

    for step in walk_steps(steps):
        if isinstance(step, EventStep) and step.event:
            yield step


def budget_of(ctx: CheckContext) -> Budget:
    project: Project = ctx.project
    budget = project.memo.get("budget")
    if not isinstance(budget, Budget):
        budget = Budget(ctx)
        project.memo["budget"] = budget
    return budget


def describe(cost: Cost) -> str:
    """The parts of the worst case, largest first: the calls of one event at plain steps are
    counted together (`agent.think ×3 at lines 4, 9 and 12`)."""
    plain: dict[tuple[str, str], list[Part]] = {}
    grouped: list[tuple[int, int, str]] = []  # (calls, first line, words)
    for part in cost.values():
        if re.fullmatch(r"at line \d+", part.where):
            plain.setdefault((part.event, part.via), []).append(part)
        else:
            grouped.append((part.calls, part.line, _words(part.event, part.via, part.calls, part.where)))
    for (event, via), parts in plain.items():
        lines = sorted(p.line for p in parts)
        where = f"at line {lines[0]}" if len(lines) == 1 else f"at lines {_series(lines)}"
        grouped.append((sum(p.calls for p in parts), lines[0], _words(event, via, sum(p.calls for p in parts), where)))
    grouped.sort(key=lambda g: (-g[0], g[1], g[2]))
    words = [g[2] for g in grouped[:SHOWN]]
    if len(grouped) > SHOWN:
        words.append(f"and {len(grouped) - SHOWN} more")
    return ", ".join(words)


def _words(event: str, via: str, calls: int, where: str) -> str:
    return f"{event} ×{calls:,}" + (f" via {via}" if via else "") + f" {where}"


def _series(lines: list[int]) -> str:
    if len(lines) > 5:
        return f"{', '.join(map(str, lines[:4]))} and {len(lines) - 4} more"
    return f"{', '.join(map(str, lines[:-1]))} and {lines[-1]}"


def fix_hint(cost: Cost, worst: int) -> str:
    ways = [f"raise limits.max_model_calls to {worst:,}"]
    if any(p.where.startswith("in the foreach") for p in cost.values()):
        ways.append("loop over fewer items")
    if any("retry:" in p.where for p in cost.values()):
        ways.append("retry fewer times")
    if len(ways) == 1:
        ways.append("make fewer model calls")
    return ", ".join(ways[:-1]) + " or " + ways[-1]


def check(ctx: CheckContext) -> None:
    chain = ctx.chain
    limit = chain.limits.max_model_calls
    if chain.kind != "chain" or limit is None or chain.limits.node is None:
        return
    where = chain.limits.node.get("max_model_calls")
    if where is None:
        return
    cost = budget_of(ctx).chain_cost(chain)
    worst = total(cost)
    if worst <= limit:
        return
    ctx.report(rules.OVER_BUDGET,
               f"in the worst case this chain makes {worst:,} model calls, more than max_model_calls ({limit:,}): "
               f"{describe(cost)}",
               where, fix_hint(cost, worst))
