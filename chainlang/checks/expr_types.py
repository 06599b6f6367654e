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
            ctx.report(rule, issue.message, span, getattr(issue, "hint", None))
