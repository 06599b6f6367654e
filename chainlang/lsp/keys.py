"""The keys allowed at each place of a chain or hooks file, read from the JSON
Schemas that `chainlang schema` prints (so they cannot drift from the checker's)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

# step forms, by the key that selects the form (as the schema's `mappingStep` does)
STEP_FORMS = {"event": "eventStep", "parallel": "parallelStep", "steps": "stepsBlock", "then": "ifBlock", "repeat": "repeatStep",
              "try": "tryBlock", "switch": "switchBlock", "fail": "failStep", "wait": "waitStep"}
# keys whose value is a mapping with keys of its own, each described by the schema definition of that name
OPTION_MAPPINGS = ("limits", "retry", "wait")


@cache
def _definitions(hooks: bool) -> dict[str, Any]:
    from chainlang.resources import read_text

    schema = json.loads(read_text("schemas", "hooks.schema.json" if hooks else "chain.schema.json"))
    defs = schema.get("definitions", {})
    return defs if isinstance(defs, dict) else {}


def keys_of(definition: str, hooks: bool = False) -> dict[str, str]:
    """The keys of a schema definition (`chainFile`, `hook`, `limits`, ...) → their descriptions."""
    node = _definitions(hooks).get(definition)
    if not isinstance(node, dict):
        return {}
    props = node.get("properties") or {}
    return {name: _describe(sub, hooks) for name, sub in props.items()}


def _describe(sub: Any, hooks: bool) -> str:
    if not isinstance(sub, dict):
        return ""
    if isinstance(sub.get("description"), str):
        return str(sub["description"])
    ref = sub.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        target = _definitions(hooks).get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict) and isinstance(target.get("description"), str):
            return str(target["description"])
    return ""


def step_keys(present: set[str]) -> dict[str, str]:
    """The keys of a step mapping that already has `present` keys: those of its form, or of
    every form while no form key is written yet (a compact step's event name is not among them)."""
    for key, form in STEP_FORMS.items():
        if key in present:
            return keys_of(form)
    out: dict[str, str] = {}
    for form in ("compactStep", *STEP_FORMS.values()):
        for name, text in keys_of(form).items():
            out.setdefault(name, text)
    return out


def top_keys(hooks: bool) -> dict[str, str]:
    return keys_of("hooksMapping", hooks=True) if hooks else keys_of("chainFile")


def hook_keys() -> dict[str, str]:
    return keys_of("hook")


def event_decl_keys() -> dict[str, str]:
    """The keys of one declared external event (`events: {NAME: {description, payload}}`)."""
    node = _definitions(False).get("events", {})
    extra = node.get("additionalProperties") if isinstance(node, dict) else None
    props = extra.get("properties", {}) if isinstance(extra, dict) else {}
    return {name: _describe(sub, False) for name, sub in props.items()}
