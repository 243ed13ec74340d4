"""Run control: the state machine, batch boundaries, decisions, and the cross-process inbox."""

import asyncio

import pytest

from tbconsole.record.control import ControlClient, ControlError, ControlInbox, RunControl
from tbconsole.record.events import ControlChanged, DecisionMade


async def until(condition, limit: int = 10_000) -> None:
    """Let the loop run until ``condition()`` holds (each turn gives every ready task a step)."""
    for _ in range(limit):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def _control():
    seen = []
    return RunControl(seen.append), seen


async def test_pause_waits_at_the_boundary_until_resume():
    control, seen = _control()
    control.pause()
    assert control.state == "pausing"
    boundary = asyncio.create_task(control.batch_boundary())
    await until(lambda: control.state == "paused")
    assert not boundary.done()
    control.resume()
    assert await boundary is True
    assert [e.state for e in seen if isinstance(e, ControlChanged)] == ["pausing", "paused", "running"]


async def test_stop_and_abort_end_the_run_at_the_boundary():
    control, _ = _control()
    control.stop()
    assert await control.batch_boundary() is False
    control2, _ = _control()
    control2.pause()
    waiting = asyncio.create_task(control2.batch_boundary())
    await until(lambda: control2.state == "paused")
    control2.abort()  # a paused run wakes up to abort
    assert await waiting is False and control2.abort_requested.is_set()


def test_invalid_commands_are_refused():
    control, _ = _control()
    with pytest.raises(ControlError):
        control.resume()
    with pytest.raises(ControlError):
        control.decide("abort")  # nothing pending
    with pytest.raises(ControlError):
        control.apply("explode")


async def test_decisions_headless_default_and_console_answer():
    control, seen = _control()
    assert await control.ask(0, 1, default="abort", timeout=0) == "abort"
    asking = asyncio.create_task(control.ask(0, 1, default="abort", timeout=None))
    await until(lambda: control.state == "awaiting_decision")
    control.decide("retry_group")
    assert await asking == "retry_group"
    assert control.state == "running"
    made = [e for e in seen if isinstance(e, DecisionMade)]
    assert [(m.decision, m.by) for m in made] == [("abort", "headless-default"), ("retry_group", "console")]


async def test_groups_failing_together_share_one_decision():
    """A gateway outage fails every group in flight: one question, one answer for all of them."""
    control, seen = _control()
    asking = [asyncio.create_task(control.ask(0, g, default="abort", timeout=None)) for g in range(3)]
    await until(lambda: control.state == "awaiting_decision")
    for _ in range(10):  # the other two ask too
        await asyncio.sleep(0)
    assert [e.state for e in seen if e.kind == "control.changed"].count("awaiting_decision") == 1
    control.decide("retry_group")
    assert await asyncio.gather(*asking) == ["retry_group"] * 3
    assert control.state == "running"
    with pytest.raises(ControlError):
        control.decide("abort")  # answered: nothing pending any more


async def test_commands_from_another_process_reach_the_run(tmp_path):
    control, _ = _control()
    errors = []
    inbox = ControlInbox(tmp_path, control, on_error=errors.append)
    client = ControlClient(tmp_path)
    client.send("pause")
    client.send("resume")
    client.send("resume")  # not valid any more: reported, not fatal
    assert inbox.poll() == 3
    assert control.state == "running"
    assert len(errors) == 1 and "nothing to resume" in errors[0]
    assert not list(inbox.inbox.iterdir())
    with pytest.raises(ControlError):
        ControlClient(tmp_path / "elsewhere").send("pause")


def test_a_command_still_being_written_is_left_alone(tmp_path):
    """The client writes under a hidden temporary name, then renames: the poller skips dot-names."""
    control, _ = _control()
    inbox = ControlInbox(tmp_path, control)
    (inbox.inbox / ".123-abc.json.tmp-1").write_text('{"command": "pause"}')
    (inbox.inbox / ".124-abc.json").write_text('{"command": "pause"}')
    assert inbox.poll() == 0 and control.state == "running"
    sent = ControlClient(tmp_path).send("pause")
    assert not sent.name.startswith(".") and inbox.poll() == 1 and control.state == "pausing"
