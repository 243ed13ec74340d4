"""Driving the console under Textual's pilot: a fixed clock, waiting for a condition, letting
the app settle before a snapshot, and widgets' text."""

import dataclasses
import time

from tbconsole.record.events import RunStarted, read_events

from tests_support.paths import FIXTURES

T_FIXED = 1_767_225_600.0 + 400  # the fake clock of app tests (the synthetic run starts at T0)

# A real run's group, recorded once (tests/ui/make_group_fixture.py): the group and find screens read it.
GROUP_RUN = FIXTURES / "group-run"


async def wait_for(pilot, predicate, timeout=10.0, step=0.05):
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(step)
    raise AssertionError("condition not reached in time")


async def settle(pilot):
    """Let the app fold its events and draw (before a snapshot)."""
    await pilot.pause(0.2)
    await pilot.wait_for_scheduled_animations()
    pilot.app.tick()
    await pilot.pause(0.2)
    pilot.app.tick()
    await pilot.pause(0.1)


def rendered(widget, width=120) -> str:
    """A widget's content as plain text."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(widget.content)
    return console.export_text()


def run_events(folder, log_path=None):
    """A run folder's events, its RunStarted pointing at ``log_path`` (default: the folder)."""
    where = str(log_path or folder)
    return [
        dataclasses.replace(e, log_path=where) if isinstance(e, RunStarted) else e
        for e in read_events(folder / "events.jsonl")
    ]
