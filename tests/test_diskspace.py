"""diskspace: free space of a (future) path and the message when a run would not fit."""

import os
import subprocess

import pytest

from tbconsole.diskspace import RUN_NEED_BYTES, DiskSpaceError, check_free, free_bytes, human


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs, unmounted after the test; skipped where mounting is not allowed."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "fs"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    yield where
    if subprocess.run(["umount", str(where)]).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_free_space_of_a_path_that_does_not_exist_yet(small_fs):
    assert free_bytes(small_fs) == 4 << 20
    assert free_bytes(small_fs / "runs" / "demo-1") == 4 << 20  # measured where it would be made
    (small_fs / "data").write_bytes(bytes(1 << 20))
    assert free_bytes(small_fs / "runs") == 3 << 20


def test_check_free_says_where_how_much_and_what_to_do(small_fs):
    run = small_fs / "runs" / "demo-1"
    assert check_free(run, 1 << 20, "config.log_path") == 4 << 20
    with pytest.raises(DiskSpaceError) as caught:
        check_free(run, RUN_NEED_BYTES, "config.log_path")
    message = str(caught.value)
    assert str(run) in message and str(small_fs) in message
    assert "4.0 MiB free" in message and "512.0 MiB needed" in message
    assert "free space or point config.log_path elsewhere" in message
    assert isinstance(caught.value, OSError)


def test_the_default_need_is_the_documented_constant(small_fs):
    assert RUN_NEED_BYTES == 512 << 20
    with pytest.raises(DiskSpaceError, match="512.0 MiB needed"):
        check_free(small_fs)


def test_human_sizes():
    assert [human(n) for n in (0, 512, 1536, 12 << 20, int(3.25 * (1 << 30)), 5 << 40)] == [
        "0 B",
        "512 B",
        "1.5 KiB",
        "12.0 MiB",
        "3.2 GiB",
        "5.0 TiB",
    ]
