"""What a decision may change (LANGUAGE.md §5, §13 "Answers are constrained").

Two kinds of question reach a decide model, and each has its own answer schema:

- a **condition** on params that are valid (no validation errors): the model judges the
  condition and answers only the action (`CONDITION_SCHEMA`: `{"action", "reason"?}`).
  The step keeps its params; params in the answer are ignored.
- a **repair** (params that failed validation, with or without a condition): the answer's
  `params` are typed by the step's params schema (`repair_schema`), so a server that
  constrains its decoding can only write valid params, and they replace only what was
  invalid (`params_after`): every given param that was valid and not in error is kept.

`model_decision` turns a model's answer into a `Decision` by these rules; `applied`
applies them again to any decision a model made (the interpreter and agent.decide call
it, whatever the decider), so a correct "continue" is never turned into a failure by
params the model copied from the schema.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from chainlang.runtime.decide.decision import (
    ACTIONS,
    DECISION_SCHEMA,
    MAX_REASON,
    Action,
    DecideRequest,
    Decision,
    Undecided,
    decision_problems,
    one_line,
    shorten,
)

__all__ = ["CONDITION_SCHEMA", "answer_schema", "applied", "invalid_keys", "is_repair", "model_decision",
           "params_after", "repair_schema", "unfence"]

#: The answer to a condition on valid params: the action alone (and a short reason).
CONDITION_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "decision",
    "description": "continue when the condition holds, skip when it does not, break to stop the chain",
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "reason": {"type": "string", "maxLength": MAX_REASON, "description": "why, in one short sentence"},
    },
    "required": ["action"],
    "additionalProperties": False,
}

_ANY_PARAMS: dict[str, Any] = {"type": "object"}
_IGNORED = "its params were ignored: the params were valid, only the condition was asked"
_META_KEYS = ("$schema", "$id", "id", "title")


def is_repair(request: DecideRequest) -> bool:
    """Whether the decider is asked for params (they failed validation), not only an action."""
    return bool(request.errors)


def answer_schema(request: DecideRequest) -> dict[str, Any]:
    """The JSON Schema the answer to `request` must match (sent as the response format)."""
    return repair_schema(request.params_schema) if is_repair(request) else CONDITION_SCHEMA


def repair_schema(params_schema: dict[str, Any]) -> dict[str, Any]:
    """The decision schema of a repair: continue with params typed by `params_schema`, skip
    or break. A params schema whose `$ref`s point anywhere but its own `definitions` /
    `$defs` cannot be moved under `params`; those params are asked as any object (the
    answer is validated against the real schema all the same)."""
    params, definitions = _movable(params_schema)
    # DECISION_SCHEMA with continue's params typed: one shape of a decision, written once
    schema: dict[str, Any] = copy.deepcopy(DECISION_SCHEMA)
    schema["description"] = "continue with the repaired params, skip the step, or break the chain"
    schema["anyOf"][0]["properties"]["params"] = params
    schema.update(definitions)
    return schema


def _movable(params_schema: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The params schema as a subschema (its metadata keys removed), and the definitions
    its `$ref`s need at the root of the decision schema."""
    if not isinstance(params_schema, dict) or not params_schema:
        return dict(_ANY_PARAMS), {}
    refs = list(_refs(params_schema))
    if any(not ref.startswith(("#/definitions/", "#/$defs/")) for ref in refs):
        return dict(_ANY_PARAMS), {}
    params = {key: copy.deepcopy(value) for key, value in params_schema.items()
              if key not in _META_KEYS and key not in ("definitions", "$defs")}
    definitions = {key: copy.deepcopy(params_schema[key]) for key in ("definitions", "$defs")
                   if key in params_schema and refs}
    if "description" in params:
        params["description"] = shorten(one_line(str(params["description"])), 200)
    return params or dict(_ANY_PARAMS), definitions


def _refs(node: Any) -> Any:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if ref is not None:
                yield ref if isinstance(ref, str) else ""
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# -- what a decision changes ---------------------------------------------------------------


