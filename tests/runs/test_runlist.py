"""`tbconsole runs`: run folders found on disk and each one's state, from the head and tail of its
events.jsonl and the runner's lease (held here by real processes, one of them killed)."""

import argparse
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tbconsole.common.formatting import format_bytes
from tbconsole.entry import runs
from tbconsole.entry.usage import UsageError
from tbconsole.runs.runlist import TAIL_BYTES, find_runs, list_runs, read_run, recent, remember

from tests_support.paths import FIXTURES

pytestmark = pytest.mark.timeout(60)

RECORDED = FIXTURES / "finished" / "events.jsonl"


def write_run(folder: Path, end: str | None = None, paused: bool = False) -> Path:
    """The recorded run going on at step 2 (or paused there), or ended with ``end``."""
    lines = RECORDED.read_text().splitlines()[:-2]
    ts = json.loads(lines[-1])["ts"] + 1
    for state in (["pausing", "paused"] if paused else []) + ([end] if end else []):
        lines.append(json.dumps({"v": 1, "kind": "control.changed", "ts": ts, "state": state, "reason": None}))
    if end:
        lines.append(json.dumps({"v": 1, "kind": "run.ended", "ts": ts, "status": end, "step": 2, "message": None}))
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.e2e
def test_states_from_events_and_lease(tmp_path, hold_lease):
    root = tmp_path / "runs"
    hold_lease(write_run(root / "live"))
    hold_lease(write_run(root / "team" / "paused", paused=True))
    dead = hold_lease(write_run(root / "dead"))
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait()
    write_run(root / "stopped", end="stopped")
    write_run(root / "a" / "b" / "done", end="done")
    write_run(root / "a" / "b" / "c" / "too-deep", end="done")
    (root / "done-but-nested").mkdir()
    write_run(root / "stopped" / "heldout", end="done")  # part of its run, not a run of its own

    found = {info.path.relative_to(root.resolve()).as_posix(): info for info in list_runs([root])}
    assert {name: info.condition for name, info in found.items()} == {
        "live": "live",
        "team/paused": "paused",
        "dead": "dead",
        "stopped": "stopped",
        "a/b/done": "done",
    }
    done = found["a/b/done"]
    assert (done.state.total_steps, done.started) == (3, 1767225600.0)
    assert runs.table(list_runs([root]), time.time()).splitlines()[0].split() == [
        "#",
        "run",
        "state",
        "trained",
        "reward",
        "size",
        "started",
        "last",
        "event",
    ]


def test_a_large_file_is_read_at_its_head_and_tail_only(tmp_path):
    run = write_run(tmp_path / "big", end="stopped")
    lines = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    head, tail = b"".join(lines[:3]), b"".join(lines[-40:])
    junk = b"not json at all\n" * (4 * TAIL_BYTES // 16)  # unread: damaged lines here would cost nothing
    (run / "events.jsonl").write_bytes(head + junk + tail)
    info = read_run(run)
    assert info.condition == "stopped" and info.state.total_steps == 3 and info.started == 1767225600.0
    assert info.state.step == 2


def test_runs_command_prints_a_table_and_no_prompt_off_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one = write_run(tmp_path / "runs" / "one", end="done")
    (one / "trials" / "step_000000" / "t").mkdir(parents=True)
    (one / "trials" / "step_000000" / "t" / "result.json").write_bytes(bytes(3 << 20))
    on_disk = sum(p.lstat().st_blocks * 512 for p in one.rglob("*") if p.is_file())
    parser = argparse.ArgumentParser()
    runs.register(parser.add_subparsers())
    args = parser.parse_args(["runs", str(tmp_path / "runs")])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert "one" in out and "done" in out and "3/3" in out and "attach to" not in out
    assert f" {format_bytes(on_disk)} " in out.splitlines()[1] and format_bytes(on_disk).startswith("3.")
    hostile = write_run(tmp_path / "runs" / "x\x1b]0;pwned\x07\u202e[bold]y", end="done")
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert "x␛]0;pwned␇<U+202E>[bold]y" in out and "\x1b" not in out and "\u202e" not in out
    assert hostile.is_dir()
    with pytest.raises(UsageError, match="no such folder"):
        missing = parser.parse_args(["runs", str(tmp_path / "nowhere")])
        missing.handler(missing)


def test_recent_runs_are_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = write_run(tmp_path / "first", end="done")
    second = write_run(tmp_path / "second", end="done")
    remember(first)
    remember(second)
    remember(first)
    assert recent() == [first.resolve(), second.resolve()]
    assert find_runs(recent()) == [first.resolve(), second.resolve()]
