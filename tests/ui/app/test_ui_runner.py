"""The attached console and the runner's lease, with a real process holding it: a runner killed
with SIGKILL reads as dead within seconds (controls gone, clock stopped, the resume command
shown), a runner that ended shows how the run ended, and q leaves without touching the run."""

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import types

import pytest

from tbconsole.common.formatting import command_line
from tbconsole.entry import attach
from tbconsole.record.enums import RunnerState
from tbconsole.record.lease import Lease, LeaseView
from tbconsole.state import reduce_all
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.present.wording import exit_summary, runner_notice
from tbconsole.ui.screens.confirm import ConfirmScreen

from tests_support.paths import FIXTURES
from tests_support.ui import rendered, wait_for

pytestmark = pytest.mark.timeout(60)

COMMAND = ["tbconsole", "demo", "config.max_steps=3"]
RUN_COMMANDS = ("pause", "resume", "stop", "abort", "decide")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the recent-runs list


def run_folder(tmp_path, end: str | None = None):
    """The recorded run, cut before its end (going on at step 2), or ended with ``end``."""
    lines = (FIXTURES / "finished" / "events.jsonl").read_text().splitlines()[:-2]
    ts = json.loads(lines[-1])["ts"] + 1
    if end is not None:
        lines.append(json.dumps({"v": 1, "kind": "control.changed", "ts": ts, "state": end, "reason": None}))
        lines.append(json.dumps({"v": 1, "kind": "run.ended", "ts": ts, "status": end, "step": 2, "message": None}))
    run = tmp_path / "run"
    (run / "control" / "inbox").mkdir(parents=True)
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run


def text_of(app, selector, width=200):
    return rendered(app.screen.query_one(selector), width)


@pytest.mark.e2e
async def test_a_killed_runner_reads_dead_within_seconds(tmp_path, hold_lease):
    run = run_folder(tmp_path)
    proc = hold_lease(run, COMMAND)
    app = attach.attach_app(run, None)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.state.step == 2 and "RUNNING" in text_of(app, "#header"))
        assert app.runner.state is RunnerState.LIVE and app.check_action("pause", ())
        assert app.check_action("leave", ()) and not app.check_action("quit_console", ())
        assert "healthy" in text_of(app, "#gateway")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        await wait_for(pilot, lambda: f"runner gone (pid {proc.pid}, last seen" in text_of(app, "#header"), timeout=30)
        header = text_of(app, "#header")
        assert "RUNNING" not in header and "DEAD" in header
        assert not any(app.check_action(action, ()) for action in RUN_COMMANDS)
        assert app.check_action("quit_console", ()) and not app.check_action("leave", ())
        gateway = text_of(app, "#gateway")
        assert "healthy" not in gateway and "not probed (runner gone)" in gateway
        notice = text_of(app, "#notice", 400)
        assert f"resume: {command_line('demo', 'config.max_steps=3', f'config.log_path={run.resolve()}')}" in notice
        assert "checkpoint 000002" in notice
        stopped_at = app.now()  # the clock stopped with the runner
        await pilot.pause(1.2)
        assert app.now() == stopped_at
        await pilot.press("s")  # no control left: nothing is asked, nothing sent
        assert not isinstance(app.screen, ConfirmScreen)
    assert not any((run / "control" / "inbox").iterdir())


@pytest.mark.e2e
@pytest.mark.parametrize("end, badge", [(None, "ENDED"), ("stopped", "STOPPED"), ("done", "DONE")])
async def test_an_ended_runner_shows_how_the_run_ended(tmp_path, end, badge):
    run = run_folder(tmp_path, end)
    with Lease(run, COMMAND):
        pass
    app = attach.attach_app(run, None)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.runner is not None and f" {badge} " in text_of(app, "#header"))
        assert "RUNNING" not in text_of(app, "#header")
        assert not any(app.check_action(action, ()) for action in RUN_COMMANDS)
        assert "healthy" not in text_of(app, "#gateway")
        notice = text_of(app, "#notice", 400)
        if end == "done":  # nothing to resume
            assert not app.screen.query_one("#notice").display
        else:
            assert f"resume: {command_line('demo')}" in notice


