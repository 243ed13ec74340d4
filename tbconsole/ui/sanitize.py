"""Model and tool output as inert plain text.

Anything a model or a tool printed can contain Rich markup (``[bold red]``), ANSI/CSI escapes,
OSC sequences (window title, hyperlinks, clipboard), bells, backspaces, carriage returns or
bidi overrides. ``plain`` makes every such byte visible and harmless (control pictures like
``␛``), and ``text`` wraps it in a ``rich.text.Text`` so that no markup is ever parsed.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 controls except tab/newline, DEL, C1 controls, and the bidi/formatting overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _picture(match: re.Match) -> str:
    ch = match.group(0)
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (ESC → ␛)
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"


def plain(value: object, limit: int | None = None) -> str:
    s = "" if value is None else str(value)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    s = s.replace("\r\n", "\n")
    return _CONTROL.sub(_picture, s)


def text(value: object, style: str = "", limit: int | None = None) -> Text:
    """A Text that shows the value's characters exactly, never as markup or escapes."""
    return Text(plain(value, limit), style=style, no_wrap=False)


def one_line(value: object, limit: int = 200) -> str:
    return plain(value, limit).replace("\n", " ⏎ ").replace("\t", " ")
