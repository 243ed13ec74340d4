"""Model and tool output as inert plain text.

Anything a model or a tool printed can contain Rich markup (``[bold red]``), ANSI/CSI escapes,
OSC sequences (window title, hyperlinks, clipboard), bells, backspaces, carriage returns or
bidi overrides. ``plain`` makes every such byte visible and harmless (control pictures like
``␛``), and ``text`` wraps it in a ``rich.text.Text`` so that no markup is ever parsed.

The state's paths and ids (trial ids, task names, trial folders, the run folder) are as the runner
wrote them, control characters and all (``tbconsole.common.inert``: the console finds files and sends
commands by them): a view that draws one passes it through ``plain``, ``one_line`` or ``text``.
"""

from __future__ import annotations

from rich.text import Text

from tbconsole.common.inert import one_line, plain

__all__ = ["one_line", "plain", "text"]


def text(value: object, style: str = "", limit: int | None = None) -> Text:
    """A Text that shows the value's characters exactly, never as markup or escapes."""
    return Text(plain(value, limit), style=style, no_wrap=False)
