"""CL027–CL029: operand types that cannot work together, filters, and regexes — where types are certain."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext
from chainlang.expr import types as T

RULES = (rules.TYPE_MISMATCH, rules.FILTER, rules.BAD_REGEX)
_BY_CATEGORY = {"type": rules.TYPE_MISMATCH, "filter": rules.FILTER, "regex": rules.BAD_REGEX}


def check(ctx: CheckContext) -> None:
    for site in ctx.analysis.sites:
        if site.context == "foreach" and not site.issues:
            kind = _not_a_list(site.type)
            if kind:
                span = ctx.expr_span(site.node, site.base + site.expr.start, site.base + site.expr.end)
                ctx.report(rules.TYPE_MISMATCH, f"foreach needs a list, not {kind}", span,
                           "give it a list: a literal [a, b], or a reference to a list such as team.members.members")
        for issue in site.issues:
            rule = _BY_CATEGORY.get(issue.category, rules.TYPE_MISMATCH)
            span = ctx.expr_span(site.node, site.base + issue.start, site.base + issue.end)
            message, hint = _split_hint(issue.message)
            if rule is rules.BAD_REGEX and hint is None:
                hint = "patterns use RE2 syntax (linear time): no backreferences or lookaround"
            ctx.report(rule, message, span, hint)


def _not_a_list(t: object) -> str | None:
    """What a foreach expression certainly gives instead of a list (None if it may be a list)."""
    members = T.members(t)  # type: ignore[arg-type]
    if any(m is T.ANY or isinstance(m, T.Array) for m in members):
        return None
    names: dict[object, str] = {T.NUMBER: "a number", T.STRING: "a string", T.BOOL: "a boolean", T.NULL: "null"}
    kinds = sorted({names.get(m, "an object") for m in members})
    return " or ".join(kinds) if kinds else None


def _split_hint(message: str) -> tuple[str, str | None]:
    """Diagnostics carry suggestions as hints: 'unknown filter x; did you mean y?' → message, hint."""
    head, sep, tail = message.partition("; ")
    if sep and tail.startswith(("did you mean", "the filters are")):
        return head, tail
    return message, None
