"""JSON lines read while they are appended: the one home of reading a ``.jsonl`` from a byte offset.

Every such file here (``events.jsonl``, a trial's capture file, the cookbook's spans) is written
one whole line at a time by another process, so a reader can always meet a last line still
being written. The rule every reader follows: only whole lines (ending in a newline) are taken,
and the offset moves past them only. A line still being written stays in the file and is read
whole by a later call; nothing is kept in memory between reads. The offset is thus always at a
line's start: what was returned is exactly the whole lines of the file's first ``offset`` bytes,
so a reader can resume from an offset saved elsewhere (the reducer snapshot records one).

Decoding a line is the caller's: a reader of events skips a damaged line, a capture viewer
counts it, the trainer's capture reader (``proxy.capture.read_capture``) refuses the file.
``loads`` is the parser they share for a line of JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO

import orjson


def whole_lines(handle: BinaryIO, offset: int, limit: int | None = None, end: int | None = None) -> tuple[bytes, bool]:
    """The whole lines of ``handle`` from ``offset``: ``(data, more)``. ``data`` ends with a
    newline, or is empty while no line from ``offset`` is whole; the next read starts at
    ``offset + len(data)``. At most ``limit`` bytes are taken (None: up to the end of the file),
    except that a line longer than the limit is read whole (the read doubles until the line
    ends): a long line never stalls a reader. Nothing at or past ``end`` is read. ``more`` says
    the read stopped at its limit (or at ``end``), so the next one may find more at once."""
    if limit is None:
        handle.seek(offset)
        data = handle.read() if end is None else handle.read(max(0, end - offset))
        return data[: data.rfind(b"\n") + 1], False
    want = limit if end is None else min(limit, end - offset)
    if want <= 0:
        return b"", False
    while True:
        handle.seek(offset)
        data = handle.read(want)
        cut = data.rfind(b"\n") + 1
        if cut or len(data) < want or (end is not None and offset + want >= end):
            break
        want = want * 2 if end is None else min(want * 2, end - offset)
    # No whole line (one still being written): nothing more until it ends.
    return data[:cut], bool(cut) and len(data) == want


def new_lines(path: Path, offset: int, limit: int | None = None) -> tuple[list[bytes], int]:
    """The whole lines of the file at ``path`` from ``offset`` (each without its newline) and
    the offset after them; ``([], offset)`` while the file does not exist. The file is opened
    afresh at each call, so a reader follows the path: a file replaced by a shorter one is read
    again from its start. Other errors (OSError) are the caller's."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size < offset:
                offset = 0
            data, _ = whole_lines(handle, offset, limit)
    except FileNotFoundError:
        return [], offset
    return data.split(b"\n")[:-1], offset + len(data)


def loads(line: str | bytes) -> Any:
    """One line of JSON; ValueError when it is not JSON. orjson first (the fast path); orjson
    takes strict JSON only, while ``json.dumps`` writes NaN and Infinity for such floats (a
    diverged loss) and a cut line may hold bad UTF-8, so for those the standard parser decides
    (bad bytes replaced)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line if isinstance(line, str) else line.decode("utf-8", errors="replace"))
