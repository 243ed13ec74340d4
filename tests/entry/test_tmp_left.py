"""No process of the project leaves files in /tmp: the shared demo recording (a real run: engine,
Harbor trials in the sandbox, mini-swe-agent, W&B offline) and an attach to it, each with TMPDIR a
fresh folder of its own, leave that folder empty and no new entry in /tmp (pytest's own folders
aside; nothing else may write to /tmp meanwhile, as in CI)."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.timeout(300)]


def test_the_demo_run_leaves_nothing_in_its_tmpdir_or_in_tmp(demo_run_left):
    assert demo_run_left == {"TMPDIR": [], "/tmp": []}


def test_an_attach_leaves_nothing_in_its_tmpdir_or_in_tmp(demo_run, tmp_path, list_tmp):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = list_tmp()
    shot = tmp_path / "end.svg"
    done = subprocess.run(
        [sys.executable, "-m", "tbconsole", "attach", str(demo_run), "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert done.returncode == 0 and shot.stat().st_size > 0, done.stderr[-3000:]
    assert {"TMPDIR": sorted(p.name for p in tmpdir.iterdir()), "/tmp": sorted(list_tmp() - before)} == {
        "TMPDIR": [],
        "/tmp": [],
    }
