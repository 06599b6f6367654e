"""CL027–CL029: operand types that cannot work together, filters, and regexes — where types are certain."""

from __future__ import annotations

from chainlang import rules
from chainlang.checks.base import CheckContext

RULES = (rules.TYPE_MISMATCH, rules.FILTER, rules.BAD_REGEX)
_BY_CATEGORY = {"type": rules.TYPE_MISMATCH, "filter": rules.FILTER, "regex": rules.BAD_REGEX}


def check(ctx: CheckContext) -> None:
    for site in ctx.analysis.sites:
        for issue in site.issues:
            rule = _BY_CATEGORY.get(issue.category, rules.TYPE_MISMATCH)
            span = ctx.expr_span(site.node, site.base + issue.start, site.base + issue.end)
            message, hint = _split_hint(issue.message)
            if rule is rules.BAD_REGEX and hint is None:
                hint = "patterns use RE2 syntax (linear time): no backreferences or lookaround"
            ctx.report(rule, message, span, hint)


def _split_hint(message: str) -> tuple[str, str | None]:
    """Diagnostics carry suggestions as hints: 'unknown filter x; did you mean y?' → message, hint."""
    head, sep, tail = message.partition("; ")
    if sep and tail.startswith(("did you mean", "the filters are")):
        return head, tail
    return message, None
