"""CL015 / CL016: params checked against their event's JSON Schema before anything runs.

A literal the author wrote that the schema rejects is an error (the decide model is
for values that only exist at run time). A missing required param is a warning:
the decide model may fill it. Templated values are checked where their type is
known, allowing the coercions the embedded decider performs ("3" → 3, x → [x]).
"""

from __future__ import annotations

from typing import Any

from chainlang.diagnostics import rules
from chainlang.checks.base import CheckContext, suggestion
from chainlang.expr import types as T
from chainlang.model.nodes import EventStep, Hook, walk_steps
from chainlang.schemas.cache import entry

RULES = (rules.PARAM_SCHEMA, rules.MISSING_PARAM)


def check(ctx: CheckContext) -> None:
    single_types = {id(site.template): site.type for site in ctx.analysis.sites if site.single and site.template}
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    for step in steps:
        if not isinstance(step, EventStep) or not step.event or step.params_broken:
            continue
        spec = ctx.registry.get(step.event)
        if spec is None or spec.kind == "external":
            continue
        schema = spec.params_schema or {}
        check_step(ctx, step, schema, single_types)
    for hook in ctx.chain.hooks:
        check_hook_set(ctx, hook)


def check_hook_set(ctx: CheckContext, hook: Hook) -> None:
    """A pre: hook's `set` values become params of the trigger event: hold them to its schema."""
    trigger = hook.trigger
    if not hook.set or hook.set_node is None or trigger is None or trigger.phase != "pre":
        return
    spec = ctx.registry.get(trigger.pattern)  # a glob names no single schema: nothing to check
    if spec is None or spec.kind == "external":
        return
    schema = spec.params_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    closed = schema.get("additionalProperties") is False
    literal: dict[str, Any] = {}
    for name, value in hook.set.items():
        key = hook.set_node.key_node(name)
        if closed and name not in props:
            hint = suggestion(name, props) or (f"{spec.name} takes: {', '.join(sorted(props))}" if props else None)
            ctx.report(rules.PARAM_SCHEMA, f"{spec.name} has no param '{name}' for set: to change", key or hook.set_node, hint)
        elif value.literal and not value.broken and name in props:
            literal[name] = value.data
    if not literal:
        return
    from chainlang.schemas.safe import iter_errors

    for name, data in literal.items():
        for error in iter_errors(entry(props[name]).validator, data):
            value_node = hook.set[name].node
            ctx.report(rules.PARAM_SCHEMA, f"set: param '{name}' of {spec.name}: {_message(error)}", value_node or hook.set_node)
            break


def check_step(ctx: CheckContext, step: EventStep, schema: dict[str, Any], single_types: dict[int, Any]) -> None:
    props: dict[str, Any] = schema.get("properties") or {}
    closed = schema.get("additionalProperties") is False
    required = [r for r in schema.get("required") or () if isinstance(r, str) and r not in step.params]
    for name, key_node in step.param_keys.items():
        if closed and name not in props:
            # a required param not given is the likelier meaning ('form' for a missing 'from', not 'format')
            hint = suggestion(name, required) or suggestion(name, props) or (
                f"{step.event} takes: {', '.join(sorted(props))}" if props else f"{step.event} takes no params")
            ctx.report(rules.PARAM_SCHEMA, f"{step.event} has no param '{name}'", key_node, hint)
    # Literals are validated as written. Templated (or already reported) params are present
    # with a placeholder, so `required` and if/then rules see them, and errors under them are ignored.
    opaque = {name for name, value in step.params.items() if not value.literal or value.broken}
    instance = {name: (_PLACEHOLDER if name in opaque else value.data) for name, value in step.params.items()
                if not closed or name in props}
    missing: list[str] = []
    errors: list[Any] = []
    if not _trivially_valid(schema, instance) and not (
        _fast_valid_with_templates(schema, instance, opaque) if opaque else _fast_valid(schema, instance)
    ):
        from chainlang.schemas.safe import iter_errors  # jsonschema is imported only when needed

        errors = iter_errors(_validator_for(schema), instance)
    for error in errors:
        if not error.path and error.validator == "required":
            wanted: list[str] = list(error.validator_value)
            missing.extend(r for r in wanted if r not in instance and r not in missing)
            continue
        param = str(error.path[0]) if error.path else None
        if param in opaque:
            continue
        value = step.params.get(param) if param else None
        where = value.node if value is not None and value.node is not None else None
        ctx.report(rules.PARAM_SCHEMA, f"param '{param}' of {step.event}: {_message(error)}" if param else f"{step.event}: {_message(error)}",
                   where or step.event_node or step.node)
    for name, value in step.params.items():
        if value.literal or value.broken or name not in props or len(value.templates) != 1:
            continue
        template = value.templates[0]
        if template.path != (name,):
            continue  # a template nested inside a literal structure: its type is not the param's
        expected = _types_of(props[name])
        if template.template.single is None:  # text around the value: the param gets a string
            text = _never_coerced(template.template.text, expected)
            if text is not None:
                what = "a number" if {"integer", "number"} & set(expected) else "a boolean"
                ctx.report(rules.PARAM_SCHEMA, f"param '{name}' of {step.event} expects {_join(expected)}, but this "
                           f"template always gives text: {text!r} around its value is not part of {what}", template.node,
                           f"write the value alone (\"{{...}}\"), or compute it in an expression")
                continue
        produced = single_types.get(id(template), T.ANY) if template.template.single is not None else T.STRING
        problem = _incompatible(produced, expected)
        if problem:
            # the value exists only at run time: the decide model will be asked to repair it (§5)
            ctx.report(rules.PARAM_SCHEMA, f"param '{name}' of {step.event} expects {_join(expected)}, but this template gives "
                       f"{problem}; the decide model will be asked to repair it at run time", template.node,
                       "pass a value of the right type (e.g. a field of the result) to run without the decide model",
                       severity="warning")
    if missing:
        names = ", ".join(f"'{r}'" for r in missing)
        plural = "s" if len(missing) > 1 else ""
        ctx.report(rules.MISSING_PARAM, f"{step.event} is missing required param{plural} {names}; the decide model will be asked for "
                   f"{'them' if plural else 'it'} at run time", step.event_node or step.node, f"pass {names} to run without the decide model")


