"""The decide model (LANGUAGE.md §5): what a step gets when its params are invalid
or it carries a `decide:` condition.

A decider answers one of exactly three decisions (the seed format):
`{"action": "continue", "params": {...}}`, `{"action": "skip"}`, `{"action": "break"}`.

- `decision`: the decisions, the request, the `Decider` protocol, the errors, and
  `validate_params`.
- `embedded` (`EmbeddedDecider`): deterministic, no network. Repairs params the
  obvious way (`repair`: schema defaults, `"3"` → 3, `"true"` → true, a scalar → a
  one-item list, a number → text, unknown properties dropped where the schema forbids
  them) and evaluates a condition that is an expression. Anything else raises `Undecided`.
- `keep`: what a decision may change. A condition on valid params is answered with the
  action alone (`CONDITION_SCHEMA`) and the params are kept; a repair's answer has params
  typed by the step's params schema (`repair_schema`) and replaces only the params in
  error (`params_after`, `applied`).
- `model_decider` (`ModelDecider`, `TierDecider`): any OpenAI-compatible chat endpoint (or
  the light tier), asked with the answer's JSON Schema as the required response format;
  its answer is validated.
- `chained` (`ChainedDecider`): the embedded decider, then the model (if configured),
  then the configured fallback (`fail` raises `DecisionNeeded`, `skip`, `break`);
  `decider_from_config` builds that chain from the `[decide]` table of chainlang.toml,
  and `close_decider` closes what it holds open (the model's pooled connections).

A `continue` decision's params are the caller's to validate again (`validate_params`):
if they are still invalid the step fails with the schema errors (no repair loop). The
callers (the interpreter, agent.decide) pass a model's decision through `applied` first.
"""

from __future__ import annotations

from chainlang.runtime.decide.chained import ChainedDecider, close_decider, decider_from_config
from chainlang.runtime.decide.decision import (
    ACTIONS,
    DECISION_SCHEMA,
    DEFAULT_TIMEOUT,
    FALLBACKS,
    DecideError,
    DecideRequest,
    Decider,
    DeciderConfigError,
    Decision,
    DecisionNeeded,
    Undecided,
    validate_params,
)
from chainlang.runtime.decide.embedded import EmbeddedDecider
from chainlang.runtime.decide.keep import CONDITION_SCHEMA, answer_schema, applied, params_after, repair_schema
from chainlang.runtime.decide.model_decider import ModelDecider, TierDecider
from chainlang.runtime.decide.repair import repair_params

__all__ = [
    "ACTIONS",
    "CONDITION_SCHEMA",
    "DECISION_SCHEMA",
    "DEFAULT_TIMEOUT",
    "FALLBACKS",
    "ChainedDecider",
    "DecideError",
    "DecideRequest",
    "Decider",
    "DeciderConfigError",
    "Decision",
    "DecisionNeeded",
    "EmbeddedDecider",
    "ModelDecider",
    "TierDecider",
    "Undecided",
    "answer_schema",
    "applied",
    "close_decider",
    "decider_from_config",
    "params_after",
    "repair_params",
    "repair_schema",
    "validate_params",
]
