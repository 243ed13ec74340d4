"""The trials grid's arithmetic and its one line of words of its own: where to scroll so that
the cursor's cell shows, and what the grid says when the filter hides every trial. Pure."""

from __future__ import annotations

from rich.text import Text

from tbconsole.ui.present.sanitize import one_line


def scroll_to_cell(
    row: int,
    column: int,
    *,
    label_w: int,
    cell_w: int,
    pad: int,
    at: tuple[int, int],
    size: tuple[int, int],
) -> tuple[int, int]:
    """The scroll offset (x, y) that shows the cell at ``row``, ``column`` (1: the first cell) of
    a grid whose lines are a label ``label_w`` wide, then cells ``cell_w`` wide, each padded by
    ``pad`` on both sides; ``at``: the offset now, ``size``: the rows and columns in view (below
    the header). It scrolls no further than it must, and keeps the label column's room clear on
    the left."""
    x, y = at
    width, height = size
    if row < y:
        y = row
    elif row >= y + height:
        y = row - height + 1
    label = label_w + 2 * pad
    left = label + (column - 1) * (cell_w + 2 * pad)
    right = left + cell_w + 2 * pad
    if right > x + width:
        x = right - width
    if left < x + label:
        x = max(0, left - label)
    return x, y


def no_match_text(typed: str, pad: int, muted: str) -> Text:
    """The grid's first row while the filter hides every trial: it says so, and how to undo it
    (an empty grid says nothing). The filter is what was typed: shown as plain text."""
    text = Text(" " * pad, style=muted)
    text.append(f"no trial matches “{one_line(typed, 60)}”", style=muted)
    text.append(" — esc clears the filter", style=muted)
    return text
