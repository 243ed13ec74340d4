"""Text from outside as inert characters: the one home of what may reach a terminal.

Anything a model, a tool, a task folder or a hand-edited event file holds can contain ANSI/CSI
escapes, OSC sequences (window title, hyperlinks, clipboard), bells, backspaces, carriage
returns or bidi overrides. ``plain`` makes each such character visible and harmless (control
pictures like ``␛``); tabs and newlines stay, for the caller to lay out.

The rule: paths, ids and every value the console finds things by stay as the runner wrote them;
only what is drawn is made inert. A task named with an escape code makes a trial folder, a trial
id and a capture file of that very name: the transcript opens that folder, find reads that file,
the Harbor-view command names it, the ledger's drop/weight/re-admit send that name back.

``inert_event`` applies ``plain`` to every string an event carries, nested ones included (the
headless log prints events through it). With ``keep_raw`` (the reducer's way) it leaves the
fields marked ``RAW`` alone: the event classes declare those once, as field metadata
(``tbconsole.record.events``: trial ids, task names, trial folders, the run folder, a held-out event's
wrapped line, which is folded the same way when unwrapped). Everything else reaches the state
inert. A view that draws a raw field passes it through ``plain``/``one_line`` itself, and a
string the state composes from one (a log line) is made inert where it is composed.
``tests/ui/screens/test_inert_events.py`` holds every view to it: hostile text around every string of
every event, raw fields included, read back from every screen.

Events on the wire and in ``events.jsonl`` keep their exact text; only what is shown changes.
Rich markup in such text is harmless as long as views build ``rich.text.Text`` from it, never
markup strings (``tbconsole.ui.present.sanitize.text``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
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


RAW: Mapping[str, bool] = MappingProxyType({"tbconsole.raw": True})
"""Field metadata (``field(metadata=RAW)``) of an event field that holds a path or an id the
console finds things by: ``inert_event(..., keep_raw=True)`` leaves it as the runner wrote it."""


def is_raw(field: dataclasses.Field) -> bool:
    return bool(field.metadata.get("tbconsole.raw"))


def raw_fields(cls: type) -> tuple[str, ...]:
    """The names of an event class's fields marked ``RAW``."""
    return tuple(f.name for f in dataclasses.fields(cls) if is_raw(f))


_SCALAR_TEXT = {"str", "str | None"}
_NO_TEXT = {"int", "float", "bool", "int | None", "float | None", "bool | None"}


@cache
def _text_fields(cls: type, keep_raw: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An event class's fields that can hold text: (plain strings, anything else that may nest
    text). Numbers and booleans by annotation are skipped, and with ``keep_raw`` the raw ones."""
    fields = [f for f in dataclasses.fields(cls) if not (keep_raw and is_raw(f))]
    scalar = tuple(f.name for f in fields if str(f.type) in _SCALAR_TEXT)
    nested = tuple(f.name for f in fields if str(f.type) not in _SCALAR_TEXT | _NO_TEXT)
    return scalar, nested


def inert_event[E](event: E, *, keep_raw: bool = False) -> E:
    """The event with every string it carries made inert (the same object when none needed it);
    with ``keep_raw``, every string but those of its ``RAW`` fields (the reducer's way: the state
    keeps paths and ids exact, its views draw them through ``plain``). Runs once per event
    folded, so the common case is a scan per string and nothing else."""
    cls: type = type(event)
    scalar, nested = _text_fields(cls, keep_raw)
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
