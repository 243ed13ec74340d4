"""Free disk space: a check before a run starts, with a message that says what to do.

A run that starts on a (nearly) full disk fails mid-batch when captures or events cannot be
written; checking first turns that into one clear message and no wasted work.
"""

from __future__ import annotations

import os
from pathlib import Path

MiB = 1 << 20

# What a training run needs free under config.log_path before it starts. A run writes captures
# (tokens and logprobs of every turn), trial folders, events.jsonl and the cookbook's logs there,
# and with the embedded engine its checkpoints (LoRA adapter and optimizer state per save). This
# is a floor that catches a full or nearly full disk up front, not an estimate of a run's size.
RUN_NEED_BYTES = 512 * MiB


class DiskSpaceError(OSError):
    """Not enough free space where a run would write. The message is meant for the user."""


def human(n: float) -> str:
    """Bytes as a short human-readable size: 512 B, 1.5 KiB, 12.0 MiB, 3.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def existing_ancestor(path: str | os.PathLike) -> Path:
    """``path`` itself if it exists, else its nearest existing parent (where it would be made)."""
    p = Path(path).expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes an unprivileged writer can still use on the filesystem that holds ``path`` (or
    would hold it: the nearest existing ancestor). f_bavail, not f_bfree: root's reserved
    blocks are not ours to count on."""
    st = os.statvfs(existing_ancestor(path))
    return st.f_bavail * st.f_frsize


def check_free(path: str | os.PathLike, need_bytes: int = RUN_NEED_BYTES, what: str = "config.log_path") -> int:
    """Raise DiskSpaceError unless ``path``'s filesystem has ``need_bytes`` free; return the
    free bytes. ``what`` names the setting the path came from, for the message."""
    free = free_bytes(path)
    if free < need_bytes:
        where = existing_ancestor(path)
        raise DiskSpaceError(
            f"not enough disk space for {what} ({path}): {human(free)} free on the filesystem of "
            f"{where}, {human(need_bytes)} needed; free space or point {what} elsewhere"
        )
    return free
