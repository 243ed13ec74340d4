"""Another writer filling a filesystem, for the full-disk tests."""

import errno
import itertools
import os
from pathlib import Path

from tbconsole.runs import diskspace

CHUNK = bytes(1 << 20)


def fill_disk(where: Path, leave: int = 0) -> Path | None:
    """Take the filesystem's free space, all of it or all but ``leave`` bytes, in a new file
    beside what is there; returns the file (to free the space again), or None where the disk was
    already so full that not even a new file could be made. Unbuffered writes: a write the full
    disk refuses is refused here, never again when the file is closed."""
    for n in itertools.count():
        filler = where / f"filler{n}"
        if not filler.exists():
            break
    try:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            return None
        raise
    try:
        want = diskspace.free_bytes(where) - leave
        while want > 0:
            try:
                written = os.write(fd, CHUNK[: min(len(CHUNK), want)])
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    break
                raise
            if not written:
                break
            want -= written
    finally:
        os.close(fd)
    return filler
