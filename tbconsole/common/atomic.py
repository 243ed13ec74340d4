"""Whole-file writes: a reader (or a crash) sees the old file or the new one, never half of one.

The one home of write-then-rename in tbconsole, for files and for whole folders
(``replace_dir``). The temporary name starts with a dot and sits in the target's folder, so the
rename never crosses a filesystem and folder scans can skip it.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def replace_dir(path: str | Path) -> Iterator[Path]:
    """A folder's new content, built before anyone sees it: yields a fresh hidden folder beside
    ``path`` to fill; when the block ends without an error, that folder takes ``path``'s place
    (a folder already there is removed). On an error the new folder is removed and ``path`` is
    left as it was. Readers see the old folder or the whole new one; the swap is two renames, so
    for an instant between them there is none."""
    path = Path(path)
    # Unique per call, not per process: two threads may build the same folder at once.
    tmp = path.with_name(f"{temp_name(path).name}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        yield tmp
        if path.exists():
            # Moved aside, then removed: a crash or a failing removal never leaves a half-deleted
            # folder in place, as removing it there first would.
            old = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))
            path.rename(old)
            try:
                tmp.rename(path)
            except BaseException:
                old.rename(path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # after the swap there is nothing left here
