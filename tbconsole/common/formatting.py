"""What a person reads, formatted once: durations, counts, sizes, percentiles and times of day;
and a time as ISO text, for what programs read.

Every place that shows one of these to a person (the console's panels and screens, the headless
progress log, advisories, ``tbconsole runs``, ``tbconsole trial``, the notifier, the benchmarks'
reports) calls this module, so the same quantity reads the same everywhere. Machine-read text
(events, API responses, file names) is not formatted here, except its times (below).

Durations: ``format_duration`` for whole seconds (42s, 3m05s, 21h04m, 4d03h), ``format_seconds``
where a fraction of a second matters (0.4s, 12.3s; a minute or more as ``format_duration``),
``format_age`` for how long ago (3m05s ago; 5d ago past two days) and ``format_cell_duration`` for
a trial's three-character cell (42s, 12m, 3h).

Sizes: ``format_size`` in sentences (512 B, 1.5 KiB, 12 MiB, 3.2 GiB: two significant figures, so
a message stays put while the exact count moves); ``format_bytes`` and ``format_count`` in table
cells (at most five characters: 1.5K, 12.3M; 999, 1.2k).

Values: ``format_value`` for a metric's value (at most 9 characters: 0.5312, 1.20e-06, 12.3k) and
``format_reward`` for a reward (at most 5: 1, 0.33, -0.25, 1.2k).

**Times of day: local time, with its zone.** A person at a terminal reads the clock on the wall,
so every time of day shown to a person is the machine's local time, and says which zone it is
in, so that a log copied to someone elsewhere (or read from a server in another zone) is not off
by hours without a word: ``format_clock`` (14:03:22 CET) and ``format_timestamp`` (2026-01-01
14:03 CET). Nothing shows a time of day in UTC, or without its zone.

**Times that programs read: ISO 8601, in UTC.** ``format_iso_time`` (2026-01-01T13:03:22.250000+00:00)
writes every time that leaves as text for a program: the engine's API (checkpoints, sessions), the
ATIF export's steps, the W&B advisories table (to the second: 2026-01-01T13:03:22+00:00).

**Our own command, as a hint spells it.** ``command_line("attach", path)`` is what every hint that
names a tbconsole command prints (re-attach, resume, `tbconsole runs`): ``tbconsole …`` when the
``tbconsole`` on PATH is this installation, else this installation's script by its absolute path
(`make demo` runs ``.venv/bin/python`` without activating the venv, so a new shell has no
``tbconsole`` on PATH, or another one), so that a hint pasted into a new shell works.

The bottom layer: imports only the standard library and ``tbconsole.common.stats``.
"""

from __future__ import annotations

import functools
import math
import os
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import overload

from tbconsole.common.stats import percentile

NONE = "–"  # a value not known (yet)

# -- durations -----------------------------------------------------------------------------------


def format_duration(seconds: float | None) -> str:
    """Whole seconds in at most 6 characters below 100 days: 42s, 3m05s, 21h04m, 4d03h (past 99
    hours). Rounded to the second; a small negative (one clock a little behind another) keeps its
    sign once: -1m50s, never -1m-50s."""
    if seconds is None:
        return NONE
    whole = int(round(abs(seconds)))
    sign = "-" if seconds < 0 and whole else ""
    if whole < 60:
        return f"{sign}{whole}s"
    minutes, s = divmod(whole, 60)
    if minutes < 60:
        return f"{sign}{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    if hours < 100:
        return f"{sign}{hours}h{m:02d}m"
    days, h = divmod(hours, 24)
    return f"{sign}{days}d{h:02d}h"


def format_seconds(seconds: float | None) -> str:
    """A duration where tenths of a second matter (a model call, a trial's phase, a command):
    0.0s, 0.4s, 12.3s; from a minute on, ``format_duration`` (1m05s)."""
    if seconds is None:
        return NONE
    if abs(seconds) < 59.95:
        return f"{seconds:.1f}s"
    return format_duration(seconds)


def format_age(seconds: float) -> str:
    """How long ago: 42s ago, 3h02m ago; past two days only whole days (runs are listed for weeks):
    5d ago."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f}d ago"
    return f"{format_duration(seconds)} ago"


def format_cell_duration(seconds: float | None) -> str:
    """A duration in a trial's cell, 3 characters below 1000 hours: 42s, 99s, 12m, 3h (cut down,
    never rounded up: a phase shows 2m only once it has run two full minutes); "" if None."""
    if seconds is None:
        return ""
    s = int(seconds)
    if s < 100:
        return f"{s}s"
    if s < 6000:
        return f"{s // 60}m"
    return f"{s // 3600}h"


# -- counts and sizes --------------------------------------------------------------------------

COUNT_UNITS = ("", "k", "M", "G", "T", "P", "E")
BYTE_UNITS = ("B", "K", "M", "G", "T", "P", "E")  # 1024-based, as du -h and ls -h
COMPACT_WIDTH = 5  # the widest format_count / format_bytes (a minus sign adds one)
SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_count(n: float | None) -> str:
    """A count in at most ``COMPACT_WIDTH`` characters, so that it fits its cell whatever a day-long
    run adds up to: 999, 1.0k, 12.3k, 123k, 1.2M, 3.4G. Rounding never shows four digits: 999 999
    is 1.0M, not 1000k. A fraction keeps two decimals while it is small (1.25 datum/trial)."""
    return _compact(n, 1000, COUNT_UNITS)


def format_bytes(n: float | None) -> str:
    """Bytes in at most ``COMPACT_WIDTH`` characters, for a table's cell: 512B, 1.5K, 12.3M, 3.4G."""
    return _compact(n, 1024, BYTE_UNITS)


