"""diskspace: free space of a (future) path and the message when a run would not fit; what a run
folder takes on disk, measured step by step."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tbconsole.common.formatting import format_size
from tbconsole.record.runfolder import RunFolder
from tbconsole.runs.diskspace import RUN_NEED_BYTES, DiskSpaceError, FolderSize, check_free, free_bytes, run_size

from tests_support.prereqs import missing


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs, unmounted after the test; skipped where mounting is not allowed."""
    if os.geteuid() != 0:
        missing("mounting a tmpfs needs root", "Run the tests as root.")
    where = tmp_path / "fs"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs: {done.stderr.strip()}", "Run the tests as root.")
    yield where
    if subprocess.run(["umount", str(where)]).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.mark.e2e
def test_free_space_of_a_path_that_does_not_exist_yet(small_fs):
    assert free_bytes(small_fs) == 4 << 20
    assert free_bytes(small_fs / "runs" / "demo-1") == 4 << 20  # measured where it would be made
    (small_fs / "data").write_bytes(bytes(1 << 20))
    assert free_bytes(small_fs / "runs") == 3 << 20


@pytest.mark.e2e
def test_check_free_says_where_how_much_and_what_to_do(small_fs):
    run = small_fs / "runs" / "demo-1"
    assert check_free(run, 1 << 20, "config.log_path") == 4 << 20
    with pytest.raises(DiskSpaceError) as caught:
        check_free(run, RUN_NEED_BYTES, "config.log_path")
    message = str(caught.value)
    assert str(run) in message and str(small_fs) in message
    assert "4.0 MiB free" in message and "512 MiB needed" in message
    assert "free space or point config.log_path elsewhere" in message
    assert isinstance(caught.value, OSError)


@pytest.mark.e2e
def test_the_default_need_is_the_documented_constant(small_fs):
    assert RUN_NEED_BYTES == 512 << 20
    with pytest.raises(DiskSpaceError, match="512 MiB needed"):
        check_free(small_fs)


def test_sizes_in_messages():
    assert [format_size(n) for n in (0, 512, 1536, 12 << 20, int(3.25 * (1 << 30)), 5 << 40)] == [
        "0 B",
        "512 B",
        "1.5 KiB",
        "12 MiB",
        "3.2 GiB",
        "5.0 TiB",
    ]


# -- what a run folder takes on disk, measured step by step -------------------------------------


def du(folder: Path) -> int:
    """Every file's blocks under ``folder`` (what ``du`` counts), walked in full."""
    return sum(
        os.lstat(os.path.join(where, name)).st_blocks * 512 for where, _, files in os.walk(folder) for name in files
    )


def write_step(run: RunFolder, step: int, trials: int = 4) -> None:
    """What a step adds: capture files, Harbor's trial folders, the trainer's log-probs, events."""
    for k in range(trials):
        trial = f"task.s{step}g0t{k}"
        for path in (run.capture_file(step, 0, trial), run.trainer_logprobs_file(step, 0, trial)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * (9000 + 100 * k))
        (run.trials(step) / trial / "agent").mkdir(parents=True)
        (run.trials(step) / trial / "agent" / "trajectory.json").write_bytes(b"{}" * 3000)
        (run.trials(step) / trial / "result.json").write_text("{}")
    with open(run.events, "ab") as events:
        events.write(b"{}\n" * 5000)


def test_a_run_folder_measured_at_each_step_is_all_of_it_without_walking_its_old_steps(tmp_path):
    run = RunFolder(tmp_path / "run")
    sizes = FolderSize(run.root)
    for step in range(6):
        write_step(run, step)
        assert sizes.measure(step) == du(run.root), step
    assert sorted(sizes.settled) == sorted(  # steps 0-3 remembered; 4 and 5 may still be written to
        f"{kind}/step_00000{s}" for kind in ("capture", "trainer_logprobs", "trials") for s in range(4)
    )
    # A settled step is not walked again: bytes appended deep inside it go unseen...
    late = run.capture_file(1, 0, "task.s1g0t0")
    before = os.lstat(late).st_blocks * 512
    with open(late, "ab") as handle:
        handle.write(b"y" * 50_000)
    missed = os.lstat(late).st_blocks * 512 - before
    assert missed > 0 and sizes.measure(5) == du(run.root) - missed
    # ...but an entry added to or removed from a step's folder (trials deleted by hand) is seen.
    shutil.rmtree(run.trials(0) / "task.s0g0t1")
    (run.trials(2) / "retry").mkdir()
    (run.trials(2) / "retry" / "result.json").write_bytes(b"z" * 20_000)
    assert sizes.measure(5) == du(run.root) - missed
    shutil.rmtree(run.root / "capture" / "step_000000")
    assert sizes.measure(5) == du(run.root) - missed and "capture/step_000000" not in sizes.settled


def test_run_size_remembers_in_the_folder_and_never_trusts_a_damaged_file(tmp_path):
    run = RunFolder(tmp_path / "run")
    for step in range(5):
        write_step(run, step)

    def measured_whole() -> bool:
        """run_size says what a full walk says (of the folder as it was before run_size wrote)."""
        whole = du(run.root)
        return run_size(run, 4) == whole

    assert measured_whole()
    saved = json.loads(run.sizes.read_text())
    assert saved["version"] == 1 and "trials/step_000002" in saved["settled"]
    assert measured_whole()  # from what it remembered: the same figure
    for damaged in ("{not json", json.dumps({"version": 99, "settled": {"trials/step_000000": [0, 1]}}), "[]"):
        run.sizes.write_text(damaged)
        assert measured_whole(), damaged
    mtime = (run.root / "trials" / "step_000000").stat().st_mtime_ns
    run.sizes.write_text(json.dumps({"version": 1, "settled": {"trials/step_000000": [mtime + 1, 1]}}))
    assert measured_whole()  # the folder changed since: walked again
    run.sizes.write_text(json.dumps({"version": 1, "settled": {"trials/step_000000": [mtime, 1]}}))
    assert not measured_whole()  # the check that can fail: a remembered size is used as it is
