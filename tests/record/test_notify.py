"""--notify: a real command gets one JSON object on stdin per event that needs someone; a command
that fails or hangs never harms the run (bounded time, logged once); no secret reaches it."""

import json
import sys
import textwrap
import time
from dataclasses import replace

import pytest

from tbconsole.entry.train import FlagError, split_flags
from tbconsole.record.enums import LogLevel, RunStatus
from tbconsole.record.events import (
    AdvisoryRaised,
    ErrorRaised,
    EventBus,
    LogLine,
    RunEnded,
    RunStarted,
    TrialEnded,
    read_events,
)
from tbconsole.record.notify import Notifier

from tests_support.processes import pids_with

pytestmark = pytest.mark.timeout(60)

RECORDER = textwrap.dedent("""
    import os, sys
    with open(sys.argv[1], "a") as out:
        out.write(sys.stdin.read())
        out.write(os.environ.get("TINKER_API_KEY", "-") + "\\n")
""")


def recorder(tmp_path):
    """A notify command that appends its stdin (and whether it saw the run's key) to a file."""
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    out = tmp_path / "notified.txt"
    return f"{sys.executable} {script} {out}", out


def sent(out) -> list[dict]:
    lines = out.read_text().splitlines() if out.exists() else []
    assert all(line == "-" for line in lines[1::2]), "the run's API key reached the command"
    return [json.loads(line) for line in lines[0::2]]


def started(run_id="abc123") -> RunStarted:
    return RunStarted(
        run_id=run_id,
        log_path="/runs/x",
        model_name="m",
        base_url="http://127.0.0.1:1",
        renderer_name="r",
        total_steps=3,
        start_step=0,
        groups_per_batch=1,
        group_size=2,
        tasks=["t"],
        config={},
    )


def decision(message="boom") -> ErrorRaised:
    return ErrorRaised(
        step=1,
        group=0,
        trial="t.s1g0t1",
        exception_type="CancelledByUser",
        message=message,
        trial_dir="/runs/x/trials/t.s1g0t1",
        decision_needed=True,
    )


def advisory(severity: str, key: str = "no-signal:step=1") -> AdvisoryRaised:
    return AdvisoryRaised(
        key=key,
        rule="no-signal",
        severity=severity,
        message="every group of step 1 got the same reward",
        threshold="no_signal_share >= 0.5",
        value=1.0,
        step=1,
    )


@pytest.mark.e2e
def test_the_command_gets_one_json_per_event_that_needs_someone(tmp_path, monkeypatch):
    monkeypatch.setenv("TINKER_API_KEY", "tml-supersecretvalue")
    command, out = recorder(tmp_path)
    bus = EventBus(tmp_path / "run")
    notifier = Notifier(command, tmp_path / "run", lambda m: bus.publish(LogLine(level="warning", message=m)))
    bus.subscribe(notifier)
    bus.publish(started())
    bus.publish(decision("sandbox gone; key tml-abcdefghijkl leaked?"))
    bus.publish(ErrorRaised(step=1, group=0, trial=None, exception_type="X", message="headless", decision_needed=False))
    bus.publish(
        TrialEnded(
            step=1,
            group=0,
            trial="t",
            outcome="Submitted",
            scored=True,
            reward=1.0,
            turns=1,
            output_tokens=4,
            trial_dir=None,
            timings={},
        )
    )
    bus.publish(advisory(LogLevel.WARNING))
    bus.publish(advisory(LogLevel.ERROR))
    bus.publish(RunEnded(status=RunStatus.FAILED, step=1, message="aborted by the decision"))
    notifier.close()
    bus.close()
    bodies = sent(out)
    assert [b["event"] for b in bodies] == ["decision_needed", "advisory", "run_ended"]
    for body in bodies:
        assert body["run"] == "abc123" and body["log_path"] == str(tmp_path / "run")
        assert body["step"] == 1 and body["message"] and isinstance(body["ts"], float)
    first, adv, end = bodies
    assert (first["group"], first["trial"], first["exception_type"]) == (0, "t.s1g0t1", "CancelledByUser")
    assert "needs a decision" in first["message"] and "tml-abcdefghijkl" not in json.dumps(first)
    assert (adv["severity"], adv["rule"], adv["key"]) == ("error", "no-signal", "no-signal:step=1")
    assert end["status"] == "failed" and end["message"] == "run failed at step 1: aborted by the decision"
    assert notifier.sent == 3 and notifier.failures == 0
    assert not [e for e in read_events(tmp_path / "run" / "events.jsonl") if isinstance(e, LogLine)]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "command, problem",
    [("exit 3", "exited with status 3"), ("sleep 30", "was killed after 0.5s"), ("/nonexistent/cmd", "status 127")],
)
def test_a_failing_or_hanging_command_never_holds_the_run_and_is_logged_once(tmp_path, command, problem):
    bus = EventBus(tmp_path)
    notifier = Notifier(command, tmp_path, lambda m: bus.publish(LogLine(level="warning", message=m)), timeout_s=0.5)
    bus.subscribe(notifier)
    for step in range(3):
        bus.publish(RunEnded(status=RunStatus.DONE, step=step, message=None))
    notifier.close(timeout_s=30)
    bus.close()
    assert notifier.failures == 3 and notifier.sent == 0
    logs = [e.message for e in read_events(tmp_path / "events.jsonl") if isinstance(e, LogLine)]
    assert len(logs) == 1 and problem in logs[0] and "not affected" in logs[0], logs


