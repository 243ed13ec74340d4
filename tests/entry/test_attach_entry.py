"""`tbconsole attach` outside a terminal and on what is not a run: with no terminal (stdin
/dev/null, stdout a pipe: a script, cron) it prints where the run stands as plain text and exits
instead of drawing the console into the pipe; a path that is no run is a usage error saying what
to give; a run folder whose runner holds it but has written no event yet is a run starting, and
is accepted."""

import json
import subprocess
import sys

import pytest

from tbconsole.common.formatting import command_line
from tbconsole.entry import attach
from tbconsole.entry.main import main
from tbconsole.record import events as ev
from tbconsole.record.runfolder import NotARun, is_run_folder, run_events

from tests_support.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FIXTURES = REPO / "tests" / "ui" / "fixtures"  # recorded runs


def attach_without_terminal(path, *args) -> subprocess.CompletedProcess:
    """`tbconsole attach PATH` as a script runs it: no terminal on stdin or stdout (pipes)."""
    return subprocess.run(
        [sys.executable, "-m", "tbconsole", "attach", str(path), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,  # the bug this guards against never exited: a hang fails here, not in 10 minutes
    )


def test_without_a_terminal_attach_prints_where_the_run_stands_and_exits(tmp_path):
    done = attach_without_terminal(FIXTURES / "finished")
    assert done.returncode == 0, done.stderr
    assert "the console needs a terminal" in done.stderr and "Traceback" not in done.stderr
    assert "\x1b" not in done.stdout  # plain text: no screen drawn into the pipe
    lines = done.stdout.splitlines()
    assert lines[0] == "run demo-0 · Qwen/Qwen3-4B-Instruct-2507 · step 2 · 3/3 trained · done"
    assert lines[1] == "mean reward by step: 0 0.625, 1 0.375, 2 0.8125"
    assert lines[2] == "advisories: none active"
    # then the summary the console prints when it closes, with a command that works in a new shell
    folder = FIXTURES / "finished"
    assert lines[3] == f"{folder}: done · 3/3 trained · reward 0.8125 · checkpoint 000002 at step 1"
    assert lines[4] == f"  replay: {command_line('attach', folder)}"
    assert len(lines) == 5
    # its events.jsonl named directly reads the same
    direct = attach_without_terminal(folder / "events.jsonl")
    assert direct.returncode == 0 and direct.stdout == done.stdout


def test_without_a_terminal_a_live_run_is_followed_by_nobody_and_its_text_is_inert(tmp_path, hold_lease):
    """A run still going: its status now, and how to re-attach. The run's own strings (an
    advisory's message, its run id) reach the terminal as inert characters."""
    run = tmp_path / "run"
    run.mkdir()
    lines = (FIXTURES / "awaiting" / "events.jsonl").read_text().splitlines()
    started = json.loads(lines[0])
    started["run_id"] = "demo\x1b]0;owned\x07-0"
    hostile = ev.AdvisoryRaised(
        ts=started["ts"] + 1,
        key="kl:step=1",
        rule="kl",
        severity="warning",
        message="KL rose\x1b[2J\r\nrm -rf ~ \u202eexe.txt",
        threshold="kl_max = 0.01",
        step=1,
    )
    (run / "events.jsonl").write_text("\n".join([json.dumps(started), *lines[1:], hostile.to_json()]) + "\n")
    hold_lease(run, ("tbconsole", "demo", f"config.log_path={run}"))
    done = attach_without_terminal(run)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out
    first, *rest = out.splitlines()
    assert first.startswith("run demo␛]0;owned␇-0 · Qwen/Qwen3-4B-Instruct-2507 · step 1 · 1/3 trained")
    assert "advisories (1 active):" in rest
    assert "  warning kl: KL rose␛[2J ⏎ rm -rf ~ <U+202E>exe.txt" in rest
    assert rest[-1] == f"  the run goes on; re-attach: {command_line('attach', run)}"


def test_screenshot_and_web_need_no_terminal(tmp_path):
    out = tmp_path / "shot.svg"
    shot = attach_without_terminal(FIXTURES / "finished", "--screenshot", str(out), "--size", "100x30")
    assert shot.returncode == 0, shot.stderr
    assert out.read_text().startswith("<svg") and "needs a terminal" not in shot.stderr


@pytest.mark.parametrize(
    "given, message",
    [
        ("README.md", "README.md is not a run: give a run folder (the one holding events.jsonl); `{runs}` lists them"),
        (
            "tests",
            "tests is not a run: give a run folder (the one holding events.jsonl); `{runs} {tests}` lists the runs",
        ),
        ("nowhere", "nowhere: no such file or folder"),
    ],
)
def test_attach_to_what_is_not_a_run_says_what_to_give(given, message, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert main(["attach", given]) == 2
    err = capsys.readouterr().err
    expected = message.format(runs=command_line("runs"), tests=REPO / "tests")
    assert err.startswith("tbconsole attach: ") and expected in err and "Traceback" not in err


def test_a_file_of_a_run_folder_points_at_the_folder(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").write_text("")
    (run / "runner.log").write_text("runner exit status 0\n")
    assert main(["attach", str(run / "runner.log")]) == 2
    assert (
        f"is not a run: give a run folder (the one holding events.jsonl): its folder, {run}" in capsys.readouterr().err
    )


def test_a_run_starting_is_accepted_before_its_first_event(tmp_path, hold_lease, monkeypatch):
    """A runner holds the folder (runner.json, runner.lock) before it writes events.jsonl: attach
    follows it (live, waiting for the events); without a terminal it says the run is starting."""
    run = tmp_path / "run"
    run.mkdir()
    hold_lease(run, ("tbconsole", "demo", f"config.log_path={run}"))
    assert not (run / "events.jsonl").exists() and is_run_folder(run)
    assert run_events(run) == run / "events.jsonl"
    done = attach_without_terminal(run)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "no events yet (the run is starting) · waiting for run"
    assert lines[-1] == f"  the run goes on; re-attach: {command_line('attach', run)}"
    # On a terminal: the live console over the folder, which waits for the run's events.
    opened = []
    monkeypatch.setattr(attach, "console_has_terminal", lambda: True)
    monkeypatch.setattr(attach, "attach_console", lambda folder, theme: opened.append(folder) or 0)
    assert main(["attach", str(run)]) == 0
    assert opened == [run]


def test_what_makes_a_folder_a_run(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not is_run_folder(empty) and not is_run_folder(tmp_path / "missing")
    for marker in ("events.jsonl", "runner.json", "runner.lock"):
        folder = tmp_path / marker.replace(".", "-")
        folder.mkdir()
        (folder / marker).write_text("")
        assert is_run_folder(folder) and run_events(folder) == folder / "events.jsonl"
    stray = tmp_path / "events.jsonl"  # an events file on its own (copied out of its run)
    stray.write_text("")
    assert run_events(stray) == stray
    with pytest.raises(NotARun, match="is not a run"):
        run_events(empty)
