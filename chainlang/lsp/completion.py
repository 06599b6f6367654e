"""Completion items: event names, the keys allowed at the cursor, and the params of
the event of the step the cursor is in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

from chainlang.lsp import keys
from chainlang.lsp.context import EVENT_NAME, STEP_LISTS, Cursor, Frame

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.registry.spec import EventSpec

MAX_ITEMS = 500  # a registry of many MCP tools should not flood the editor


def complete(cursor: Cursor, registry: "Registry", hooks_file: bool, position: types.Position) -> list[types.CompletionItem]:
    start = types.Position(position.line, max(position.character - len(cursor.prefix), 0))
    edit_range = types.Range(start, position)
    frames = cursor.frames
    if cursor.kind == "event":
        waited = cursor.flow_owner == "wait" or bool(frames and frames[-1].key == "wait")
        return _events(registry, edit_range, cursor.prefix, external=waited)  # a wait waits for an external event
    if cursor.kind == "flow-key":
        if cursor.flow_owner in keys.OPTION_MAPPINGS:  # `wait: {event: x, |}`
            return _keys(keys.keys_of(cursor.flow_owner), cursor.flow_present, edit_range)
        spec = _params_owner(cursor.flow_owner, frames[-1] if frames else None, registry)
        return _params(spec, cursor.flow_present, edit_range) if spec else []
    if cursor.kind == "step":
        present = set(frames[-1].siblings) if frames else set()
        if not frames or (frames[-1].key is None and hooks_file):
            return _keys(keys.hook_keys(), present, edit_range)
        return _events(registry, edit_range, cursor.prefix) + _keys(keys.step_keys(present), present, edit_range)
    if cursor.kind == "item":
        owner = frames[-1].key if frames else None
        if owner == "hooks":
            return _keys(keys.hook_keys(), set(), edit_range)
        if owner == "allow":
            return _events(registry, edit_range, cursor.prefix)
        return []
    if cursor.kind == "key" and frames:
        return _key_items(frames, registry, hooks_file, edit_range, cursor.prefix)
    return []


def _key_items(frames: list[Frame], registry: "Registry", hooks_file: bool, edit_range: types.Range,
               prefix: str) -> list[types.CompletionItem]:
    here = frames[-1]
    present = set(here.siblings)
    parent = frames[-2] if len(frames) > 1 else None
    if here.key is None:
        if here.item and hooks_file:  # an item of a top-level list
            return _keys(keys.hook_keys(), present, edit_range)
        if here.item:
            return _step_items(present, registry, edit_range, prefix)
        return _keys(keys.top_keys(hooks_file), present, edit_range)
    if here.item and here.key in ("hooks",):
        return _keys(keys.hook_keys(), present, edit_range)
    if here.item and here.key in STEP_LISTS:
        return _step_items(present, registry, edit_range, prefix)
    if here.key in keys.OPTION_MAPPINGS:
        return _keys(keys.keys_of(here.key), present, edit_range)
    if parent is not None and parent.key == "events" and not parent.item:
        return _keys(keys.event_decl_keys(), present, edit_range)
    spec = _params_owner(here.key, parent, registry)
    return _params(spec, present, edit_range) if spec else []


def _step_items(present: set[str], registry: "Registry", edit_range: types.Range, prefix: str) -> list[types.CompletionItem]:
    """A key of a step: its options, and, while it has no form key and no event key yet, an
    event name (the compact form `EVENT: params`)."""
    items = _keys(keys.step_keys(present), present, edit_range)
    if not present & set(keys.STEP_FORMS) and not any(EVENT_NAME.match(k) for k in present):
        items += _events(registry, edit_range, prefix, ": ")
    return items


def _params_owner(key: str | None, step: Frame | None, registry: "Registry") -> "EventSpec | None":
    """The event whose params the mapping under `key` holds, `step` being the mapping `key` is in."""
    if key is None:
        return None
    if EVENT_NAME.match(key):  # compact step: `EVENT: {params}`
        return registry.get(key)
    siblings = step.siblings if step is not None else {}
    if key == "params":
        return registry.get(siblings.get("event", "").strip("\"' "))
    if key == "set":  # a pre: hook's `set` changes the event's params
        trigger = siblings.get("trigger", "").strip("\"' ")
        if trigger.startswith("pre:"):
            return registry.get(trigger[4:])
    return None


def _events(registry: "Registry", edit_range: types.Range, prefix: str, suffix: str = "",
            external: bool = False) -> list[types.CompletionItem]:
    items = []
    for spec in registry.specs():
        if not spec.name.startswith(prefix.rstrip("*?")) or (external and spec.kind != "external"):
            continue
        first = spec.description.strip().splitlines()[0] if spec.description and spec.description.strip() else ""
        items.append(types.CompletionItem(
            label=spec.name,
            kind=types.CompletionItemKind.Event,
            detail=f"{spec.kind} event" + (f": {first}" if first else ""),
            documentation=types.MarkupContent(types.MarkupKind.Markdown, spec.description or ""),
            text_edit=types.TextEdit(edit_range, spec.name + suffix),
            sort_text=f"1{spec.name}",
        ))
        if len(items) >= MAX_ITEMS:
            break
    return items


def _keys(allowed: dict[str, str], present: set[str], edit_range: types.Range) -> list[types.CompletionItem]:
    return [types.CompletionItem(
        label=name,
        kind=types.CompletionItemKind.Property,
        detail=text or None,
        text_edit=types.TextEdit(edit_range, f"{name}: "),
        sort_text=f"0{name}",
    ) for name, text in allowed.items() if name not in present]


def _params(spec: "EventSpec", present: set[str], edit_range: types.Range) -> list[types.CompletionItem]:
    from chainlang.registry.describe import schema_kind

    schema: dict[str, Any] = spec.params_schema or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    items = []
    for name, sub in props.items():
        if name in present:
            continue
        desc = sub.get("description", "") if isinstance(sub, dict) else ""
        mark = "required" if name in required else "optional"
        items.append(types.CompletionItem(
            label=name,
            kind=types.CompletionItemKind.Field,
            detail=f"{spec.name} param: {schema_kind(sub)}, {mark}",
            documentation=types.MarkupContent(types.MarkupKind.Markdown, desc) if desc else None,
            text_edit=types.TextEdit(edit_range, f"{name}: "),
            sort_text=f"{0 if name in required else 1}{name}",
        ))
    return items
