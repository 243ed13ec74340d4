"""Where each piece of a scrolling column starts, in lines, from the pieces' heights."""

from __future__ import annotations

from bisect import bisect_right


class PieceLines:
    """The first line of each piece and the total, from their heights (exact or estimated): the
    piece at a line; after one piece's height changed, only the starts below it are worked out
    again."""

    def __init__(self) -> None:
        self.heights: list[int] = []
        self.starts: list[int] = [0]  # first line of each piece, then the total

    @property
    def total(self) -> int:
        return self.starts[-1]

    def reset(self, heights: list[int]) -> None:
        starts = [0]
        total = 0
        for h in heights:
            total += h
            starts.append(total)
        self.heights = heights
        self.starts = starts

    def set_height(self, i: int, height: int) -> None:
        self.heights[i] = height
        starts = self.starts
        total = starts[i]
        for k in range(i, len(self.heights)):
            total += self.heights[k]
            starts[k + 1] = total

    def at(self, y: int) -> int:
        """The piece at line ``y`` (the first or last piece beyond either end)."""
        return max(0, min(len(self.heights) - 1, bisect_right(self.starts, y) - 1))
