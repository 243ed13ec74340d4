"""Task discovery and loading through Harbor's task model, on real Terminal-Bench 2 folders."""

import subprocess
import sys

import pytest

from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR, TaskSetError, discover, load, load_all

TB2_NAMES = ["cancel-async-tasks", "fix-git", "headless-terminal", "regex-chess"]


def test_tb2_sample_loads_through_harbor(tb2_sample):
    tasks = load_all(tb2_sample)
    assert [t.path.name for t in tasks] == TB2_NAMES
    by_name = {t.path.name: t for t in tasks}
    fix_git = by_name["fix-git"]
    assert fix_git.name == "terminal-bench/fix-git"
    assert fix_git.difficulty == "easy"
    assert fix_git.docker_image == "alexgshaw/fix-git:20260403"
    assert fix_git.agent_timeout_sec == 900.0
    assert "merge them into master" in fix_git.instruction
    for task in tasks:
        assert task.instruction.strip()
        assert not task.runs_locally  # they need their images and their verifiers


@pytest.mark.e2e
def test_tb2_sample_lists_from_the_cli(tb2_sample):
    proc = subprocess.run(
        [sys.executable, "-m", "tbconsole", "tasks", str(tb2_sample)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for name in TB2_NAMES:
        assert name in proc.stdout
    assert "4 tasks in" in proc.stdout


def test_symlinked_task_dirs_are_accepted(tmp_path, tb2_sample):
    (tmp_path / "b-task").symlink_to(tb2_sample / "fix-git")
    (tmp_path / "a-task").symlink_to(tb2_sample / "regex-chess")
    (tmp_path / "not-a-task").mkdir()
    (tmp_path / "README.md").write_text("x")
    assert [p.name for p in discover(tmp_path)] == ["a-task", "b-task"]
    assert load(tmp_path / "b-task").name == "terminal-bench/fix-git"


def test_empty_or_missing_tasks_dir_is_a_clear_error(tmp_path):
    with pytest.raises(TaskSetError, match="holds no task folders"):
        discover(tmp_path)
    with pytest.raises(TaskSetError, match="does not exist"):
        discover(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(TaskSetError, match="not a directory"):
        discover(tmp_path / "file")


@pytest.mark.e2e
def test_broken_task_toml_is_a_clear_error(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    (tmp_path / "t" / "instruction.md").write_text("x")
    with pytest.raises(TaskSetError, match="not a valid Harbor task"):
        load(tmp_path / "t")
    proc = subprocess.run(
        [sys.executable, "-m", "tbconsole", "tasks", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "not a valid Harbor task" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bundled_tasks_list():
    names = [p.name for p in discover(BUNDLED_TASKS_DIR)]
    assert names == sorted(names) and len(names) >= 12