@pytest.mark.e2e
def test_a_hanging_command_is_killed_with_what_it_started(tmp_path):
    marker = tmp_path / "survivor"
    command = f"(sleep 2; touch {marker}) & wait"
    notifier = Notifier(command, tmp_path, lambda m: None, timeout_s=0.3)
    notifier(RunEnded(status=RunStatus.STOPPED, step=0, message=None))
    notifier.close(timeout_s=5)
    # Killed with its process group: nothing of the command is left to touch the marker later.
    assert notifier.failures == 1 and not pids_with(f"touch {marker}"), "the command's child outlived the time limit"
    assert not marker.exists()


def test_notify_flag_is_the_config_key():
    keys, _ = split_flags(["config.max_steps=1", "--notify", "cat >> /tmp/n", "--headless"])
    assert keys == ["config.max_steps=1", "harbor.notify=cat >> /tmp/n"]
    keys, flags = split_flags(["--notify=curl -d @- http://h/x?a=b", "--detach"])
    assert keys == ["harbor.notify=curl -d @- http://h/x?a=b"] and flags.detach
    with pytest.raises(FlagError):
        split_flags(["--notify", "--headless"])


def test_the_console_bell_rings_for_live_events_that_need_someone():
    from tbconsole.record.events import AdvisoryCleared
    from tbconsole.state import RunState
    from tbconsole.ui.bell import BellInbox

    inbox = BellInbox()
    old = time.time() - 60
    inbox.put_many([replace(decision(), ts=old), RunEnded(status=RunStatus.FAILED, step=1, message=None, ts=old)])
    assert not inbox.take_ring(), "events older than the console (catch-up) rang"
    for quiet in (
        RunEnded(status=RunStatus.DONE, step=1, message=None),
        RunEnded(status=RunStatus.STOPPED, step=1, message=None),
        advisory(LogLevel.WARNING),
    ):
        inbox.put(quiet)
        assert not inbox.take_ring(), quiet
    for loud in (decision(), RunEnded(status=RunStatus.FAILED, step=1, message="x"), advisory(LogLevel.ERROR)):
        inbox.put(loud)
        assert inbox.take_ring() and not inbox.take_ring(), loud
    inbox.put(advisory(LogLevel.ERROR))  # raised again, not cleared: rung already
    assert not inbox.take_ring()
    inbox.put(AdvisoryCleared(key="no-signal:step=1", message="cleared"))
    inbox.put(advisory(LogLevel.ERROR))
    assert inbox.take_ring()
    assert inbox.drain(RunState()) == 11  # every event still reaches the state


@pytest.mark.e2e
def test_publishing_never_waits_for_the_command(tmp_path):
    # The command blocks until the test lets it go: publishing returns while it is still blocked.
    gate = tmp_path / "go"
    command = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    bus = EventBus(tmp_path)
    notifier = Notifier(command, tmp_path, lambda m: bus.publish(LogLine(level="warning", message=m)), timeout_s=60)
    bus.subscribe(notifier)
    for step in range(3):
        bus.publish(RunEnded(status=RunStatus.DONE, step=step, message=None))
    assert notifier.sent == 0 and notifier.failures == 0  # all three published, none delivered yet
    gate.touch()
    notifier.close(timeout_s=60)
    bus.close()
    assert notifier.sent == 3 and notifier.failures == 0
