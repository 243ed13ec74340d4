"""Disk space: a check before a run starts, with a message that says what to do; and what a run
folder takes on disk, measured at every step without walking it all.

A run that starts on a (nearly) full disk fails mid-batch when captures or events cannot be
written; checking first turns that into one clear message and no wasted work.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from tbconsole.common import atomic
from tbconsole.common.formatting import format_size
from tbconsole.record.runfolder import RunFolder

MiB = 1 << 20

# What a training run needs free under config.log_path before it starts. A run writes captures
# (tokens and logprobs of every turn), trial folders, events.jsonl and the cookbook's logs there,
# and with the embedded engine its checkpoints (LoRA adapter and optimizer state per save). This
# is a floor that catches a full or nearly full disk up front, not an estimate of a run's size.
RUN_NEED_BYTES = 512 * MiB


class DiskSpaceError(OSError):
    """Not enough free space where a run would write. The message is meant for the user."""


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
            f"not enough disk space for {what} ({path}): {format_size(free)} free on the filesystem of "
            f"{where}, {format_size(need_bytes)} needed; free space or point {what} elsewhere"
        )
    return free


# A folder of one step's files: capture/step_000003, trials/step_000003, trainer_logprobs/…, the
# held-out evaluation's, the cookbook's iteration_000003. Two steps later nothing writes there.
STEP_FOLDER = re.compile(r"(?:step|iteration)_(\d+)")
SIZES_VERSION = 1


class FolderSize:
    """Bytes a run folder takes on disk (what ``du`` counts), measured again at every step: a
    step's folder is walked while the run may still write to it, then remembered with its mtime
    (walked again if an entry was added or removed there, e.g. trial folders deleted by hand). A
    measure lists the step folders' parents and walks the newest steps' folders and what is not
    per step (top-level files, checkpoints): a day-long run's 3,200 trial folders are not walked
    again at every step, nor by every ``tbconsole runs``."""

    def __init__(self, root: str | os.PathLike, settled: dict[str, list[int]] | None = None):
        self.root = Path(root)
        self.settled: dict[str, list[int]] = settled or {}  # step folder (from root) → [mtime_ns, bytes]

    def measure(self, step: int) -> int:
        """Bytes under the folder now, ``step`` being the run's newest step. Folders of steps
        before ``step - 1`` are final (a step's training may write after the next one began)."""
        kept: dict[str, list[int]] = {}
        total = self._walk(str(self.root), step, kept)
        self.settled = kept  # folders that are gone are forgotten
        return total

    def _walk(self, folder: str, step: int, kept: dict[str, list[int]]) -> int:
        total = 0
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:  # removed or unreadable meanwhile: nothing of it to count
            return 0
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                    continue
                match = STEP_FOLDER.fullmatch(entry.name)
                if match is None or int(match.group(1)) >= step - 1:
                    total += self._walk(entry.path, step, kept)
                    continue
                key = os.path.relpath(entry.path, self.root)
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
                known = self.settled.get(key)
                size = known[1] if known is not None and known[0] == mtime else self._walk(entry.path, step, kept)
                kept[key] = [mtime, size]
                total += size
            except OSError:
                continue
        return total


def run_size(folder: RunFolder, step: int) -> int:
    """A run folder's bytes on disk (``FolderSize``) with what earlier measures remembered in its
    ``sizes`` file, which is written again (the runner at every step's end, ``tbconsole runs``
    where it may write). A damaged or foreign file is measured past, never trusted."""
    settled: dict[str, list[int]] = {}
    try:
        saved = json.loads(folder.sizes.read_text())
        if saved.get("version") == SIZES_VERSION:
            settled = {
                k: v
                for k, v in saved["settled"].items()
                if isinstance(k, str) and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
            }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    sizes = FolderSize(folder.root, settled)
    total = sizes.measure(step)
    if sizes.settled != settled:
        with contextlib.suppress(OSError):  # a run folder of someone else's: measured all the same
            atomic.write_json(folder.sizes, {"version": SIZES_VERSION, "settled": sizes.settled}, indent=None)
    return total
