"""Lines laid out here, before Textual sees them: Textual wraps a widget's text at any space (Rich's
``no_wrap`` and ``overflow`` are not carried over into its own text), so a line that must not
wrap, or must wrap in a certain way, is made to fit first.

- ``hang``: words wrapped to a width, every line indented: a value glued to its words
  (``GLUE`` between them, ``glue_numbers``) never starts a line of its own;
- ``fit``: the longest of a line's wordings that fits a width.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len

GLUE = "\u00a0"  # between words that stay on one line; drawn as a space
_BEFORE_NUMBER = re.compile(r" (?=[(\[−+-]?\.?\d)")  # a space before 0.51, (0.5158), −3, [2


def glue_numbers(text: str) -> str:
    """``text`` with every number glued to the word before it (``step 2``, ``measured 0.51``,
    ``… rule (0.5158)``): wrapped by ``hang``, a number never starts a line alone."""
    return _BEFORE_NUMBER.sub(GLUE, text)


def _split(word: str, room: int) -> list[str]:
    """A word wider than a whole line, cut into pieces of ``room`` cells."""
    pieces, piece = [], ""
    for ch in word:
        if piece and cell_len(piece + ch) > room:
            pieces.append(piece)
            piece = ""
        piece += ch
    return [*pieces, piece] if piece else pieces


def hang(text: str, width: int, indent: int = 0) -> list[str]:
    """``text`` wrapped at its spaces into lines of at most ``width`` cells, each starting with
    ``indent`` spaces. Words joined by ``GLUE`` move to the next line together; only a word wider
    than a whole line is cut."""
    pad = " " * indent
    room = max(1, width - indent)
    lines: list[str] = []
    line = ""
    for word in (w for w in text.split(" ") if w):  # (not split(): that would split at GLUE too)
        for piece in _split(word, room) if cell_len(word) > room else [word]:
            if not line:
                line = piece
            elif cell_len(line) + 1 + cell_len(piece) <= room:
                line += " " + piece
            else:
                lines.append(line)
                line = piece
    if line or not lines:
        lines.append(line)
    return [pad + line.replace(GLUE, " ") for line in lines]


def fit(wordings: Sequence[str], width: int) -> str:
    """The first of ``wordings`` (longest first) that fits ``width`` cells, else the last."""
    for wording in wordings:
        if cell_len(wording) <= width:
            return wording
    return wordings[-1] if wordings else ""
