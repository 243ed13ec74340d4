"""Model and tool output as inert plain text.

Anything a model or a tool printed can contain Rich markup (``[bold red]``), ANSI/CSI escapes,
OSC sequences (window title, hyperlinks, clipboard), bells, backspaces, carriage returns or
bidi overrides. ``plain`` makes every such byte visible and harmless (control pictures like
``␛``), and ``text`` wraps it in a ``rich.text.Text`` so that no markup is ever parsed.
"""

from __future__ import annotations

from rich.text import Text

from tbconsole.inert import one_line, plain

__all__ = ["one_line", "plain", "text"]


def text(value: object, style: str = "", limit: int | None = None) -> Text:
    """A Text that shows the value's characters exactly, never as markup or escapes."""
    return Text(plain(value, limit), style=style, no_wrap=False)
