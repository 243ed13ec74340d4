"""Whole-file writes: a reader (or a crash) sees the old file or the new one, never half of one.

The one home of write-then-rename in tbconsole. The temporary name starts with a dot and sits in
the target's folder, so the rename never crosses a filesystem and folder scans can skip it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def temp_name(path: Path) -> Path:
    """The hidden temporary sibling ``path`` is written to before the rename."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_bytes(path: str | Path, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` whole; on any error the target is untouched and no temporary
    file is left behind (a full disk loses the new version, never the old one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str, *, fsync: bool = False) -> Path:
    return write_bytes(path, text.encode("utf-8"), fsync=fsync)


def write_json(path: str | Path, data: Any, *, indent: int | None = 1, fsync: bool = False) -> Path:
    """``data`` as JSON (with a trailing newline), written whole."""
    return write_text(path, json.dumps(data, indent=indent) + "\n", fsync=fsync)