def invalid_keys(schema: dict[str, Any], params: dict[str, Any]) -> set[str] | None:
    """The top-level params in error (wrong, missing but required, or unknown where the
    schema forbids them); None when an error is about the params as a whole and names no
    one key (e.g. `anyOf` at the top), so no param can be said to be valid."""
    from chainlang.runtime.decide.repair import _pattern_match
    from chainlang.schemas.cache import entry
    from chainlang.schemas.safe import iter_errors

    try:
        errors = iter_errors(entry(schema).validator, params)
    except Exception:  # a schema jsonschema cannot work with: nothing can be kept for sure
        return None
    keys: set[str] = set()
    declared = schema.get("properties")
    properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
    for error in errors:
        path = list(error.absolute_path)
        if path:
            keys.add(str(path[0]))
        elif error.validator == "required" and isinstance(error.validator_value, list):
            keys.update(str(k) for k in error.validator_value if k not in params)
        elif error.validator == "additionalProperties":
            keys.update(k for k in params if k not in properties
                        and not _pattern_match(schema.get("patternProperties"), k))
        else:
            return None
    return keys


def params_after(request: DecideRequest, answered: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The params a `continue` runs with, and a note on what was kept (empty: the answer's
    params are used as they are).

    A condition on valid params keeps them. A repair takes the answer's value for each
    param in error (and leaves out one in error the answer does not give), and keeps
    every other given param."""
    given = request.params
    if not is_repair(request):
        ignored = answered is not None and answered != given
        return dict(given), _IGNORED if ignored else ""
    if answered is None:
        return dict(given), ""
    keys = invalid_keys(request.params_schema, given) if isinstance(request.params_schema, dict) else None
    if keys is None or not keys:
        # the errors name no param (or only the caller knows what they are about): the answer's params
        return dict(answered), ""
    kept = [key for key in given if key not in keys]
    out = {key: value for key, value in given.items() if key not in keys}
    for key in sorted(keys):
        if key in answered:
            out[key] = answered[key]
    dropped = sorted(key for key in answered if key not in keys and (key not in given or answered[key] != given[key]))
    if not kept and not dropped:
        return out, ""
    taken = sorted(key for key in keys if key in answered)
    removed = sorted(key for key in keys if key not in answered and key in given)
    parts = [f"took {', '.join(taken)} from the answer"] if taken else []
    if removed:
        parts.append(f"dropped {', '.join(removed)}")
    if kept:
        parts.append(f"kept {', '.join(kept)}")
    if dropped:
        parts.append(f"ignored the answer's {', '.join(dropped)}")
    return out, shorten("; ".join(parts), 200)


def applied(request: DecideRequest, decision: Decision) -> Decision:
    """`decision` with the params a `continue` may have (see `params_after`), when a model
    made it; the embedded decider's and the fallback's decisions are left as they are (they
    change only what did not fit, by the schema's own rules)."""
    if decision.action != "continue" or decision.source != "model":
        return decision
    params, note = params_after(request, decision.params)
    if params == decision.params:
        return decision
    return Decision("continue", params, shorten(f"{decision.reason}; {note}" if note else decision.reason,
                                                MAX_REASON), "model")


def model_decision(request: DecideRequest, content: str, who: str) -> Decision:
    """A model's answer to `request` as a decision; Undecided when it is not JSON or not a
    decision. For a condition only the action counts (params in it are ignored); for a
    repair the answer's params replace only what was invalid (`params_after`)."""
    try:
        answer = json.loads(unfence(content))
    except ValueError:
        raise Undecided(f"{who}'s answer is not JSON: {shorten(one_line(content), 120)}") from None
    shown = shorten(one_line(json.dumps(answer, ensure_ascii=False)), 120)
    if not is_repair(request):
        action = answer.get("action") if isinstance(answer, dict) else None
        if action not in ACTIONS:
            raise Undecided(f"{who}'s answer is not a decision (continue, skip or break): {shown}")
    elif decision_problems(answer):
        raise Undecided(f"{who}'s answer is not a decision (continue with params, skip or break): {shown}")
    chosen: Action = answer["action"]
    reason = f"{who} answered {chosen}"
    said = answer.get("reason")
    if isinstance(said, str) and said.strip():
        reason += f": {shorten(one_line(said), 200)}"
    if chosen != "continue":
        return Decision(chosen, None, reason, "model")
    params, note = params_after(request, answer.get("params") if isinstance(answer.get("params"), dict) else None)
    if note:
        reason += f"; {note}"
    return Decision("continue", params, shorten(reason, MAX_REASON), "model")


def unfence(content: str) -> str:
    """The answer without one surrounding ``` fence (servers that ignore response_format)."""
    text = content.strip()
    match = re.fullmatch(r"```[A-Za-z]*\s*\n?(.*?)\n?```", text, re.DOTALL)
    return match.group(1).strip() if match else text
