"""Map an offset inside a scalar's *value* back to its offset in the file.

An expression error is reported at the column of the offending token in the
file, so quotes, escapes, folded lines and block indentation must be undone.
The map of a scalar is built once, on its first diagnostic, so many errors in
one long string cost one pass over it.
"""

from __future__ import annotations

from chainlang.load.loader import ScalarNode
from chainlang.load.source import LINE_BREAK

_ESCAPE_LENGTH = {"x": 4, "u": 6, "U": 10}
_BREAKS = "\r\n\x85\u2028\u2029"  # libyaml folds these inside flow scalars


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
        line_start = max(text.rfind("\n", 0, node.start), text.rfind("\r", 0, node.start)) + 1
        header_line = text[line_start : node.start]
        parent_indent = len(header_line) - len(header_line.lstrip(" "))
        return [node.start + off for off in _block_offsets(raw, len(value), parent_indent)]
    out: list[int] = []
    style = node.style
    j = 1 if style in ("'", '"') else 0
    i = 0
    n = len(value)
    while i < n and j < len(raw):
        ch = raw[j]
        if style == '"' and ch == "\\":
            nxt = raw[j + 1] if j + 1 < len(raw) else ""
            if nxt in _BREAKS:  # escaped line break: contributes nothing
                j += 2
                while j < len(raw) and raw[j] in " \t" + _BREAKS:
                    j += 1
                continue
            out.append(node.start + j)
            length = _ESCAPE_LENGTH.get(nxt, 2)
            if nxt == "u" and _is_high_surrogate(raw[j + 2 : j + 6]) and raw[j + 6 : j + 8] == "\\u":
                length = 12  # a surrogate pair: two escapes, one character
            j += length
            i += 1
            continue
        if style == "'" and ch == "'" and raw[j + 1 : j + 2] == "'":
            out.append(node.start + j)
            j += 2
            i += 1
            continue
        if ch in _BREAKS:  # a folded line break: a space (or newlines for blank lines) in the value
            here = j
            j += 2 if raw[j : j + 2] == "\r\n" else 1
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


def _is_high_surrogate(hex_digits: str) -> bool:
    try:
        return 0xD800 <= int(hex_digits, 16) <= 0xDBFF
    except ValueError:
        return False


def _block_offsets(raw: str, length: int, parent_indent: int = 0) -> list[int]:
    """Offsets (relative to `raw`) of a block scalar's value: the header line is skipped, and
    each content line loses the block's indentation (explicit, like |2, or the first line's)."""
    lines = [(m.start(), m.end()) for m in LINE_BREAK.finditer(raw)]
    if not lines:
        return [0] * (length + 1)
    header = raw[: lines[0][0]]
    # content lines: (start, end of text, start of the next line)
    content: list[tuple[int, int, int]] = []
    position = lines[0][1]
    for brk_start, brk_end in lines[1:]:
        content.append((position, brk_start, brk_end))
        position = brk_end
    content.append((position, len(raw), len(raw)))
    digits = [c for c in header if c.isdigit()]
    if digits:  # an explicit indentation indicator counts from the parent's indentation
        indent = parent_indent + int(digits[0])
    else:
        indent = 0
        for start, end, _ in content:
            text = raw[start:end]
            if text.strip():
                indent = len(text) - len(text.lstrip(" "))
                break
    out: list[int] = []
    for start, end, _ in content:
        first = min(start + indent, end)
        out.extend(range(first, end))
        out.append(end)  # the line break (or folding space) after the line
        if len(out) > length:
            break
    while len(out) < length + 1:
        out.append(len(raw))
    return out[: length + 1]
