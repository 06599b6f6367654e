"""Text and JSON views of the registry: what `chainlang events` and `chainlang describe`
print, and the language server shows on hover and completion. With the registry it
describes, below both the CLI and the language server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.registry.spec import EventSpec


def _status(spec: "EventSpec") -> str:
    if spec.kind == "external":
        return "external event (fired from outside)"
    if spec.kind == "chain":
        return f"chain ({spec.source})"
    return "implemented" if spec.implemented else "not implemented yet"


def spec_json(spec: "EventSpec") -> dict[str, Any]:
    return {
        "name": spec.name,
        "kind": spec.kind,
        "description": spec.description,
        "implemented": bool(spec.implemented) if spec.kind == "tool" else spec.kind == "chain",
        "idempotent": spec.idempotent,
        "effects": dict(spec.effects),
        "params": spec.params_schema,
        "result": spec.result_schema,
        "source": spec.source,
    }


def events_json(registry: "Registry") -> str:
    return json.dumps([spec_json(spec) for spec in registry.specs()], indent=2, ensure_ascii=False)


def events_text(registry: "Registry") -> str:
    specs = registry.specs()
    width = max((len(s.name) for s in specs), default=0)
    lines = []
    for spec in specs:
        flag = "" if spec.kind != "tool" or spec.implemented else "  (not implemented yet)"
        first = (spec.description or "").strip().splitlines()[0] if spec.description else ""
        lines.append(f"{spec.name.ljust(width)}  {first}{flag}")
    lines.append("")
    lines.append(f"{len(specs)} events; `chainlang describe NAME` shows one in full")
    return "\n".join(lines)


def _params_lines(schema: dict[str, Any] | None, noun: str = "params") -> list[str]:
    if not schema:
        return ["  (any)"]
    props = schema.get("properties") or {}
    if not props:
        return ["  (none)"]
    required = set(schema.get("required") or [])
    lines = []
    for name, sub in props.items():
        kind = schema_kind(sub)
        mark = "required" if name in required else "optional"
        desc = sub.get("description", "") if isinstance(sub, dict) else ""
        default = f" (default {json.dumps(sub['default'])})" if isinstance(sub, dict) and "default" in sub else ""
        lines.append(f"  {name}: {kind}, {mark}{default}" + (f" — {desc}" if desc else ""))
    if schema.get("additionalProperties") is False:
        lines.append(f"  (no other {noun})")
    return lines


def schema_kind(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {schema_kind(schema['items'])}"
    return kind or ("one of several shapes" if "oneOf" in schema or "anyOf" in schema else "any")


def describe_text(spec: "EventSpec") -> str:
    lines = [spec.name, "=" * len(spec.name), ""]
    if spec.description:
        lines += [spec.description.strip(), ""]
    lines.append(f"kind:       {spec.kind}")
    lines.append(f"status:     {_status(spec)}")
    lines.append(f"idempotent: {'yes' if spec.idempotent else 'no'}")
    effects = [f"{k}={v}" if k == "model_calls" else k for k, v in spec.effects.items() if v]
    if effects:
        lines.append(f"effects:    {', '.join(sorted(effects))}")
    if spec.source:
        lines.append(f"declared:   {spec.source}")
    lines += ["", "params:"] + _params_lines(spec.params_schema)
    lines += ["", "result:"]
    lines += _params_lines(spec.result_schema, "fields") if spec.result_schema and spec.result_schema.get("properties") else [
        f"  {schema_kind(spec.result_schema)}" if spec.result_schema else "  (not declared)"]
    lines += ["", "params schema:", json.dumps(spec.params_schema, indent=2, ensure_ascii=False)]
    if spec.result_schema:
        lines += ["", "result schema:", json.dumps(spec.result_schema, indent=2, ensure_ascii=False)]
    return "\n".join(lines)


def describe_json(spec: "EventSpec") -> str:
    return json.dumps(spec_json(spec), indent=2, ensure_ascii=False)
