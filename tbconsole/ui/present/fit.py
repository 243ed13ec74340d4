"""Lines laid out here, before Textual sees them: Textual wraps a widget's text at any space (Rich's
``no_wrap`` and ``overflow`` are not carried over into its own text), so a line that must not
wrap, or must wrap in a certain way, is made to fit first.

- ``hang`` / ``hang_text``: words wrapped to a width, every line indented: a value glued to its
  words (``GLUE`` between them, ``glue_numbers``) never starts a line of its own;
- ``fit``: the longest of a line's wordings that fits a width.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text

GLUE = "\u00a0"  # between words that stay on one line; drawn as a space
_WORD = re.compile("[^ ]+")
_BEFORE_NUMBER = re.compile(r" (?=[(\[−+-]?\.?\d)")  # a space before 0.51, (0.5158), −3, [2


def glue_numbers(text: str) -> str:
    """``text`` with every number glued to the word before it (``step 2``, ``measured 0.51``,
    ``… rule (0.5158)``): wrapped by ``hang``, a number never starts a line alone."""
    return _BEFORE_NUMBER.sub(GLUE, text)


def _pieces(plain: str, room: int) -> list[tuple[int, int]]:
    """Where ``plain``'s words are (between single spaces: ``GLUE`` is part of a word), a word
    wider than ``room`` cells cut into pieces that fit."""
    out: list[tuple[int, int]] = []
    for m in _WORD.finditer(plain):
        a, b = m.span()
        if cell_len(plain[a:b]) <= room:
            out.append((a, b))
            continue
        start, used = a, 0
        for i in range(a, b):
            w = cell_len(plain[i])
            if i > start and used + w > room:
                out.append((start, i))
                start, used = i, 0
            used += w
        out.append((start, b))
    return out


def hang_text(text: Text, width: int, indent: int = 0, first: int | None = None) -> Text:
    """``text`` (styles kept) wrapped at its spaces into lines of at most ``width`` cells, the
    first indented by ``first`` spaces (default ``indent``), the others by ``indent``. Words joined
    by ``GLUE`` move to the next line together; only a word wider than a whole line is cut. The
    spaces between the words of one line are kept as they were."""
    first = indent if first is None else first
    plain = text.plain
    lines: list[tuple[int, int]] = []
    for a, b in _pieces(plain, max(1, width - max(first, indent))):
        room = max(1, width - (first if not lines else indent))
        if lines and cell_len(plain[lines[-1][0] : b]) <= room:
            lines[-1] = (lines[-1][0], b)
        else:
            lines.append((a, b))
    out = Text(" " * first, style=text.style)
    for i, (a, b) in enumerate(lines):
        if i:
            out.append("\n" + " " * indent)
        out.append_text(text[a:b])
    return Text(out.plain.replace(GLUE, " "), style=out.style, spans=list(out.spans), end="")


def hang(text: str, width: int, indent: int = 0) -> list[str]:
    """``text`` wrapped at its spaces into lines of at most ``width`` cells, each starting with
    ``indent`` spaces (``hang_text`` for plain text)."""
    return hang_text(Text(text), width, indent).plain.split("\n")


def fit(wordings: Sequence[str], width: int) -> str:
    """The first of ``wordings`` (longest first) that fits ``width`` cells, else the last."""
    for wording in wordings:
        if cell_len(wording) <= width:
            return wording
    return wordings[-1] if wordings else ""
