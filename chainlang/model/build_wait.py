"""Building a `wait:` step (LANGUAGE.md §15) from its YAML mapping: the part of
`ModelBuilder.mapping_step` for this form.

```yaml
- wait:
    event: approval.given                      # a declared external event
    where: "draft_id == email.draft.result.id"  # bare names: the payload; the run's values as anywhere
    timeout: 2d                                # no timeout is a warning (CL069)
    on_timeout: fail                           # fail (default) | continue (result null) | break
  id: approval
```

Problems of shape are CL068 `wait-shape`; whether the event exists is CL014 (checks), what
`where` reads of the payload CL070 (checks/waits.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import closest
from chainlang.load.loader import MapNode, ScalarNode
from chainlang.model.nodes import WaitStep

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder

__all__ = ["ON_TIMEOUT", "WAIT_KEYS", "WAIT_OWN", "build_wait"]

WAIT_OWN = ("event", "where", "timeout", "on_timeout")
WAIT_KEYS = ("id", "if", "on_error", "description", "wait")
ON_TIMEOUT = ("fail", "continue", "break")
_EXAMPLE = "wait: {event: approval.given, where: \"draft_id == draft.result.id\", timeout: 2d}"


def build_wait(builder: "ModelBuilder", node: MapNode, path: str) -> tuple[WaitStep, tuple[str, ...]]:
    """The wait step of `node` (a step mapping with `wait:`) and the keys the step may carry."""
    step = WaitStep(path=path, node=node)
    body = node.get("wait")
    step.wait_node = body
    if body is None or body.invalid:
        return step, WAIT_KEYS
    if not isinstance(body, MapNode):
        if isinstance(body, ScalarNode) and isinstance(body.value, str) and "." in body.value:
            hint = f"write wait: {{event: {body.value}, timeout: 1d}}"
        else:
            hint = _EXAMPLE
        builder.error(rules.WAIT_SHAPE, "wait takes a mapping: the event, and where, timeout, on_timeout", body, hint)
        return step, WAIT_KEYS
    for key_node, _ in body.pairs:
        if key_node.text not in WAIT_OWN:
            guess = closest(key_node.text, WAIT_OWN)
            builder.error(rules.WAIT_SHAPE, f"unknown key '{key_node.text}' in a wait", key_node,
                          f"did you mean '{guess}'?" if guess else f"a wait has {', '.join(WAIT_OWN)}")
    event = body.get("event")
    if body.key_node("event") is None:
        builder.key_error(node, "wait", rules.WAIT_SHAPE, "a wait needs the event it waits for", _EXAMPLE)
    elif event is not None and not event.invalid:
        if isinstance(event, ScalarNode) and isinstance(event.value, str):
            if builder.event_name(event, event.value):
                step.event, step.event_node = event.value, event
        else:
            builder.wrong_type(event, "the event of a wait", "an event name such as approval.given")
    where = body.get("where")
    if where is not None:
        step.where = builder.condition(where, "the where of a wait")
    if body.key_node("timeout") is not None:
        step.timeout_node = body.get("timeout")
        step.wait_timeout = builder.duration(step.timeout_node, "the timeout of a wait")
    on_timeout = body.get("on_timeout")
    if on_timeout is not None and not on_timeout.invalid:
        if isinstance(on_timeout, ScalarNode) and on_timeout.value in ON_TIMEOUT:
            step.on_timeout = str(on_timeout.value)
        else:
            text = on_timeout.text if isinstance(on_timeout, ScalarNode) else ""
            guess = closest(text, ON_TIMEOUT) if text else None
            builder.error(rules.WAIT_SHAPE, f"on_timeout is fail, continue or break, not '{text or '?'}'", on_timeout,
                          f"did you mean '{guess}'?" if guess else "fail (the step fails, type timeout), continue "
                          "(its result is null) or break (the chain ends cleanly)")
        if step.wait_timeout is None and body.key_node("timeout") is None:
            builder.error(rules.WAIT_SHAPE, "on_timeout without a timeout never applies", on_timeout,
                          "add timeout: (such as 1d) to the wait")
    return step, WAIT_KEYS
