"""`{secrets.NAME}` at run time (LANGUAGE.md §16): the declared secrets a run reads, and
what its references see.

Before its first step, a run reads every declared secret that its chain, the hooks in
force and the named chains they call reference (`needed_by`, a walk of the chain models);
one that cannot be read stops the run there, with a message naming the secret and its
source and never a value (`RunSecrets.read_ahead` raises `UsageError`). Each value read
is added to the run's redactor, so the transcript, the progress lines, the report, the
outputs and error messages show `***` where it appears.

References find the run's secrets through a context variable (`CURRENT`), set by the
runner around the run (and by an emit around its hooks), as `{thread.ID.KEY}` finds the
store. A secret that the walk could not see (a chain that `chain.run` runs by a computed
path, the action of a stored task) is read when first referenced; if it cannot be, the
step fails with the same message.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Iterable

from chainlang.expr.ast import Key, Name, iter_refs
from chainlang.expr.errors import ExprEvalError

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.expr.ast import Expr
    from chainlang.model.nodes import Chain, Step
    from chainlang.redaction import Redactor

__all__ = ["CURRENT", "RunSecrets", "needed_by", "reference", "secret_names"]


class RunSecrets:
    """The declared secrets of one run: read once each, every value added to its redactor."""

    def __init__(self, config: "ProjectConfig | None", redactor: "Redactor") -> None:
        self.config = config
        self.redactor = redactor
        self._values: dict[str, str] = {}

    def value(self, name: str) -> str:
        """The value of `name`; raises MissingSecret (chainlang.config.secrets)."""
        found = self._values.get(name)
        if found is None:
            from chainlang.config.secrets import MissingSecret, secret_value

            if self.config is None:
                raise MissingSecret(name, f"secrets.{name}: there is no chainlang.toml, so no secret is declared")
            found = secret_value(self.config, name)
            self.redactor.add(found)  # before anything can show it
            self._values[name] = found
        return found

    def read_ahead(self, names: Iterable[str]) -> None:
        """Read every one of `names` now, before the run's first step; raises UsageError
        naming each that cannot be read (and its source)."""
        from chainlang.config.secrets import MissingSecret
        from chainlang.errors import UsageError

        problems = []
        for name in sorted(set(names)):
            try:
                self.value(name)
            except MissingSecret as exc:
                problems.append(str(exc))
        if problems:
            raise UsageError("cannot start the run: " + "; ".join(problems))


#: The secrets of the run being executed (None outside a run: a reference then fails).
CURRENT: ContextVar[RunSecrets | None] = ContextVar("chainlang_run_secrets", default=None)


def reference(name: str, start: int, end: int) -> Callable[[Any], Any]:
    """The accessor of a `{secrets.NAME}` reference."""

    def read(scope: Any) -> str:
        from chainlang.config.secrets import MissingSecret

        secrets = CURRENT.get()
        if secrets is None:
            raise ExprEvalError("reference", f"secrets.{name}: secrets are read by a run of the project "
                                "(chainlang run, emit or serve)", start, end)
        try:
            return secrets.value(name)
        except MissingSecret as exc:
            raise ExprEvalError("reference", str(exc), start, end) from None
    return read


# -- which secrets a run needs, seen in the chain models


def secret_names(expr: "Expr | None") -> set[str]:
    """The names of the `secrets.NAME` references of one expression."""
    names: set[str] = set()
    if expr is None:
        return names
    for ref in iter_refs(expr):
        segs = ref.segments
        if len(segs) >= 2 and isinstance(segs[0], Name) and segs[0].name == "secrets":
            second = segs[1]
            if isinstance(second, Name):
                names.add(second.name)
            elif isinstance(second, Key):
                names.add(second.value)
    return names


def _of_value(value: Any) -> set[str]:
    from chainlang.expr.template import Embedded

    names: set[str] = set()
    for tv in value.templates:
        for part in tv.template.parts:
            if isinstance(part, Embedded):
                names |= secret_names(part.expr)
    return names


def _of_steps(steps: "list[Step]", calls: set[str]) -> set[str]:
    from chainlang.model.nodes import EventStep, IfStep, walk_steps
    from chainlang.model.build_loops import RepeatStep

    names: set[str] = set()
    for step in walk_steps(steps):
        for cond in (step.if_, step.foreach, step.condition if isinstance(step, IfStep) else None):
            if cond is not None:
                names |= secret_names(cond.expr)
        if isinstance(step, RepeatStep):  # its until, state and next (model/build_loops.py)
            names |= secret_names(step.until.expr if step.until is not None else None)
            for value in (*step.state.values(), *step.next.values()):
                names |= _of_value(value)
        if isinstance(step, EventStep):
            if step.event:
                calls.add(step.event)
            for value in step.params.values():
                if not value.deferred:  # a stored action reads its secrets when it fires
                    names |= _of_value(value)
            if step.decide is not None:
                names |= _of_decide(step.decide)
    return names


def _of_decide(text: str) -> set[str]:
    from chainlang.expr import parse_expression
    from chainlang.expr.errors import ExprSyntaxError

    try:
        return secret_names(parse_expression(text))
    except ExprSyntaxError:
        return set()


def _of_chain(chain: "Chain", calls: set[str]) -> set[str]:
    """A chain's own references and those of its hooks (the actions it registers or
    schedules are left out: they run later, and read their secrets then)."""
    names = _of_steps(chain.steps, calls)
    for value in chain.outputs.values():
        names |= _of_value(value)
    for hook in chain.hooks:
        if hook.kind != "hook":
            continue
        if hook.condition is not None:
            names |= secret_names(hook.condition.expr)
        for value in hook.set.values():
            names |= _of_value(value)
        names |= _of_steps(hook.action, calls)
    return names


def needed_by(chains: "Iterable[Chain]", named: dict[str, Any]) -> set[str]:
    """The secrets that running `chains` (a chain and the hooks files in force) may read:
    theirs and those of the named chains they call, transitively (`named`: chain name →
    a LoadedFile of the project)."""
    names: set[str] = set()
    calls: set[str] = set()
    for chain in chains:
        names |= _of_chain(chain, calls)
    seen: set[str] = set()
    while True:
        todo = [event for event in calls if event in named and event not in seen]
        if not todo:
            return names
        for event in todo:
            seen.add(event)
            names |= _of_chain(named[event].chain, calls)
