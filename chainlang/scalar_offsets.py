"""Map an offset inside a scalar's *value* back to its offset in the file.

An expression error is reported at the column of the offending token in the
file, so quotes, escapes, folded lines and block indentation must be undone.
The map of a scalar is built once, on its first diagnostic, so many errors in
one long string cost one pass over it.
"""

from __future__ import annotations

from chainlang.loader import ScalarNode

_ESCAPE_LENGTH = {"x": 4, "u": 6, "U": 10}


def source_offset(text: str, node: ScalarNode, value_offset: int) -> int:
    """File offset of character `value_offset` of `node.text` (best effort, never raises)."""
    if node.offsets is None:
        node.offsets = _offset_map(text, node)
    offsets = node.offsets
    return offsets[max(0, min(value_offset, len(offsets) - 1))]


def _offset_map(text: str, node: ScalarNode) -> list[int]:
    """File offsets of every character of the value, plus one past the end."""
    raw = text[node.start : node.end]
    value = node.text
    if node.style in ("|", ">"):
        return [node.start + off for off in _block_offsets(raw, len(value))]
    out: list[int] = []
    style = node.style
    j = 1 if style in ("'", '"') else 0
    i = 0
    n = len(value)
    while i < n and j < len(raw):
        ch = raw[j]
        if style == '"' and ch == "\\":
            nxt = raw[j + 1] if j + 1 < len(raw) else ""
            if nxt in "\r\n":  # escaped line break: contributes nothing
                j += 2
                while j < len(raw) and raw[j] in " \t\r\n":
                    j += 1
                continue
            out.append(node.start + j)
            j += _ESCAPE_LENGTH.get(nxt, 2)
            i += 1
            continue
        if style == "'" and ch == "'" and raw[j + 1 : j + 2] == "'":
            out.append(node.start + j)
            j += 2
            i += 1
            continue
        if ch in "\r\n":  # a folded line break: a space (or newlines for blank lines) in the value
            here = j
            j += 1
            while j < len(raw) and raw[j] in " \t":
                j += 1
            while i < n and value[i] in " \n":
                out.append(node.start + here)
                i += 1
                if value[i - 1] == " ":
                    break
            continue
        out.append(node.start + j)
        j += 1
        i += 1
    end = node.start + j
    while len(out) < n:
        out.append(end)
    out.append(end)
    return out


def _block_offsets(raw: str, length: int) -> list[int]:
    newline = raw.find("\n")
    if newline == -1:
        return [0] * (length + 1)
    lines = raw[newline + 1 :].split("\n")
    indent = 0
    for line in lines:
        if line.strip():
            indent = len(line) - len(line.lstrip(" "))
            break
    out: list[int] = []
    position = newline + 1
    for line in lines:
        start = position + min(indent, len(line))
        out.extend(range(start, position + len(line)))
        out.append(position + len(line))  # the newline (or folding space) after the line
        position += len(line) + 1
        if len(out) > length:
            break
    end = min(position, len(raw))
    while len(out) < length + 1:
        out.append(end)
    return out[: length + 1]
