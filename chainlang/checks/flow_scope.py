"""Scope analysis of `try`/`catch`/`finally`, `switch` and `fail` (LANGUAGE.md §2), and the
references only they (and hooks) give a meaning: `{error.*}` inside a catch and the live
facts `{run.status}`, `{run.duration_ms}`, `{run.failures}`.

Visibility: the steps of `try`, `catch` and `finally` are indexed as one sequence, so a
catch step sees the try steps before it (one that did not run reads null) and `finally`
sees both; the cases of a switch are separate branches, like `then` and `else`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import did_you_mean
from chainlang.expr import types as T
from chainlang.expr.ast import Name, Ref
from chainlang.model.bindings import Binding
from chainlang.model.nodes import FailStep, Step, SwitchStep, TryStep

if TYPE_CHECKING:
    from chainlang.checks.scope import Analyser, Document, ExprSite, RefInfo, Scope

#: what `{error}` holds inside a catch (chainlang.runtime.flow.caught_error makes it)
ERROR_FIELDS = {"type": T.STRING, "message": T.STRING, "step": T.STRING, "path": T.STRING,
                "event": T.union(T.STRING, T.NULL)}
ERROR_TYPE = T.Object(ERROR_FIELDS, strict=True)
#: `run.*` read as the run stands (chainlang.runtime.live_run), not fixed when it starts
FAILURE_TYPE = T.Object({"path": T.STRING, "event": T.union(T.STRING, T.NULL),
                         "error": T.Object({"type": T.STRING, "message": T.STRING})}, strict=False)
LIVE_FIELDS = {"status": T.STRING, "duration_ms": T.NUMBER, "failures": T.Array(FAILURE_TYPE)}


def index_flow(doc: "Document", step: TryStep | SwitchStep, trail: tuple[tuple[int, str, int], ...]) -> None:
    if isinstance(step, TryStep):
        # one sequence: try, then catch, then finally (document order is run order)
        doc._index([s for _, branch in step.branches() for s in branch], id(step), "steps", trail)
        return
    for label, branch in step.branches():
        doc._index(branch, id(step), label, trail)


def walk_flow(analyser: "Analyser", step: Step, doc: "Document", inner: "Scope") -> None:
    import dataclasses

    if isinstance(step, TryStep):
        analyser.walk_steps(step.try_, doc, inner)
        if step.catch is not None:
            caught = dataclasses.replace(inner, loops={**inner.loops, "error": ERROR_TYPE})
            analyser.walk_steps(step.catch, doc, caught)
        if step.finally_ is not None:
            analyser.walk_steps(step.finally_, doc, inner)
    elif isinstance(step, SwitchStep):
        if step.value is not None:
            analyser.value_sites(step.value, "switch", doc, inner)
        for _, branch in step.branches():
            analyser.walk_steps(branch, doc, inner)
    elif isinstance(step, FailStep) and step.message is not None:
        analyser.value_sites(step.message, "fail", doc, inner)


def error_ref(analyser: "Analyser", ref: Ref, site: "ExprSite", scope: "Scope") -> "RefInfo | None":
    """`{error.message}`: the failure a catch handles. Outside a catch it names nothing
    (CL021), except in a hook, where a bare name may be a payload field (error: hooks)."""
    from chainlang.checks.scope import RefInfo

    segs = ref.segments
    if "error" not in scope.loops:
        if scope.payload is not None:
            return None
        return analyser.problem(ref, site, "error", rules.REF_UNKNOWN, "'error' is only defined inside a catch",
                                "read {error.type}, {error.message} or {error.step} in the catch: of a try block; "
                                "elsewhere, a failed step's error is STEP.error", segs[0].start, segs[0].end)
    if len(segs) > 1:
        field = segs[1]
        name = field.name if isinstance(field, Name) else None
        if name not in ERROR_FIELDS:
            return analyser.problem(ref, site, "error", rules.REF_UNKNOWN,
                                    f"'error' has the fields {', '.join(ERROR_FIELDS)}",
                                    _hint(name, ERROR_FIELDS), field.start, field.end)
        if len(segs) > 2:
            extra = segs[2]
            return analyser.problem(ref, site, "error", rules.REF_PATH, f"error.{name} is text: it has no fields",
                                    None, extra.start, extra.end)
    found = T.path_type(ERROR_TYPE, segs[1:]) if len(segs) > 1 else ERROR_TYPE
    return RefInfo(site, ref, "loop", found or T.ANY, binding=Binding("loop", "error", "", segs[1:]))


def live_run_ref(analyser: "Analyser", ref: Ref, site: "ExprSite") -> "RefInfo":
    """`{run.status}`, `{run.duration_ms}`, `{run.failures}`: read when evaluated."""
    from chainlang.checks.scope import RefInfo

    segs = ref.segments
    name = segs[1].name  # type: ignore[union-attr]
    base = LIVE_FIELDS[name]
    found = T.path_type(base, segs[2:]) if len(segs) > 2 else base
    if found is None:
        bad = segs[2]
        return analyser.problem(ref, site, "run", rules.REF_PATH, f"run.{name} has no '{getattr(bad, 'name', '?')}'",
                                "run.failures is a list: index it (run.failures[0].error.message)"
                                if name == "failures" else None, bad.start, bad.end)
    return RefInfo(site, ref, "run", found, binding=Binding("live", name, "", segs[2:]))


def _hint(word: str | None, candidates: Any) -> str | None:
    return did_you_mean(word, candidates) if word else None


__all__ = ["ERROR_FIELDS", "ERROR_TYPE", "LIVE_FIELDS", "error_ref", "index_flow", "live_run_ref", "walk_flow"]
