"""tbconsole.common.formatting: what people read, formatted once (durations, counts, sizes, percentiles,
times of day), with real values and the edges: nothing, under a second, hours, days, and sizes at
their units' boundaries; and our own command as hints spell it, on PATH and off it."""

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbconsole.common.formatting import (
    COMPACT_WIDTH,
    command_line,
    command_name,
    format_age,
    format_bytes,
    format_cell_duration,
    format_clock,
    format_count,
    format_duration,
    format_iso_time,
    format_latencies,
    format_seconds,
    format_size,
    format_timestamp,
)

# -- durations -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "–"),
        (0, "0s"),
        (0.4, "0s"),  # under a second: rounds to the second
        (0.6, "1s"),
        (59.4, "59s"),
        (59.6, "1m00s"),  # rounds up into the next minute, never "60s"
        (61, "1m01s"),
        (3599.4, "59m59s"),
        (3600, "1h00m"),
        (3723, "1h02m"),
        (86_400, "24h00m"),  # a day still reads in hours
        (99 * 3600 + 59 * 60, "99h59m"),
        (100 * 3600, "4d04h"),  # past 99 hours: days
        (999 * 86_400, "999d00h"),
        (-0.4, "0s"),
        (-0.5, "0s"),  # rounds to nothing: no sign ("-0s" before)
        (-90, "-1m30s"),  # a clock a little behind another keeps its sign once
    ],
)
def test_format_duration(seconds, shown):
    assert format_duration(seconds) == shown


def test_a_duration_fits_six_characters_below_a_hundred_days():
    for s in [0, 9, 59, 60, 599, 3599, 3600, 35_999, 99 * 3600, 100 * 3600, 100 * 86_400 - 1]:
        assert len(format_duration(s)) <= 6, s


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "–"), (0, "0.0s"), (0.04, "0.0s"), (0.44, "0.4s"), (3.25, "3.2s"), (59.9, "59.9s"), (59.96, "1m00s"),
     (125.3, "2m05s"), (7322, "2h02m")],
)  # fmt: skip
def test_format_seconds_keeps_tenths_under_a_minute(seconds, shown):
    assert format_seconds(seconds) == shown


def test_format_age():
    assert format_age(0) == "0s ago"
    assert format_age(42) == "42s ago"
    assert format_age(3 * 3600 + 125) == "3h02m ago"
    assert format_age(2 * 86_400 - 1) == "47h59m ago"
    assert format_age(2 * 86_400) == "2d ago"  # from two days on, whole days only
    assert format_age(10.6 * 86_400) == "11d ago"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, ""), (0, "0s"), (0.9, "0s"), (99.9, "99s"), (100, "1m"), (119.9, "1m"), (5999, "99m"), (6000, "1h"),
     (86_400, "24h")],
)  # fmt: skip
def test_a_cell_duration_is_cut_down_to_three_characters(seconds, shown):
    assert format_cell_duration(seconds) == shown


