"""`triggers:` of a chain file (LANGUAGE.md §12): when `chainlang serve` starts the chain by
itself. Each trigger is either a schedule, `{cron, tz?, inputs?}`, or an event,
`{event, where?}` (the event's payload becomes the chain's inputs).

Read here into `ChainTrigger`s, with the structural problems as diagnostics (CL063
bad-trigger, unknown keys, wrong types, the syntax of `where`); what needs the project
around the file (does the cron ever fire, is the event known, do the inputs fit) is
chainlang.checks.triggers; registering them is chainlang.tasks.chain_triggers.

Called by build_chain (model/build.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chainlang.diagnostics import rules
from chainlang.load.loader import AnyNode, MapNode, ScalarNode, SeqNode

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder
    from chainlang.model.nodes import Condition

__all__ = ["CRON_KEYS", "EVENT_TRIGGER_KEYS", "MAX_TRIGGERS", "ChainTrigger", "build_triggers"]

CRON_KEYS = ("cron", "tz", "inputs", "description")
EVENT_TRIGGER_KEYS = ("event", "where", "description")
MAX_TRIGGERS = 100  # a file with more is a mistake (each is a stored task)


@dataclass
class ChainTrigger:
    """One entry of `triggers:`; `kind` is "cron" or "event"."""

    node: MapNode
    index: int
    kind: str
    cron: str | None = None
    cron_node: ScalarNode | None = None
    tz: str | None = None
    tz_node: ScalarNode | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    inputs_node: MapNode | None = None
    event: str | None = None
    event_node: ScalarNode | None = None
    where: "Condition | None" = None
    description: str | None = None

    def definition(self) -> dict[str, Any]:
        """The trigger as written (JSON): what is stored, and what tells two triggers apart."""
        out: dict[str, Any] = {}
        if self.kind == "cron":
            out["cron"] = self.cron
            if self.tz is not None:
                out["tz"] = self.tz
            if self.inputs:
                out["inputs"] = self.inputs
        else:
            out["event"] = self.event
            if self.where is not None:
                out["where"] = self.where.node.text if isinstance(self.where.node, ScalarNode) else None
        return out


def build_triggers(builder: "ModelBuilder", node: AnyNode | None) -> list[ChainTrigger]:
    if node is None or node.invalid or (isinstance(node, ScalarNode) and node.value is None and not node.text):
        return []
    if not isinstance(node, SeqNode):
        builder.wrong_type(node, "'triggers'", "a list of triggers ({cron: ...} or {event: ...})")
        return []
    if len(node.items) > MAX_TRIGGERS:
        builder.error(rules.BAD_TRIGGER, f"{len(node.items)} triggers: a chain takes at most {MAX_TRIGGERS}", node,
                      "start the chain from a hooks file or a schedule instead")
        return []
    out: list[ChainTrigger] = []
    for index, item in enumerate(node.items):
        trigger = _trigger(builder, item, index)
        if trigger is not None:
            out.append(trigger)
    return out


def _trigger(builder: "ModelBuilder", node: AnyNode, index: int) -> ChainTrigger | None:
    if node.invalid:
        return None
    if not isinstance(node, MapNode):
        builder.wrong_type(node, f"trigger {index + 1}", "a mapping: {cron: '0 8 * * 1-5'} or {event: NAME}")
        return None
    has_cron, has_event = "cron" in node.index, "event" in node.index
    if has_cron == has_event:
        said = "both cron and event" if has_cron else "neither cron nor event"
        builder.error(rules.BAD_TRIGGER, f"trigger {index + 1} has {said}", node,
                      "a trigger is either a schedule {cron: '0 8 * * 1-5', tz?, inputs?} or an event "
                      "{event: NAME, where?}: write two triggers for both")
        return None
    kind = "cron" if has_cron else "event"
    allowed = CRON_KEYS if kind == "cron" else EVENT_TRIGGER_KEYS
    for key_node, _ in node.pairs:
        if key_node.text in allowed:
            continue
        other = EVENT_TRIGGER_KEYS if kind == "cron" else CRON_KEYS
        if key_node.text in other:  # a key of the other kind: say why it does not fit
            why = {"where": "a schedule has no payload to test: put the test in the chain's first step",
                   "tz": "an event trigger fires when the event arrives",
                   "inputs": "an event trigger's inputs are the event's payload"}[key_node.text]
            builder.error(rules.BAD_TRIGGER, f"'{key_node.text}' does not fit {'a cron' if kind == 'cron' else 'an event'} trigger: {why}",
                          _key_span(key_node))
        else:
            builder.unknown_key(key_node, allowed, "a cron trigger" if kind == "cron" else "an event trigger")
    trigger = ChainTrigger(node, index, kind)
    description = node.get("description")
    if description is not None:
        trigger.description = builder.string(description, "a trigger's 'description'")
    if kind == "cron":
        cron_node = node.get("cron")
        trigger.cron = builder.string(cron_node, "'cron'")
        trigger.cron_node = cron_node if isinstance(cron_node, ScalarNode) else None
        tz_node = node.get("tz")
        if tz_node is not None:
            trigger.tz = builder.string(tz_node, "'tz'")
            trigger.tz_node = tz_node if isinstance(tz_node, ScalarNode) else None
        inputs_node = node.get("inputs")
        if inputs_node is not None and not inputs_node.invalid:
            if isinstance(inputs_node, MapNode):
                from chainlang.load.loader import to_data

                trigger.inputs, trigger.inputs_node = dict(to_data(inputs_node)), inputs_node
            else:
                builder.wrong_type(inputs_node, "a trigger's 'inputs'", "a mapping of input names to values")
        if trigger.cron is None:
            return None
    else:
        event_node = node.get("event")
        name = builder.string(event_node, "'event'")
        if name is None or not isinstance(event_node, ScalarNode) or not builder.event_name(event_node, name):
            return None
        trigger.event, trigger.event_node = name, event_node
        trigger.where = builder.condition(node.get("where"), "'where'")
    return trigger


def _key_span(node: ScalarNode) -> Any:
    from chainlang.model.build import key_span

    return key_span(node)
