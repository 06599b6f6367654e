"""Source files and positions: 1-based line and column for every node and token."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

# YAML 1.2 line breaks. libyaml (YAML 1.1) also counts U+0085, U+2028 and U+2029; the
# loader recomputes positions from character indexes in files that contain them.
LINE_BREAK = re.compile("\r\n|[\r\n]")
YAML11_ONLY_BREAKS = ("\x85", "\u2028", "\u2029")


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file; lines and columns are 1-based, end is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(line: int, column: int) -> "Span":
        return Span(line, column, line, column + 1)


class SourceFile:
    """The text of one input file, with fast offset → (line, column) mapping."""

    __slots__ = ("path", "text", "_line_starts", "_line_ends")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        starts = [0]
        ends = []
        for match in LINE_BREAK.finditer(text):
            ends.append(match.start())
            starts.append(match.end())
        ends.append(len(text))
        self._line_starts = starts
        self._line_ends = ends

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based character offset."""
        offset = max(0, min(offset, len(self.text)))
        index = bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def offset(self, line: int, column: int) -> int:
        """0-based offset of a 1-based (line, column)."""
        if line < 1:
            return 0
        if line > len(self._line_starts):
            return len(self.text)
        return min(self._line_starts[line - 1] + column - 1, len(self.text))

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(max(end, start + 1))
        return Span(line, column, end_line, end_column)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline ('' when out of range)."""
        if line < 1 or line > len(self._line_starts):
            return ""
        return self.text[self._line_starts[line - 1] : self._line_ends[line - 1]]

    @property
    def line_count(self) -> int:
        return len(self._line_starts)
