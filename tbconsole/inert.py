"""Text from outside as inert characters: the one home of what may reach a terminal.

Anything a model, a tool, a task folder or a hand-edited event file holds can contain ANSI/CSI
escapes, OSC sequences (window title, hyperlinks, clipboard), bells, backspaces, carriage
returns or bidi overrides. ``plain`` makes each such character visible and harmless (control
pictures like ``␛``); tabs and newlines stay, for the caller to lay out.

``inert_event`` applies it to every string an event carries, nested ones included. The reducer
folds events through it, so the state every view draws from holds no control character at all,
whatever the view (panels, screens, log, notifications, the summary printed on exit). Events
on the wire and in ``events.jsonl`` keep their exact text; only what is shown changes. Rich
markup in such text is harmless as long as views build ``rich.text.Text`` from it, never
markup strings (``tbconsole.ui.present.sanitize.text``).
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from typing import Any

# C0 controls except tab/newline, DEL, C1 controls, and the bidi/formatting overrides.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


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
    return CONTROL.sub(_picture, s)


# Whole ANSI sequences as programs write them to a terminal: CSI (colours, cursor moves), OSC
# (title, hyperlink; ended by BEL or ST) and the two-character escapes.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(value: str) -> str:
    """``value`` without the escape sequences a program meant for a terminal (a log's colours:
    litellm's ``\x1b[1;31m``). What is left (a lone ESC, other controls) is still for ``plain``."""
    return ANSI.sub("", value) if "\x1b" in value else value


def one_line(value: object, limit: int = 200) -> str:
    return plain(value, limit).replace("\n", " ⏎ ").replace("\t", " ")


def inert_value(value: Any) -> Any:
    """``value`` with every string in it (dict keys, list items, nested) made inert; the same
    object when nothing needed it (the common case costs one scan per string)."""
    if isinstance(value, str):
        return CONTROL.sub(_picture, value.replace("\r\n", "\n")) if CONTROL.search(value) else value
    if isinstance(value, dict):
        items = [(inert_value(k), inert_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        out = [inert_value(v) for v in value]
        if all(a is b for a, b in zip(out, value, strict=True)):
            return value
        return type(value)(out)
    return value


_SCALAR_TEXT = {"str", "str | None"}
_NO_TEXT = {"int", "float", "bool", "int | None", "float | None", "bool | None"}


@cache
def _text_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An event class's fields that can hold text: (plain strings, anything else that may nest
    text). Numbers and booleans by annotation are skipped."""
    fields = dataclasses.fields(cls)
    scalar = tuple(f.name for f in fields if str(f.type) in _SCALAR_TEXT)
    nested = tuple(f.name for f in fields if str(f.type) not in _SCALAR_TEXT | _NO_TEXT)
    return scalar, nested


def inert_event[E](event: E) -> E:
    """The event with every string it carries made inert (the same object when none needed it).
    Runs once per event folded, so the common case is a scan per string and nothing else."""
    cls: type = type(event)
    scalar, nested = _text_fields(cls)
    search = CONTROL.search
    changes: dict[str, Any] = {}
    for name in scalar:
        value = getattr(event, name)
        if value and search(value):
            changes[name] = inert_value(value)
    for name in nested:
        value = getattr(event, name)
        if value is not None and not isinstance(value, (int, float)):
            cleaned = inert_value(value)
            if cleaned is not value:
                changes[name] = cleaned
    return dataclasses.replace(event, **changes) if changes else event  # type: ignore[type-var]
