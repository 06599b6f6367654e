"""CL021–CL026, CL039: references whose root, input, position, index, path or secret cannot be right."""

from __future__ import annotations

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext

RULES = (rules.REF_UNKNOWN, rules.REF_INPUT, rules.REF_FORWARD, rules.REF_SIBLING, rules.REF_INDEX, rules.REF_PATH,
         rules.REF_SECRET)


def check(ctx: CheckContext) -> None:
    for info in ctx.analysis.refs:
        if info.problem is None:
            continue
        rule, message, hint, start, end = info.problem
        site = info.site
        ctx.report(rule, message, ctx.expr_span(site.node, site.base + start, site.base + end), hint)
