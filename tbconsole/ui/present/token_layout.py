"""A reply's tokens laid out in rows of a given width, each token one styled span.

The token view wraps the text itself, at token boundaries (a token that does not fit on the
rest of a row starts the next; one longer than a row is split), so it knows the row and column
of every token: the cursor moves by rows, a click maps to a token, and the view scrolls to the
cursor exactly. Whitespace is made visible enough to see and click: a newline shows as ``⏎``
before the line break, a tab as ``⇥``, a token of spaces only as ``·`` per space; an empty
token as ``∅``. Every character passes through ``sanitize.plain`` (model output is inert text).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from tbconsole.ui.present.sanitize import plain


def shown(piece: str) -> str:
    """What a token's text looks like in the view (newlines kept as line breaks after ``⏎``)."""
    if piece == "":
        return "∅"
    if piece.strip(" ") == "":
        return "·" * len(piece)
    return plain(piece).replace("\t", "⇥").replace("\n", "⏎\n")


@dataclass(frozen=True)
class TokenLayout:
    text: Text  # the rows, joined by newlines, each token styled (no wrapping left to Rich)
    spans: tuple[tuple[int, int], ...]  # each token's [start, end) in text
    rows: tuple[int, ...]  # each token's first row
    cols: tuple[int, ...]  # ... and first column
    row_count: int  # rows in all

    def row_tokens(self, row: int) -> range:
        """The tokens that start on ``row`` (empty when a row only continues a long token)."""
        return range(bisect_right(self.rows, row - 1), bisect_right(self.rows, row))

    def with_cursor(self, index: int | None, style: Style | str) -> Text:
        out = self.text.copy()
        if index is not None and 0 <= index < len(self.spans):
            start, end = self.spans[index]
            out.stylize(style, start, end)
        return out

    def vertical(self, index: int, rows: int, goal_col: int) -> int:
        """The token ``rows`` rows above (negative) or below ``index`` nearest ``goal_col``: on
        the first row in that direction that starts any token."""
        if not self.rows:
            return index
        last = self.row_count - 1
        row = self.rows[index] + rows
        step = -1 if rows < 0 else 1
        while 0 <= row <= last and not self.row_tokens(row):
            row += step
        if row < 0 or row > last:
            return 0 if rows < 0 else len(self.rows) - 1
        candidates = self.row_tokens(row)
        best = candidates[0]
        for i in candidates:
            if self.cols[i] <= goal_col:
                best = i
        return best


def _split_to_width(part: str, width: int) -> tuple[str, str]:
    """The longest head of ``part`` that fits ``width`` cells (at least one character)."""
    used = 0
    for n, ch in enumerate(part):
        used += cell_len(ch)
        if used > width:
            return part[: max(1, n)], part[max(1, n) :]
    return part, ""


def lay_out(pieces: Sequence[str], styles: Sequence[Style], width: int) -> TokenLayout:
    """Tokens (their text as the decoder gives it) in rows of ``width`` cells."""
    width = max(8, width)
    text = Text(no_wrap=True, overflow="ignore", end="")
    spans: list[tuple[int, int]] = []
    rows: list[int] = []
    cols: list[int] = []
    row = col = 0

    def newline() -> None:
        nonlocal row, col
        text.append("\n")
        row, col = row + 1, 0

    for piece, style in zip(pieces, styles, strict=True):
        parts = shown(piece).split("\n")
        head = cell_len(parts[0])
        if col > 0 and col + head > width and head <= width:
            newline()  # start the token on the next row rather than split it
        start = len(text)
        rows.append(row)
        cols.append(col)
        for n, part in enumerate(parts):
            if n:
                text.append("\n", style=style)
                row, col = row + 1, 0
            while part:
                if col >= width:
                    text.append("\n", style=style)
                    row, col = row + 1, 0
                chunk, part = _split_to_width(part, width - col)
                text.append(chunk, style=style)
                col += cell_len(chunk)
        spans.append((start, len(text)))
    return TokenLayout(text=text, spans=tuple(spans), rows=tuple(rows), cols=tuple(cols), row_count=row + 1)


def word_start(pieces: Sequence[str], index: int, direction: int) -> int:
    """The next (direction 1) or previous (-1) token that begins a word: one that starts with
    whitespace, or follows a token ending in whitespace."""
    i = index + direction
    while 0 <= i < len(pieces):
        piece, before = pieces[i], pieces[i - 1] if i > 0 else "\n"
        if (piece[:1].isspace() and piece.strip()) or (before[-1:].isspace() and piece[:1] and not piece[:1].isspace()):
            return i
        i += direction
    return 0 if direction < 0 else len(pieces) - 1
