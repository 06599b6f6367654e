"""The embedded decider: deterministic, no network (LANGUAGE.md §5)."""

from __future__ import annotations

from typing import Any

from chainlang.runtime.decide.decision import MAX_REASON, DecideRequest, Decision, Undecided, shorten, validate_params
from chainlang.runtime.decide.repair import repair_params

__all__ = ["EmbeddedDecider"]


class EmbeddedDecider:
    """The deterministic decider: no network, the same answer for the same request.

    1. A `condition` must parse as an expression whose names are all keys of the
       request's `context`; it is evaluated there: false → skip, true → go on.
       Plain language, an unknown name or an evaluation error → `Undecided`.
    2. Params that are invalid are repaired (`repair_params`) and validated again:
       valid → continue with the repaired params; still invalid → `Undecided`.
    """

    async def decide(self, request: DecideRequest) -> Decision:
        return self.decide_now(request)

    def decide_now(self, request: DecideRequest) -> Decision:
        """`decide`, synchronously (it never waits on anything)."""
        reasons: list[str] = []
        if request.condition is not None:
            if not _condition_holds(request.condition, request.context):
                return Decision("skip", None, f"condition `{shorten(request.condition, 80)}` is false", "embedded")
            reasons.append(f"condition `{shorten(request.condition, 80)}` is true")
        params = request.params
        if request.errors or validate_params(request.params_schema, params):
            repaired, notes = repair_params(request.params_schema, params)
            remaining = validate_params(request.params_schema, repaired)
            if remaining:
                more = f" (and {len(remaining) - 1} more)" if len(remaining) > 1 else ""
                raise Undecided(f"the params are invalid and no obvious repair fixes them: {remaining[0]}{more}")
            params = repaired
            reasons.append("repaired params: " + "; ".join(notes) if notes else "the params are valid")
        elif request.condition is None:
            reasons.append("the params are valid")
        return Decision("continue", params, shorten(", ".join(reasons), MAX_REASON), "embedded")


def _condition_holds(condition: str, context: dict[str, Any]) -> bool:
    from chainlang.expr import DataResolver, ExprEvalError, ExprSyntaxError, compile_expression, parse_expression, truthy
    from chainlang.expr.ast import Name, iter_refs

    try:
        expr = parse_expression(condition)
    except ExprSyntaxError as exc:
        raise Undecided(f"the condition `{shorten(condition, 80)}` is not an expression ({exc.message}); "
                        "a decide model must judge it") from None
    for ref in iter_refs(expr):
        first = ref.segments[0]
        root = first.name if isinstance(first, Name) else getattr(first, "value", None)
        if root not in context:
            known = ", ".join(sorted(str(key) for key in context)) or "nothing"
            raise Undecided(f"the condition `{shorten(condition, 80)}` names '{root}', which the chain does not know "
                            f"here (known: {shorten(known, 120)}); a decide model must judge it")
    try:
        value = compile_expression(expr)(DataResolver(context))
    except ExprEvalError as exc:
        raise Undecided(f"the condition `{shorten(condition, 80)}` cannot be evaluated: {exc}") from None
    return truthy(value)
