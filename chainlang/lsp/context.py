"""What is expected at the cursor, worked out from the lines around it.

While typing, a document is seldom valid YAML, so this reads indentation and
`key:` / `- ` markers line by line instead of parsing. It understands block
style, and flow mappings on the cursor's own line (`tools.x: {a: 1, b|`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

EVENT_CHARS = re.compile(r"[a-z0-9_.*?]*$")
_WORD = re.compile(r"[A-Za-z0-9_.\-]*$")
_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<dashes>(?:-[ ]+)*)(?P<rest>.*)$")
_KEY = re.compile(r"^(?P<key>[A-Za-z0-9_.\-]+|\"[^\"]*\"|'[^']*')[ ]*:(?:[ ]+(?P<value>.*)|$)")
EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
# keys whose value is a list of steps
STEP_LISTS = {"steps", "action", "then", "else", "parallel"}


@dataclass
class Frame:
    """One mapping on the way from the file's top to the cursor."""

    key: str | None  # the key, in the mapping above, whose value this is (None: the top)
    item: bool  # this mapping is an item of a list (written after `- `)
    siblings: dict[str, str] = field(default_factory=dict)  # its keys written so far → their value text


@dataclass
class Cursor:
    """`kind`: "event" (an event name is expected), "key" (a key of the mapping `frames[-1]`),
    "step" (a list item of a step list: an event name or a step key), "flow-key" (a key in a
    `{...}` mapping opened after `flow_owner:`), or "" (nothing to offer). An "event" typed in
    `wait: {event: ...}` has flow_owner "wait"."""

    kind: str
    prefix: str
    frames: list[Frame]
    flow_owner: str | None = None
    flow_present: set[str] = field(default_factory=set)  # keys already in that `{...}`


def _parse(line: str) -> tuple[int, int, str, str | None, str | None] | None:
    """(indent of the first dash or the key, indent of the key, rest, key, value) of a
    content line; None for blank and comment lines."""
    m = _LINE.match(line.rstrip("\r\n"))
    if m is None:
        return None
    rest = _strip_comment(m["rest"])
    if not rest.strip() and not m["dashes"]:
        return None
    start = len(m["indent"])
    key_col = start + len(m["dashes"])
    k = _KEY.match(rest)
    key = k["key"].strip("\"'") if k else None
    value = (k["value"] or "").strip() if k else None
    return start, key_col, rest, key, value


def _strip_comment(text: str) -> str:
    if text.startswith("#"):
        return ""
    cut = text.find(" #")
    return text[:cut] if cut >= 0 else text


def frames_at(lines: Sequence[str], row: int, col: int, item: bool) -> list[Frame]:
    """The mappings enclosing a key at column `col` of line `row`, outermost first.
    `item`: the cursor's line starts a list item (`- `) whose dash is at column `col`."""
    frames: list[Frame] = []
    current = Frame(None, item)
    in_list = item  # looking for the key that owns the list `current` is an item of
    column = col  # the list's dash column, or the mapping's key column
    for r in range(min(row, len(lines)) - 1, -1, -1):
        parsed = _parse(lines[r])
        if parsed is None:
            continue
        start, key_col, _rest, key, value = parsed
        dash = start < key_col
        if in_list:
            if (dash and start == column) or key_col > column or start > column:
                continue  # an earlier item of the list, or inside one
        else:
            if key_col > column:
                continue  # inside an earlier key's value
            if key_col == column:
                if key is not None:
                    current.siblings.setdefault(key, value or "")
                if dash:  # `- key:` began this mapping: an item of a list
                    current.item, in_list, column = True, True, start
                continue
        if key is None:
            continue
        # the line whose key owns `current` (or its list)
        current.key = key
        frames.append(current)
        current = Frame(None, dash, {key: value or ""})
        in_list, column = dash, (start if dash else key_col)
    frames.append(current)
    frames.reverse()
    return frames