def _compact(n: float | None, base: int, units: tuple[str, ...]) -> str:
    if n is None:
        return NONE
    n = float(n)
    if not math.isfinite(n):
        return str(n)
    a = abs(n)
    for i, unit in enumerate(units):
        v = a / base**i
        if i == 0 and v.is_integer():
            text = f"{v:.0f}"
        elif i == 0 and v < 9.995:
            text = f"{v:.2f}"
        else:
            text = f"{v:.1f}" if v < 99.95 else f"{v:.0f}"
        # Rounded up to 1000 (999.96k, or 1000-1023 bytes): the next unit says it in fewer digits.
        if float(text) < 1000 or i == len(units) - 1:
            sign = "-" if n < 0 and float(text) != 0 else ""
            return f"{sign}{text}{unit}"
    raise AssertionError("unreachable")


def format_value(v: float | None) -> str:
    """A metric's value in at most 9 characters (the metrics panel's column): 0.5312, 1.20e-06,
    812, 12.3k."""
    if v is None:
        return NONE
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4:
        return format_count(v)
    if a < 1e-3:
        return f"{v:.2e}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.4g}"


def format_reward(r: float) -> str:
    """A reward in at most 5 characters: 1, 0, 0.5, 0.33, -0.25, 12.5, 1.2k."""
    if abs(r) >= 10:
        return format_count(r)
    text = f"{r:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def format_size(n: float) -> str:
    """Bytes in a sentence: 0 B, 512 B, 1.5 KiB, 12 MiB, 3.2 GiB, 5.0 TiB. Two significant figures
    (one decimal below 10 of a unit, none from 10 on) keep a message stable while the exact count
    moves; a figure that rounds to 1024 of a unit is said in the next (1.0 MiB, not 1024 KiB)."""
    v = float(n)
    for i, unit in enumerate(SIZE_UNITS):
        last = i == len(SIZE_UNITS) - 1
        if i == 0:
            text = f"{v:.0f}"
        else:
            text = f"{v:.1f}" if abs(v) < 9.95 else f"{v:.0f}"
        if abs(float(text)) < 1024 or last:
            return f"{text} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


# -- percentiles ---------------------------------------------------------------------------------


def format_latencies(samples: Sequence[float]) -> str:
    """Timings (seconds) as a benchmark reports them, in milliseconds, columns aligned:
    ``p50    1.23 ms  p99    4.56 ms  mean    1.50 ms`` (nearest-rank percentiles)."""
    return (
        f"p50 {percentile(samples, 50) * 1e3:7.2f} ms  p99 {percentile(samples, 99) * 1e3:7.2f} ms  "
        f"mean {statistics.fmean(samples) * 1e3:7.2f} ms"
    )


# -- times of day ------------------------------------------------------------------------------


def format_clock(ts: float | None = None) -> str:
    """A time of day, local, with its zone: 14:03:22 CET (``ts``: unix seconds; None: now)."""
    return time.strftime("%H:%M:%S %Z", time.localtime(ts))


def format_timestamp(ts: float | None = None, *, seconds: bool = False) -> str:
    """A date and time of day, local, with its zone: 2026-01-01 14:03 CET, or with ``seconds``
    2026-01-01 14:03:22 CET (``ts``: unix seconds; None: now)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z", time.localtime(ts))


@overload
def format_iso_time(ts: float, *, timespec: str = "auto") -> str: ...
@overload
def format_iso_time(ts: None, *, timespec: str = "auto") -> None: ...
def format_iso_time(ts: float | None, *, timespec: str = "auto") -> str | None:
    """A unix time as ISO 8601 text in UTC (``timespec`` as ``datetime.isoformat`` takes it:
    "seconds", "milliseconds", …; "auto" keeps the microseconds a time has). None stays None."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec=timespec)


# -- our own command -----------------------------------------------------------------------------

PROG = "tbconsole"  # the console script pyproject.toml installs


def command_name(path: str | None = None, executable: str | None = None) -> str:
    """How a new shell runs this installation of tbconsole, shell-quoted: ``tbconsole`` when the one
    that ``path`` (default: $PATH) finds is this installation's script (the one beside
    ``executable``, default ``sys.executable``: a venv's ``bin``), else that script by its absolute
    path; without such a script, ``python -m tbconsole`` with this interpreter."""
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    return _spelling(path, os.path.abspath(sys.executable if executable is None else executable))


def command_line(*args: object) -> str:
    """``tbconsole ARGS`` as a hint prints it: our command (``command_name``), then each argument
    shell-quoted; a ``Path`` made absolute (a new shell starts in another folder)."""
    words = (str(a.absolute()) if isinstance(a, Path) else str(a) for a in args)
    return " ".join([command_name(), *(shlex.quote(w) for w in words)])


@functools.lru_cache(maxsize=8)  # a hint redrawn every frame looks PATH up once
def _spelling(path: str, executable: str) -> str:
    # Not resolved: a venv's python is a link to the base interpreter, whose folder is not the venv's.
    ours = Path(executable).parent / PROG
    if not (ours.is_file() and os.access(ours, os.X_OK)):
        return shlex.join([executable, "-m", PROG])
    found = shutil.which(PROG, path=path)
    if found is not None and _same_file(found, ours):
        return PROG
    return shlex.quote(str(ours))


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
