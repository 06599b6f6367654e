"""Map an offset inside a scalar's *value* back to its offset in the file.

An expression error is reported at the column of the offending token in the
file, so quotes, escapes, folded lines and block indentation must be undone.
"""

from __future__ import annotations

from chainlang.loader import ScalarNode

_ESCAPE_LENGTH = {"x": 4, "u": 6, "U": 10}


def source_offset(text: str, node: ScalarNode, value_offset: int) -> int:
    """File offset of character `value_offset` of `node.text` (best effort, never raises)."""
    raw = text[node.start : node.end]
    value = node.text
    target = max(0, min(value_offset, len(value)))
    style = node.style
    j = 0
    if style in ("'", '"'):
        j = 1
    elif style in ("|", ">"):
        return node.start + _block_offset(raw, value, target)
    i = 0
    while i < target and j < len(raw):
        ch = raw[j]
        if style == '"' and ch == "\\":
            nxt = raw[j + 1] if j + 1 < len(raw) else ""
            if nxt in "\r\n":  # escaped line break: contributes nothing
                j += 2
                while j < len(raw) and raw[j] in " \t\r\n":
                    j += 1
                continue
            j += _ESCAPE_LENGTH.get(nxt, 2)
            i += 1
            continue
        if style == "'" and ch == "'" and raw[j + 1 : j + 2] == "'":
            j += 2
            i += 1
            continue
        if ch in "\r\n":  # folded line break: one space (or newlines for blank lines) in the value
            j += 1
            while j < len(raw) and raw[j] in " \t":
                j += 1
            while i < target and value[i] in " \n":
                i += 1
                if value[i - 1] == " ":
                    break
            continue
        j += 1
        i += 1
    return node.start + j


def _block_offset(raw: str, value: str, target: int) -> int:
    newline = raw.find("\n")
    if newline == -1:
        return 0
    lines = raw[newline + 1 :].split("\n")
    indent = 0
    for line in lines:
        if line.strip():
            indent = len(line) - len(line.lstrip(" "))
            break
    position = newline + 1
    consumed = 0
    for line in lines:
        content = line[indent:] if len(line) >= indent else ""
        if consumed + len(content) >= target:
            return position + min(indent, len(line)) + (target - consumed)
        consumed += len(content) + 1  # the newline (or folding space) between lines
        position += len(line) + 1
    return min(position, len(raw))