def cursor_context(lines: Sequence[str], row: int, col: int) -> Cursor:
    """What the text before (row, col) (0-based, code points) expects."""
    if row >= len(lines):
        return Cursor("", "", [])
    before = lines[row].rstrip("\r\n")[:col]
    flow = _flow(before)
    m = _LINE.match(before)
    assert m is not None
    start, key_col = len(m["indent"]), len(m["indent"]) + len(m["dashes"])
    is_item = bool(m["dashes"])
    rest = m["rest"]
    if flow is None and (waited := _flow_event(before)) is not None:  # `wait: {event: appr|`
        frames = frames_at(lines, row, start if is_item else key_col, is_item)
        return Cursor("event", waited, frames, flow_owner="wait")
    if flow is not None:
        owner, prefix, present = flow
        frames = frames_at(lines, row, start if is_item else key_col, is_item)
        if frames:  # `- event: x\n  params: {` or `- {event: x, params: {`: the step's keys on this line count
            frames[-1].siblings.update(_line_keys(rest))
        return Cursor("flow-key", prefix, frames, flow_owner=owner, flow_present=present)
    k = _KEY.match(rest)
    if k is not None:  # after `key: ` on the cursor's line: a value
        key, value = k["key"], k["value"] or ""
        frames = frames_at(lines, row, start if is_item else key_col, is_item)
        if key == "event" and EVENT_CHARS.fullmatch(value):
            return Cursor("event", value, frames)
        if key == "trigger":
            t = re.fullmatch(r"(pre|post|error):([a-z0-9_.*?]*)", value)
            if t:
                return Cursor("event", t[2], frames)
        return Cursor("", "", frames)
    word = _WORD.search(rest)
    prefix = word.group(0) if word else ""
    if rest[: len(rest) - len(prefix)].strip():
        return Cursor("", "", [])  # in the middle of a value
    frames = frames_at(lines, row, start if is_item else key_col, is_item)
    if frames:
        for key in keys_below(lines, row, key_col):
            frames[-1].siblings.setdefault(key, "")
    if is_item:
        list_key = frames[-1].key if frames else None
        top = list_key is None and len(frames) == 1  # an item of a top-level list: a step (or a hook)
        return Cursor("step" if top or list_key in STEP_LISTS else "item", prefix, frames)
    return Cursor("key", prefix, frames)


def keys_below(lines: Sequence[str], row: int, column: int) -> list[str]:
    """The keys at `column` below line `row` that belong to the same mapping (written
    after the cursor: not offered again)."""
    out: list[str] = []
    for r in range(row + 1, len(lines)):
        parsed = _parse(lines[r])
        if parsed is None:
            continue
        start, key_col, _rest, key, _value = parsed
        if start < column or key_col < column:
            break  # the mapping ended (or a new item of its list began)
        if key_col == column and start == column and key is not None:
            out.append(key)
    return out


def _line_keys(rest: str) -> dict[str, str]:
    """`key: value` pairs written on one line before a flow mapping (`event: x` of `{event: x, params: {`)."""
    return {m[1]: m[2].strip() for m in re.finditer(r"([A-Za-z0-9_.\-]+)\s*:\s*([^,{}]*)", rest) if m[2].strip()}


_FLOW_EVENT = re.compile(r"\bwait\s*:\s*\{(?:[^{}]*,)?\s*event\s*:\s*([a-z0-9_.*?]*)$")


def _flow_event(before: str) -> str | None:
    """The event name being typed as the value of `event:` in `wait: {...}` on this line."""
    m = _FLOW_EVENT.search(before)
    return m[1] if m else None


def _flow(before: str) -> tuple[str, str, set[str]] | None:
    """In a `{...}` mapping opened on this line at a key position: (the key the mapping
    is the value of, the partial key typed, the keys written in it so far)."""
    depth = 0
    opened = -1
    for i in range(len(before) - 1, -1, -1):
        c = before[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                opened = i
                break
            depth -= 1
    if opened < 0:
        return None
    inside = before[opened + 1:]
    last = re.split(r"[,{]", inside)[-1]
    if ":" in last or not re.fullmatch(r"\s*[A-Za-z0-9_\-]*", last):
        return None  # at a value, not a key
    owner = re.search(r"([A-Za-z0-9_.\-]+)\s*:\s*$", before[:opened])
    if owner is None:
        return None
    present = set(re.findall(r"(?:^|,)\s*([A-Za-z0-9_\-]+)\s*:", re.sub(r"\{[^{}]*\}|\[[^\[\]]*\]", "", inside)))
    return owner[1], last.strip(), present
