"""The event registry: every event a chain may call or a hook may trigger on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from typing import Protocol, runtime_checkable

from chainlang.registry.errors import RegistryError
from chainlang.registry.hooks import HookDef
from chainlang.registry.spec import EventSpec

_GLOB_CHARS = frozenset("*?[")


@runtime_checkable
class EventRegistry(Protocol):
    """What the checker and the interpreter need from a registry."""

    def get(self, name: str) -> EventSpec | None: ...

    def names(self) -> list[str]: ...

    def match(self, glob: str) -> list[str]: ...


class Registry:
    """A set of EventSpecs keyed by name.

    A name may be registered once; registering it again from a different
    declaration is a RegistryError naming both sources (registering an equal
    spec again is a no-op, so loading the same tools module twice is fine).
    """

    __slots__ = ("_specs", "_hooks")

    def __init__(self, specs: Iterable[EventSpec] = ()) -> None:
        self._specs: dict[str, EventSpec] = {}
        self._hooks: list[HookDef] = []  # hooks registered in Python (chainlang.hook), in order
        for spec in specs:
            self.add(spec)

    def add_hook(self, hook: HookDef, source: str | None = None) -> None:
        """Register a hook made with `chainlang.hook(...)` (`source` names where it comes
        from in messages). The same hook from the same source twice is kept once."""
        if not isinstance(hook, HookDef):
            raise TypeError(f"Registry.add_hook expects chainlang.hook(...), not {type(hook).__name__}")
        if source is not None or not hook.source:
            hook = hook.with_source(source or "registered in Python")
        if any(h == hook and h.source == hook.source for h in self._hooks):
            return
        self._hooks.append(hook)

    def hooks(self) -> list[HookDef]:
        """The hooks registered in Python, in registration order."""
        return list(self._hooks)

    # -- building ------------------------------------------------------------

    def add(self, spec: EventSpec) -> None:
        if not isinstance(spec, EventSpec):
            raise TypeError(f"Registry.add expects an EventSpec, not {type(spec).__name__}")
        existing = self._specs.get(spec.name)
        if existing is not None:
            if existing is spec or existing == spec:
                return
            if existing.source == spec.source:
                raise RegistryError(f"event '{spec.name}' is declared twice in {spec.source or 'the same source'}")
            raise RegistryError(
                f"event '{spec.name}' is declared twice: in {existing.source or 'an unknown source'} "
                f"and in {spec.source or 'an unknown source'}; rename one of them"
            )
        self._specs[spec.name] = spec

    def replace(self, spec: EventSpec) -> None:
        """Put `spec` in place of the event of the same name, which must exist (a test's fake
        of a tool: chainlang.testing.fakes)."""
        if spec.name not in self._specs:
            raise RegistryError(f"event '{spec.name}' is not registered: nothing to replace")
        self._specs[spec.name] = spec

    def copy(self) -> Registry:
        """An independent registry with the same events."""
        new = Registry()
        new._specs = dict(self._specs)
        new._hooks = list(self._hooks)
        return new

    def with_specs(self, specs: Iterable[EventSpec]) -> Registry:
        """A new registry: these events (e.g. a chain file's own declarations)
        on top of this one, which is left unchanged."""
        new = self.copy()
        for spec in specs:
            new.add(spec)
        return new

    # -- queries ---------------------------------------------------------------

    def get(self, name: str) -> EventSpec | None:
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[EventSpec]:
        return iter(self.specs())

    def names(self) -> list[str]:
        """All event names, sorted."""
        return sorted(self._specs)

    def specs(self) -> list[EventSpec]:
        """All events, sorted by name."""
        return [self._specs[name] for name in sorted(self._specs)]

    def match(self, glob: str) -> list[str]:
        """Sorted names matching a shell-style glob (`email.*`, `task.?ist`).

        `*` matches across dots: `email.*` also matches `email.draft.save`.
        A glob without wildcards matches at most the event of that name.
        """
        if not _GLOB_CHARS.intersection(glob):
            return [glob] if glob in self._specs else []
        return [name for name in sorted(self._specs) if fnmatchcase(name, glob)]

    def suggest(self, name: str) -> str | None:
        """The registered name closest to a misspelled `name` ("did you mean"),
        or None. Also matches on the part after the namespace, so
        `calendar.notify` or `notify` can suggest `user.notify`."""
        if not self._specs or name in self._specs:
            return None
        query = name.strip().lower()
        names = sorted(self._specs)
        close = difflib.get_close_matches(query, names, n=1, cutoff=0.6)
        if close:
            return close[0]
        # compare the action part (after the namespace) with every event's
        tail = query.split(".", 1)[1] if "." in query else query
        if not tail:
            return None
        by_tail: dict[str, list[str]] = {}
        for candidate in names:
            by_tail.setdefault(candidate.split(".", 1)[1], []).append(candidate)
        tails = difflib.get_close_matches(tail, list(by_tail), n=1, cutoff=0.75 if "." in query else 0.6)
        if not tails:
            return None
        # several namespaces may share the action: take the closest whole name
        return max(by_tail[tails[0]], key=lambda c: difflib.SequenceMatcher(None, query, c).ratio())

    def __repr__(self) -> str:
        return f"Registry({len(self._specs)} events)"