_PLAIN_OBJECT_KEYS = frozenset({"type", "properties", "additionalProperties", "description", "title", "$schema"})


def _trivially_valid(schema: dict[str, Any], instance: dict[str, Any]) -> bool:
    """No params against a schema that requires nothing: nothing to validate (and no jsonschema import)."""
    return not instance and schema.keys() <= _PLAIN_OBJECT_KEYS and schema.get("type", "object") == "object"


class _Placeholder:
    """Stands for a value only known at run time; jsonschema errors under it are ignored."""


_PLACEHOLDER = _Placeholder()


def _message(error: Any) -> str:
    from chainlang.schemas.safe import json_kind

    if error.validator == "type":
        expected = error.validator_value
        wanted = _join(expected if isinstance(expected, list) else [expected])
        got = "null" if error.instance is None else f"{json_kind(error.instance)} {_short_json(error.instance)}"
        return f"expected {wanted}, got {got}"
    if error.validator == "enum":
        return f"{_short_json(error.instance)} is not one of {', '.join(_short_json(v) for v in error.validator_value)}"
    return str(error.message)


def _short_json(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _join(kinds: list[str]) -> str:
    kinds = list(kinds)
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]


def _types_of(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


_NUMBER_TEXT = frozenset("0123456789+-.eE \t")


def _never_coerced(text: str, expected: list[str]) -> str | None:
    """The literal text of a template with text around its values (it always gives a string),
    when no string it can give is a number or a boolean the param takes (the embedded decider
    coerces "3" to 3 and "true" to true, nothing more); None when it might be one."""
    if not expected or "string" in expected or not text.strip():
        return None
    if not set(expected) <= {"integer", "number", "boolean", "null"}:
        return None  # objects and lists: other repairs may apply (§5)
    if {"integer", "number"} & set(expected) and set(text) <= _NUMBER_TEXT:
        return None
    if "boolean" in expected and text.strip().lower() in ("true", "false"):
        return None
    return text


def _incompatible(produced: Any, expected: list[str]) -> str | None:
    """What the template gives, when no coercion of the embedded decider can make it fit."""
    if not expected or produced is T.ANY:
        return None
    allowed = set(expected)
    if "number" in allowed:
        allowed.add("integer")
    if isinstance(produced, T.Object) and "object" not in allowed:
        return "an object"
    if isinstance(produced, T.Array) and "array" not in allowed:
        return "a list"
    scalar = {T.STRING: "text", T.NUMBER: "a number", T.BOOL: "a boolean"}.get(produced)
    if scalar and allowed <= {"object"}:
        return scalar
    return None


_STRIPPED: dict[int, tuple[dict[str, Any], Any]] = {}


def _fast_valid(schema: dict[str, Any], instance: Any) -> bool:
    """True when the exact fast check says the (all-literal) params are valid; jsonschema
    is then not needed. False means "ask jsonschema" (invalid, or a schema it cannot do)."""
    fast = entry(schema).fast
    return fast is not None and bool(fast(instance))


def _fast_valid_with_templates(schema: dict[str, Any], instance: dict[str, Any], opaque: set[str]) -> bool:
    """True when jsonschema could only report errors under templated params (which are ignored):
    a plain object schema (`type`, `properties`, `required`) whose required params are all given
    and whose literal params pass the exact fast check of their property schemas. False means
    "ask jsonschema". (The top-level `additionalProperties` is not validated: see `_validator`.)"""
    if not schema.keys() <= _PLAIN_OBJECT_KEYS | {"required"} or schema.get("type", "object") != "object":
        return False
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        return False
    if any(not isinstance(name, str) or name not in instance for name in required):
        return False  # a missing param: jsonschema's `required` error makes the warning
    for name, value in instance.items():
        if name in opaque or name not in props:
            continue
        sub = props[name]
        if not isinstance(sub, dict) or not _fast_valid(sub, value):
            return False
    return True


def _validator_for(schema: dict[str, Any]) -> Any:
    """The validator of a registry schema, without its top-level additionalProperties:
    unknown params are reported above, with a did-you-mean. The stripped schema's entry is
    in the one cache (chainlang.schemas.cache); this maps the registry's shared schema
    object to it (the entry keeps the schema alive, so its id cannot be reused)."""
    found = _STRIPPED.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_STRIPPED) > 4096:  # a long-lived process checking many projects
            _STRIPPED.clear()
        stripped = {k: v for k, v in schema.items() if k != "additionalProperties"}
        found = (schema, entry(stripped).validator)
        _STRIPPED[id(schema)] = found
    return found[1]
