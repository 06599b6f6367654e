"""CL054, CL055: a `switch` whose value is an `enum` — an input's (`{inputs.decision}`) or a
declared result schema's (`{review.result.decision}`) — has known possible values: a case
that is none of them can never run (an error), and a value that no case covers, without a
`default`, skips the block silently (a warning). Values compare as the runtime compares
them (model.build_flow.switch_text / case_key).
"""

from __future__ import annotations

from typing import Any

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.expr.ast import Index, Key, Name, Ref
from chainlang.model.build_flow import switch_text
from chainlang.model.nodes import EventStep, SwitchStep, walk_steps

RULES = (rules.SWITCH_CASE_NEVER, rules.SWITCH_UNCOVERED)


def check(ctx: CheckContext) -> None:
    switches = [s for s in walk_steps(ctx.chain.steps) if isinstance(s, SwitchStep)]
    for hook in ctx.chain.hooks:
        switches += [s for s in walk_steps(hook.action) if isinstance(s, SwitchStep)]
    if not switches:
        return
    by_template = {id(site.template): site for site in ctx.analysis.sites if site.template is not None}
    refs = {id(info.ref): info for info in ctx.analysis.refs}
    for step in switches:
        if step.value is None or len(step.value.templates) != 1:
            continue
        site = by_template.get(id(step.value.templates[0]))
        if site is None or not site.single or not isinstance(site.expr, Ref):
            continue  # an expression or text around the reference: its values are not an enum's
        info = refs.get(id(site.expr))
        if info is None or info.problem is not None or info.binding is None:
            continue
        found = enum_of(ctx, info.binding, site.expr)
        if found is None:
            continue
        values, origin = found
        texts = {switch_text(v): v for v in values}
        for case in step.cases:
            if case.key not in texts:
                shown = ", ".join(sorted(texts))
                ctx.report(rules.SWITCH_CASE_NEVER,
                           f"case '{case.key}' can never match: {origin} is one of {shown}", case.node,
                           _closest(case.key, list(texts)) or "remove the case, or add the value to the enum")
        if step.default is None:
            covered = {case.key for case in step.cases}
            missing = [text for text in texts if text not in covered]
            if missing:
                key = step.node.key_node("switch") if hasattr(step.node, "key_node") else None
                ctx.report(rules.SWITCH_UNCOVERED,
                           f"no case for {', '.join(repr(m) for m in missing)} of {origin}: the block is skipped then",
                           key if key is not None else step.node,
                           "add a case for each, or a default: (an empty default: [] says skipping is meant)")


def enum_of(ctx: CheckContext, binding: Any, ref: Ref) -> tuple[list[Any], str] | None:
    """The enum values of what `binding` reads, and how to name it; None when unknown."""
    path = [_segment(seg) for seg in binding.path]
    if any(p is None for p in path):
        return None
    if binding.kind == "input":
        if not path:
            return None
        inp = ctx.chain.inputs.get(path[0])
        if inp is None:
            return None
        schema: Any = inp.schema
        rest = path[1:]
        origin = f"input '{path[0]}'"
    elif binding.kind in ("latest", "id", "path") and binding.field == "result":
        event = _event_of(ctx, binding)
        spec = ctx.registry.get(event) if event else None
        schema = getattr(spec, "result_schema", None) if spec is not None else None
        rest = path
        origin = f"{event}.result" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)
    else:
        return None
    for part in rest:
        schema = _child(schema, part)
        if schema is None:
            return None
    enum = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(enum, list) or not enum:
        return None
    return enum, origin


def _event_of(ctx: CheckContext, binding: Any) -> str | None:
    if binding.kind == "latest":
        return str(binding.name)
    for step in walk_steps(ctx.chain.steps):
        if isinstance(step, EventStep) and (step.id == binding.name if binding.kind == "id" else step.path == binding.name):
            return step.event if step.foreach is None else None  # a foreach's result is a list
    return None


def _child(schema: Any, part: Any) -> Any:
    if not isinstance(schema, dict):
        return None
    if isinstance(part, int):
        return schema.get("items") if isinstance(schema.get("items"), dict) else None
    props = schema.get("properties")
    return props.get(part) if isinstance(props, dict) else None


def _segment(seg: Any) -> Any:
    if isinstance(seg, Name):
        return seg.name
    if isinstance(seg, (Key, Index)):
        return seg.value
    return None


def _closest(word: str, candidates: list[str]) -> str | None:
    from chainlang.diagnostics.suggest import did_you_mean

    return did_you_mean(word, candidates)
