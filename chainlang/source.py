"""Source files and positions: 1-based line and column for every node and token."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass


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

    __slots__ = ("path", "text", "_line_starts")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        starts = [0]
        find = text.find
        i = find("\n")
        while i != -1:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self._line_starts = starts

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
        start = self._line_starts[line - 1]
        end = self._line_starts[line] - 1 if line < len(self._line_starts) else len(self.text)
        return self.text[start:end]
