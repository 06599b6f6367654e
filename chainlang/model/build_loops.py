"""The bounded loop `repeat` (LANGUAGE.md §2): its model step and how it is read from YAML.

```yaml
- repeat: [steps...]        # the body, run once per pass
  until: "{expr}"           # after each pass: stop when true
  max: 20                   # required: a pass over it fails the step (error type `limit`)
  delay: 30s                # a durable wait between passes
  state: {NAME: value}      # a fold: initial values ...
  next: {NAME: value}       # ... and the new values, after each pass
```

A `RepeatStep` is a sequential block (a `BlockStep`) whose body runs up to `max` times, so
everything that walks blocks (document order, the scope's trails, the budgets) sees its
body as one sequence; the loop itself is added where it matters (checks/loops.py,
compile/loops.py, runtime/loops.py). Its body's static paths are `3.1`, `3.2`...; a pass's
steps run as `3#2.1` (pass 2 of step 3, step 1 of the body), the way a foreach item's run
as `3[0].1`.

Problems of shape are CL050 repeat-max (no `max`, or one out of range) and CL052 loop-ref
(a `state`/`next` name that is not a name, or a `next` name that `state` does not declare);
unknown keys are CL010 as for every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import closest
from chainlang.load.loader import MapNode, ScalarNode
from chainlang.model.nodes import BlockStep, Condition, Value

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder

__all__ = ["LOOP", "MAX_PASSES", "REPEAT_KEYS", "REPEAT_OWN", "RepeatStep", "build_repeat"]

REPEAT_OWN = ("repeat", "until", "max", "delay", "state", "next")
REPEAT_KEYS = ("id", "if", "foreach", "as", "max_parallel", "timeout", "on_error", "description") + REPEAT_OWN
LOOP = "loop"  # the reserved name the body, `until` and `next` read the loop by: loop.pass, loop.NAME
PASS = "pass"  # loop.pass: the pass being run, from 1
MAX_PASSES = 1_000_000  # as limits.max_steps: a loop cannot do more than a run may


@dataclass(slots=True)
class RepeatStep(BlockStep):
    """`repeat:` — the body (`steps`) run pass after pass until `until` holds, at most `max` times."""

    until: Condition | None = None
    max: int | None = None
    max_node: ScalarNode | None = None
    delay: float | None = None
    state: dict[str, Value] = field(default_factory=dict)
    state_keys: dict[str, ScalarNode] = field(default_factory=dict)
    next: dict[str, Value] = field(default_factory=dict)
    next_keys: dict[str, ScalarNode] = field(default_factory=dict)


def build_repeat(builder: "ModelBuilder", node: MapNode, path: str) -> tuple[RepeatStep, tuple[str, ...]]:
    """The repeat step of the mapping `node`, and the keys it may carry."""
    step = RepeatStep(path=path, node=node, parallel=False)
    body = node.get("repeat")
    step.steps = builder.steps(body, f"{path}.", "'repeat'")
    if body is not None and not body.invalid and not step.steps and not (isinstance(body, ScalarNode) and body.text):
        builder.key_error(node, "repeat", rules.WRONG_TYPE, "an empty repeat runs nothing",
                          "list the steps of one pass below repeat:")
    step.until = builder.condition(node.get("until"), "'until'")
    max_node = node.get("max")
    if node.key_node("max") is None:
        builder.key_error(node, "repeat", rules.REPEAT_MAX, "a repeat needs max: the most passes it may run",
                          "add max: N (a pass over it fails the step); with until: the loop stops earlier")
    else:
        step.max = builder.integer(max_node, "repeat max", rules.REPEAT_MAX, 1, MAX_PASSES)
        step.max_node = max_node if isinstance(max_node, ScalarNode) else None
    step.delay = builder.duration(node.get("delay"), "repeat delay")
    step.state, step.state_keys = _names(builder, node, "state")
    step.next, step.next_keys = _names(builder, node, "next")
    for name, key in step.next_keys.items():
        if name not in step.state_keys:
            guess = closest(name, list(step.state_keys))
            builder.error(rules.LOOP_REF, f"next: '{name}' is not declared in state", key,
                          f"did you mean '{guess}'?" if guess else
                          f"declare it with its first value: state: {{{name}: ...}}")
    return step, REPEAT_KEYS


def _names(builder: "ModelBuilder", node: MapNode, key: str) -> tuple[dict[str, Value], dict[str, ScalarNode]]:
    """`state:` or `next:`: a mapping of loop names to values (templates allowed)."""
    from chainlang.model.build import IDENT

    values, keys = builder.mapping_of_values(node.get(key), f"'{key}'")
    for name, key_node in list(keys.items()):
        if not IDENT.match(name) or name == PASS:
            why = ("'pass' is the pass number, loop.pass: choose another name" if name == PASS
                   else "a loop name is a lowercase word with digits and underscores")
            builder.error(rules.LOOP_REF, f"{key}: '{name}' cannot be a loop name", key_node, why)
            values.pop(name)
            keys.pop(name)
    return values, keys
