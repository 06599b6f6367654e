"""Building `try`/`catch`/`finally`, `switch`/`cases`/`default` and `fail` steps (LANGUAGE.md §2)
from their YAML mappings: the part of `ModelBuilder.mapping_step` for these three forms.

Problems of shape (a `catch` without `try`, an empty `try`, a switch without cases, a
`fail` without a message) are CL053 `flow-shape`; unknown keys are CL010 as for every step.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from chainlang.diagnostics import rules
from chainlang.load.loader import AnyNode, MapNode, ScalarNode, SeqNode
from chainlang.model.nodes import FailStep, Step, SwitchCase, SwitchStep, TryStep

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder

#: the keys that make a step one of these forms, and the keys that belong to them
FLOW_FORMS = ("try", "switch", "fail")
TRY_OWN = ("try", "catch", "finally")
SWITCH_OWN = ("switch", "cases", "default")
FLOW_KEYS = TRY_OWN + SWITCH_OWN + ("fail",)
FAIL_KEYS = ("id", "if", "on_error", "description", "fail")


def orphan_form(builder: "ModelBuilder", node: MapNode) -> str | None:
    """`catch:`/`finally:` without `try:`, `cases:`/`default:` without `switch:`: reported, and
    the form it was meant to be returned (so the rest of the step is still checked)."""
    has = node.index.__contains__
    for form, own in (("try", TRY_OWN[1:]), ("switch", SWITCH_OWN[1:])):
        stray = [key for key in own if has(key)]
        if stray and not has(form):
            what = "a try block has try:, then catch: and/or finally:" if form == "try" else \
                "a switch block has switch: \"{value}\", cases: and optionally default:"
            builder.key_error(node, stray[0], rules.FLOW_SHAPE, f"'{stray[0]}' without '{form}'", what)
            return form
    return None


def build_flow(builder: "ModelBuilder", node: MapNode, path: str, form: str) -> tuple[Step, tuple[str, ...]]:
    """The step of form `form` (try, switch or fail) and the keys it may carry."""
    from chainlang.model.build import COMMON_KEYS

    if form == "try":
        return build_try(builder, node, path), COMMON_KEYS + TRY_OWN
    if form == "switch":
        return build_switch(builder, node, path), COMMON_KEYS + SWITCH_OWN
    return build_fail(builder, node, path), FAIL_KEYS


def build_try(builder: "ModelBuilder", node: MapNode, path: str) -> TryStep:
    step = TryStep(path=path, node=node)
    body = node.get("try")
    if body is not None and node.key_node("try") is not None and _empty(body):
        builder.key_error(node, "try", rules.FLOW_SHAPE, "an empty try runs nothing",
                          "list the steps to try under try:, or remove the block")
    step.try_ = builder.steps(body if not _empty(body) else None, f"{path}.try.", "'try'")
    if node.key_node("catch") is not None:
        step.catch = _branch(builder, node.get("catch"), f"{path}.catch.", "'catch'")
    if node.key_node("finally") is not None:
        step.finally_ = _branch(builder, node.get("finally"), f"{path}.finally.", "'finally'")
    if step.catch is None and step.finally_ is None and step.try_:
        builder.key_error(node, "try", rules.FLOW_SHAPE, "a try block without catch or finally does nothing more "
                          "than its steps", "add catch: (run when a step failed) or finally: (run last, always)")
    return step


def build_switch(builder: "ModelBuilder", node: MapNode, path: str) -> SwitchStep:
    step = SwitchStep(path=path, node=node)
    value_node = node.get("switch")
    if value_node is not None and not value_node.invalid:
        if isinstance(value_node, ScalarNode) and isinstance(value_node.value, str):
            step.value = builder.value(value_node)
            if step.value.literal and not step.value.broken:
                builder.error(rules.FLOW_SHAPE, f"the switch value '{value_node.text}' is a fixed text: no reference "
                              "in it", value_node, f'write the value to compare as a template: "{{{value_node.text}}}"')
        else:
            builder.wrong_type(value_node, "the switch value", "a template such as \"{review.result.decision}\"")
    cases = node.get("cases")
    if node.key_node("cases") is None:
        builder.key_error(node, "switch", rules.FLOW_SHAPE, "a switch needs cases:",
                          "add cases: with one key per value, each a list of steps")
    elif isinstance(cases, MapNode) and not cases.invalid:
        if not cases.pairs:
            builder.error(rules.FLOW_SHAPE, "a switch with no cases runs nothing", cases, "add a key per value")
        seen: dict[str, ScalarNode] = {}
        for i, (key_node, steps_node) in enumerate(cases.pairs):
            key = case_key(key_node)
            if key in seen:
                builder.error(rules.FLOW_SHAPE, f"two cases compare as '{key}' (lines {seen[key].line} and "
                              f"{key_node.line})", key_node.span, "a number or boolean key compares as its JSON text")
            seen.setdefault(key, key_node)
            steps = _branch(builder, steps_node, f"{path}.case{i + 1}.", f"case '{key}'")
            step.cases.append(SwitchCase(key, key_node, steps))
    elif cases is not None:
        builder.wrong_type(cases, "'cases'", "a mapping of values to lists of steps")
    if node.key_node("default") is not None:
        step.default = _branch(builder, node.get("default"), f"{path}.default.", "'default'")
    return step


def build_fail(builder: "ModelBuilder", node: MapNode, path: str) -> FailStep:
    step = FailStep(path=path, node=node)
    message = node.get("fail")
    step.message_node = message
    if message is None or message.invalid:
        if message is None:
            builder.key_error(node, "fail", rules.FLOW_SHAPE, "fail needs a message",
                              'write fail: "what went wrong"')
        return step
    if isinstance(message, ScalarNode) and isinstance(message.value, str) and message.value.strip():
        step.message = builder.value(message)
    elif isinstance(message, ScalarNode) and (message.value is None or message.value == ""):
        builder.error(rules.FLOW_SHAPE, "fail needs a message", message, 'write fail: "what went wrong"')
    else:
        builder.wrong_type(message, "the fail message", "a string (a template may fill it in)")
    return step


def case_key(node: ScalarNode) -> str:
    """What a case key compares as: a string as it is; a number, boolean or null as its JSON text."""
    value = node.value
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # a date or another YAML type: its text
        return node.text


def switch_text(value: Any) -> str:
    """What a switch value compares as (the same rule as `case_key`)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _empty(node: AnyNode | None) -> bool:
    return (isinstance(node, SeqNode) and not node.items) or (
        isinstance(node, ScalarNode) and node.value is None and not node.text)


def _branch(builder: "ModelBuilder", node: AnyNode | None, prefix: str, what: str) -> list[Step]:
    """A catch/finally/case list: `[]` (or nothing) is allowed and runs nothing."""
    if node is None or _empty(node):
        return []
    return builder.steps(node, prefix, what)
