"""Checked hooks → compiled hooks, ordered once and indexed by trigger (LANGUAGE.md §6.1).

A `CompiledHook` holds the compiled closures of its condition and `set` values, and its
action as an `ExecutionGraph` (a sub-chain with the hook's own bindings). A `HookSet` is
the hooks in force for a run or an emit, in firing order (`firing_order`: a topological
sort of the `after` lists that picks by priority; ties in the order of their sources —
the chain's own hooks, the hooks files by path, stored hooks, Python registrations — and
of each file). Dispatch asks
`matching(phase, event)`: one dictionary lookup once the answer for that event is known,
whatever the number of hooks that cannot match.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Iterable

from chainlang.model.bindings import ChainBindings
from chainlang.compile.firing_order import Orderable, firing_order
from chainlang.compile.graph import Compiled, CompiledValue, ExecutionGraph, _condition, _node, _value

if TYPE_CHECKING:
    from chainlang.model.nodes import Chain, Hook

_GLOB = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class CompiledHook:
    """A hook ready to fire: its trigger, condition, edits of the params and action, compiled."""
    key: str  # its name in step paths and records: the id, else FILE-N
    phase: str  # "pre", "post" or "error"
    pattern: str  # the event name or glob it triggers on
    trigger: str  # as written: post:email.*
    file: str
    line: int
    rank: int  # position in the firing order of its set
    condition: Compiled | None
    condition_text: str | None
    set: dict[str, CompiledValue]
    cancel: bool
    action: ExecutionGraph | None  # None: no action (set / cancel only)
    strip: str  # the static prefix of the action's step paths ("hook:ID.")
    mode: str
    max: int | None
    max_depth: int | None
    on_error: str
    bindings: ChainBindings  # what the references of its condition, set and action name
    glob: bool = False  # the pattern has wildcards
    captured: Any = None  # a stored hook: the registering chain's values its action reads (by text)
    # what its place in the order depends on, kept so that merged sets are ordered the same way
    id: str | None = None
    priority: int = 0
    after: tuple[str, ...] = ()


_NONE: tuple[CompiledHook, ...] = ()


@dataclass
class HookSet:
    """The hooks in force, in firing order, indexed by trigger."""

    hooks: tuple[CompiledHook, ...] = ()
    _exact: dict[tuple[str, str], tuple[CompiledHook, ...]] = field(default_factory=dict, repr=False)
    # per phase: each glob pattern once, with the hooks that use it (hooks share patterns)
    _globs: dict[str, dict[str, tuple[CompiledHook, ...]]] = field(default_factory=dict, repr=False)
    _memo: dict[tuple[str, str], tuple[CompiledHook, ...]] = field(default_factory=dict, repr=False)
    phases: frozenset[str] = field(default=frozenset(), init=False, repr=False)  # the phases some hook triggers on

    def __post_init__(self) -> None:
        self.phases = frozenset(hook.phase for hook in self.hooks)
        exact: dict[tuple[str, str], list[CompiledHook]] = {}
        globs: dict[str, dict[str, list[CompiledHook]]] = {}
        for hook in self.hooks:
            if hook.glob:
                globs.setdefault(hook.phase, {}).setdefault(hook.pattern, []).append(hook)
            else:
                exact.setdefault((hook.phase, hook.pattern), []).append(hook)
        self._exact = {k: tuple(v) for k, v in exact.items()}
        self._globs = {phase: {p: tuple(v) for p, v in by.items()} for phase, by in globs.items()}

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def __len__(self) -> int:
        return len(self.hooks)

    def matching(self, phase: str, event: str) -> tuple[CompiledHook, ...]:
        """The hooks whose trigger matches `phase:event`, in firing order (memoised per event)."""
        key = (phase, event)
        found = self._memo.get(key)
        if found is not None:
            return found
        exact = self._exact.get(key, _NONE)
        globs = tuple(h for pattern, hooks in self._globs.get(phase, {}).items() if fnmatchcase(event, pattern)
                      for h in hooks)
        found = tuple(sorted(exact + globs, key=lambda h: h.rank)) if globs else exact
        if len(self._memo) < 65_536:  # bounded: event names come from chains and emits
            self._memo[key] = found
        return found

    def with_hooks(self, more: "HookSet") -> "HookSet":
        """This set and `more` (a sub-chain's own hooks) as one set, ordered again by the same
        rule; for ties, this set's hooks come first. (Placing this set's hooks by their rank
        keeps their order among themselves: none of them waits on a hook of `more`.)"""
        if not more:
            return self
        if not self:
            return more
        mine = {id(h) for h in self.hooks}
        return HookSet(_ranked(list(self.hooks) + [h for h in more.hooks if id(h) not in mine]))


def compile_hooks(sources: Iterable[tuple["Hook", "Chain"]]) -> HookSet:
    """Compile checked hooks (each with the file that defines it), given in source order.
    Only hooks written to fire (`kind == "hook"`) with a trigger are compiled."""
    entries = [(hook, chain) for hook, chain in sources if hook.kind == "hook" and hook.trigger is not None]
    order = firing_order([Orderable(h.id, h.priority, [name for name, _ in h.after]) for h, _ in entries])
    return HookSet(tuple(_compile(*entries[i], rank) for rank, i in enumerate(order)))


def _ranked(hooks: list[CompiledHook]) -> tuple[CompiledHook, ...]:
    """Compiled hooks in firing order with their ranks set; the order given breaks ties."""
    order = firing_order([Orderable(h.id, h.priority, h.after) for h in hooks])
    return tuple(CompiledHook(**{**_fields(hooks[i]), "rank": rank}) for rank, i in enumerate(order))


def _fields(hook: CompiledHook) -> dict[str, Any]:
    return {name: getattr(hook, name) for name in CompiledHook.__slots__}


def _compile(hook: "Hook", chain: "Chain", rank: int) -> CompiledHook:
    assert hook.trigger is not None
    if hook.bindings is None:
        raise ValueError(f"{hook.file}: compile_hooks needs checked hooks (their references are bound by the checks)")
    action = None
    if hook.action:
        limits = chain.limits
        decide = hook.bindings.decide
        action = ExecutionGraph(
            file=chain.file, name=None, nodes=tuple(_node(step, decide, None, hook.bindings) for step in hook.action), outputs={},
            inputs={}, max_steps=limits.max_steps, max_depth=limits.max_depth, timeout=None,
            max_parallel=limits.max_parallel,
            allow=tuple(p for p, _ in chain.allow) if chain.allow is not None else None,
            hooks=(), bindings=hook.bindings,
        )
    return CompiledHook(
        key=hook.key, phase=hook.trigger.phase, pattern=hook.trigger.pattern,
        trigger=f"{hook.trigger.phase}:{hook.trigger.pattern}", file=chain.file, line=hook.node.line, rank=rank,
        condition=_condition(hook.condition), condition_text=hook.condition.text if hook.condition else None,
        set={name: _value(value) for name, value in hook.set.items()}, cancel=hook.cancel, action=action,
        strip=f"hook:{hook.id or hook.index + 1}.", mode=hook.mode, max=hook.max, max_depth=hook.max_depth,
        on_error=hook.on_error, bindings=hook.bindings, glob=bool(_GLOB.intersection(hook.trigger.pattern)),
        captured=hook.captured, id=hook.id, priority=hook.priority, after=tuple(name for name, _ in hook.after),
    )


__all__ = ["CompiledHook", "HookSet", "compile_hooks"]
