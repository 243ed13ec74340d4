"""Small helpers shared by tests."""

from pathlib import Path


def pids_with(marker: str) -> list[int]:
    """Host pids whose command line contains marker."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found