@pytest.mark.e2e
def test_q_leaves_at_once_and_the_run_goes_on(tmp_path, hold_lease, monkeypatch, capsys):
    run = run_folder(tmp_path)
    proc = hold_lease(run, COMMAND)
    seen = {}

    def run_headless(app):
        async def drive():
            async with app.run_test(size=(150, 36)) as pilot:  # wide: the keys' whole labels (at 140 they do not fit)
                await wait_for(pilot, lambda: app.state.step == 2 and app.check_action("leave", ()))
                await pilot.pause(0.2)
                seen["footer"] = [key.description for key in app.screen.query("FooterKey")]
                await pilot.press("q")
                seen["confirm"] = isinstance(app.screen, ConfirmScreen)

        asyncio.run(drive())

    monkeypatch.setattr(ConsoleApp, "run", run_headless)
    assert attach.attach_console(run, None) == 0
    assert "Leave (run goes on)" in seen["footer"] and "Quit" not in seen["footer"]
    assert not seen["confirm"]
    assert proc.poll() is None  # the runner goes on
    assert not any((run / "control" / "inbox").iterdir())  # and got no command
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2, out
    assert out[0].startswith(f"{run}: live · 3/3 trained · reward ") and "checkpoint 000002 at step 1" in out[0]
    assert out[1].strip() == f"the run goes on; re-attach: {command_line('attach', run)}"
    assert json.loads((tmp_path / "cache" / "tbconsole" / "recent.json").read_text()) == [str(run.resolve())]


def test_the_summary_of_a_finished_run_and_of_a_dead_one(finished_events, tmp_path):
    state = reduce_all(finished_events)
    done = exit_summary(state, LeaseView(RunnerState.NONE), tmp_path)
    assert done.splitlines() == [
        f"{tmp_path}: done · 3/3 trained · reward 0.8125 · checkpoint 000002 at step 1",
        f"  replay: {command_line('attach', tmp_path)}",
    ]
    going = reduce_all(finished_events[:-2])
    dead = LeaseView(
        RunnerState.DEAD, pid=42, beat=time.time() - 14, command=("tbconsole", "demo", "config.log_path=x")
    )
    lines = exit_summary(going, dead, tmp_path).splitlines()
    assert lines[0].startswith(f"{tmp_path}: runner gone (pid 42, last seen 14s ago) · 3/3 trained")
    # this folder, absolute; our command as a new shell runs it (tbconsole only when PATH has this one)
    assert lines[1] == f"  resume: {command_line('demo', f'config.log_path={tmp_path.resolve()}')}"
    assert runner_notice(going, dead, tmp_path).startswith(f"not running · resume: {command_line('demo')}")
    assert runner_notice(going, LeaseView(RunnerState.NONE), tmp_path) is None  # no lease: as before


@pytest.mark.parametrize("host, warned", [("127.0.0.1", False), ("localhost", False), ("0.0.0.0", True)])
def test_attach_web_serves_and_warns_off_loopback(tmp_path, monkeypatch, capsys, host, warned):
    run = run_folder(tmp_path)
    calls = []
    web = types.ModuleType("tbconsole.entry.web")
    web.serve = lambda *a: calls.append(a) or 0
    monkeypatch.setitem(sys.modules, "tbconsole.entry.web", web)
    parser = argparse.ArgumentParser()
    attach.add_attach_arguments(parser)
    args = parser.parse_args([str(run), "--web", "--host", host, "--port", "9000", "--theme", "light"])
    assert args.handler(args) == 0
    assert calls == [(run, "light", host, 9000)]
    err = capsys.readouterr().err
    assert ("reachable from the network" in err) is warned
    defaults = parser.parse_args([str(run), "--web"])
    assert (defaults.host, defaults.port) == ("127.0.0.1", 8765)
