"""The outputs of a chain that ends with its answer (LANGUAGE.md §13): a chain that declares
no `outputs:` and whose last step is an `agent.reply` step has one output, `reply`, the
message of that step, as if it said

    outputs:
      reply: "{agent.reply[-1].message}"

(`[-1]`: the last agent.reply step in the file, which is that step; null when it was
skipped). Being outputs like any others, they are checked, rendered and masked as written
ones are, and they are the result of the chain called as an event (`{my.chain.reply}`)."""

from __future__ import annotations

from chainlang.expr import parse_template
from chainlang.model.nodes import EventStep, Step, TemplateValue, Value

__all__ = ["REPLY_EVENT", "REPLY_OUTPUT", "reply_outputs"]

REPLY_EVENT = "agent.reply"
REPLY_OUTPUT = "reply"
_TEXT = "{" + REPLY_EVENT + "[-1].message}"


def reply_outputs(steps: list[Step]) -> dict[str, Value]:
    """`{reply: ...}` when the last of `steps` (a chain's top level) is an agent.reply step; else {}."""
    last = steps[-1] if steps else None
    if not isinstance(last, EventStep) or last.event != REPLY_EVENT or last.event_node is None:
        return {}
    # the step's event name stands for the template in positions (nothing written is wrong in it)
    template = TemplateValue(last.event_node, parse_template(_TEXT), ())
    return {REPLY_OUTPUT: Value(last.event_node, _TEXT, [template])}