# -- counts and sizes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),  # a unit's boundary
        (1536, "1.5 KiB"),
        (10 * 1024 - 52, "9.9 KiB"),
        (10 * 1024 - 40, "10 KiB"),  # 9.96 KiB rounds to 10: no decimal from 10 on
        (1023.6 * 1024, "1.0 MiB"),  # would round to 1024 KiB: said in the next unit
        (1 << 20, "1.0 MiB"),
        (12 << 20, "12 MiB"),
        (400 << 20, "400 MiB"),
        (2300 << 20, "2.2 GiB"),
        (int(3.25 * (1 << 30)), "3.2 GiB"),
        (5 << 40, "5.0 TiB"),
        (1 << 60, "1.0 EiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_format_size(n, shown):
    assert format_size(n) == shown


@pytest.mark.parametrize(
    ("n", "bytes_shown", "count_shown"),
    [
        (None, "–", "–"),
        (0, "0B", "0"),
        (999, "999B", "999"),
        (1000, "1.0K", "1.0k"),  # four digits are never shown: 1000-1023 bytes read as 1.0K
        (1023, "1.0K", "1.0k"),
        (1024, "1.0K", "1.0k"),
        (1536, "1.5K", "1.5k"),
        (999_999, "977K", "1.0M"),  # rounds up to 1000k: the next unit
        (12_900_000, "12.3M", "12.9M"),
        (3.4e9, "3.2G", "3.4G"),
        (1.25, "1.25B", "1.25"),  # a small fraction keeps two decimals
        (-1536, "-1.5K", "-1.5k"),
    ],
)
def test_compact_bytes_and_counts(n, bytes_shown, count_shown):
    assert (format_bytes(n), format_count(n)) == (bytes_shown, count_shown)
    if n is not None and n >= 0:
        assert len(bytes_shown) <= COMPACT_WIDTH and len(count_shown) <= COMPACT_WIDTH


# -- percentiles ---------------------------------------------------------------------------------


def test_format_latencies_shows_p50_p99_and_mean_in_milliseconds():
    samples = [i / 1000 for i in range(1, 101)]  # 1 ms .. 100 ms
    assert format_latencies(samples) == "p50   51.00 ms  p99   99.00 ms  mean   50.50 ms"
    assert format_latencies([0.0004]) == "p50    0.40 ms  p99    0.40 ms  mean    0.40 ms"


# -- times of day: local, with the zone ----------------------------------------------------------


@pytest.fixture
def paris(monkeypatch):
    """The machine's zone is Paris (UTC+1 in winter, UTC+2 in summer)."""
    monkeypatch.setenv("TZ", "Europe/Paris")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


WINTER = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
SUMMER = 1_782_864_000.0  # 2026-07-01 00:00:00 UTC


def test_a_time_of_day_is_local_and_says_its_zone(paris):
    assert format_clock(WINTER + 3723) == "02:02:03 CET"
    assert format_clock(SUMMER) == "02:00:00 CEST"
    assert format_timestamp(WINTER) == "2026-01-01 01:00 CET"
    assert format_timestamp(WINTER - 3600, seconds=True) == "2026-01-01 00:00:00 CET"
    assert format_timestamp(SUMMER - 7201) == "2026-06-30 23:59 CEST"


def test_without_a_time_the_clock_says_now(paris):
    before = time.time()
    shown = format_clock()
    after = time.time()
    assert shown.endswith((" CET", " CEST"))
    # The wall clock may be stepped (NTP, a VM) between the reads: a second either side is "now".
    assert shown[:8] in {format_clock(t)[:8] for t in (before - 1, before, after, after + 1)}
    assert format_timestamp().endswith((" CET", " CEST"))


def test_utc_reads_as_utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert format_clock(WINTER) == "00:00:00 UTC"
        assert format_timestamp(WINTER) == "2026-01-01 00:00 UTC"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_time_for_programs_is_iso_in_utc_whatever_the_machines_zone(paris):
    assert format_iso_time(WINTER + 3723.25) == "2026-01-01T01:02:03.250000+00:00"
    assert format_iso_time(SUMMER) == "2026-07-01T00:00:00+00:00"
    assert format_iso_time(WINTER + 3723.25, timespec="seconds") == "2026-01-01T01:02:03+00:00"
    assert format_iso_time(None) is None


# -- our own command -----------------------------------------------------------------------------


def _script(folder: Path, text: str = "#!/bin/sh\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "tbconsole"
    script.write_text(text)
    script.chmod(0o755)
    return script


def test_our_command_is_tbconsole_only_where_path_finds_this_installation(tmp_path):
    venv = tmp_path / "my venv" / "bin"  # a space: the absolute path must come quoted
    ours = _script(venv)
    python = venv / "python"
    python.symlink_to(sys.executable)  # as in a venv: not resolved, or the venv's folder is lost
    other = _script(tmp_path / "other", "#!/bin/sh\necho another installation\n")
    linked = tmp_path / "local-bin"
    linked.mkdir()
    (linked / "tbconsole").symlink_to(ours)  # pipx-style: a link to this installation's script
    assert command_name(f"/usr/bin:{venv}", str(python)) == "tbconsole"  # an activated venv
    assert command_name(f"{linked}:/usr/bin", str(python)) == "tbconsole"
    assert command_name("/usr/bin:/bin", str(python)) == shlex.quote(str(ours))  # `make demo`: not on PATH
    assert command_name(f"{other.parent}:{venv}", str(python)) == shlex.quote(str(ours))  # another one first
    assert command_name("", str(python)).startswith("'/")
    # An interpreter with no script beside it (the package run from another Python): python -m.
    bare = tmp_path / "bare" / "python3"
    assert command_name(f"{venv}", str(bare)) == f"{bare} -m tbconsole"


@pytest.mark.e2e
def test_a_hint_works_in_a_new_shell_with_or_without_tbconsole_on_path(tmp_path, monkeypatch):
    """This installation's own hint, run by a shell whose PATH has no tbconsole (a new shell after
    `make demo`), then one whose PATH has this venv (activated): both run this tbconsole."""
    venv_bin = Path(sys.executable).parent
    folder = tmp_path / "no runs here"
    for path, spelled in [
        ("/usr/bin:/bin", shlex.quote(str(venv_bin / "tbconsole"))),
        (f"{venv_bin}:/usr/bin:/bin", "tbconsole"),
    ]:
        monkeypatch.setenv("PATH", path)
        hint = command_line("runs", folder)
        assert hint == f"{spelled} runs {shlex.quote(str(folder))}"
        shell = subprocess.run(
            ["/bin/sh", "-c", hint], env=dict(os.environ), capture_output=True, text=True, timeout=60
        )
        assert shell.returncode == 2 and "no such folder" in shell.stderr, (hint, shell.stderr)


def test_a_relative_path_in_a_hint_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command_line("attach", Path("runs/x"), "config.log_path=a b").endswith(
        f" attach {tmp_path}/runs/x 'config.log_path=a b'"
    )
