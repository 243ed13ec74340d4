"""Every string an event carries is shown inertly, on every screen and in every printed line.

Generated from the event schema: each event kind's text fields (plain strings and the strings
nested in its lists and dicts) get hostile text appended: escape codes (clear screen, window
title, hyperlink), Rich/Textual markup (styles, a click action, a link), bidi overrides, bells.
The same suffix on every string keeps the run's links (trial ids, task names) intact, so the run
still reads as a run. The console then opens every screen over it, and what reaches the terminal
is checked: no control character, no markup taken as markup. The summary printed on exit and
the headless run log are checked alike.

Paths and ids (``tbconsole.common.inert.RAW`` fields: trial ids, task names, trial folders) reach the
state as the runner wrote them, hostile text and all, so this is what checks that every view
draws them inertly: the capture files are written under the hostile trial ids too (the
transcript, the token view and find read them by those names), and the tour must visit every
screen the console has, so that a new one is checked as soon as it exists.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import pkgutil
import re
import shutil
import typing

import pytest
from textual.screen import Screen
from textual.strip import Strip

import tbconsole.ui.screens
from tbconsole.common.inert import CONTROL
from tbconsole.record import events as ev
from tbconsole.record.enums import RunnerState
from tbconsole.record.lease import read_lease
from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.progress import ProgressLog
from tbconsole.runs.compare import RunReading
from tbconsole.state import reduce_all
from tbconsole.synthetic.captures import SyntheticCaptures
from tbconsole.synthetic.run import synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.compare_app import CompareApp
from tbconsole.ui.data.source import ListSource
from tbconsole.ui.present.wording import exit_summary
from tbconsole.ui.screens.advisories import AdvisoriesScreen
from tbconsole.ui.screens.compare import CompareScreen
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.decision import DecisionScreen
from tbconsole.ui.screens.find import FindScreen
from tbconsole.ui.screens.help import HelpScreen
from tbconsole.ui.screens.ledger import LedgerScreen
from tbconsole.ui.screens.log import LogScreen
from tbconsole.ui.screens.offpolicy_limit import OffPolicyLimitScreen
from tbconsole.ui.screens.pipeline import PipelineScreen
from tbconsole.ui.screens.tokens import TokenScreen
from tbconsole.ui.screens.transcript import TranscriptScreen
from tbconsole.ui.screens.weight import WeightScreen

from tests_support.ui import wait_for

pytestmark = pytest.mark.timeout(180)

MARK = "ZQX"  # shown wherever the hostile text is shown, first, so that a cut cell keeps it
HOSTILE = (
    f" {MARK}\x1b[2J\x1b[H\x1b]0;title\x07\x1b]8;;http://evil.example\x1b\\ln\x1b]8;;\x1b\\"
    "[strike]STK[/strike][@click=app.bell_from_event]CLK[/][link=http://evil.example]LNK[/link]"
    "\u202eexe.txt\u202c\x9b31m\x08\r"
)
HEAD = f"{MARK}\x1b]0;t\x07\x1b[7m\u202e"  # before the value too: a narrow cell shows the start
# Markup taken as markup would show as a style no view uses (strike), a click action or a link.


def hostile(value):
    """``value`` with hostile text around every string in it."""
    if isinstance(value, str):
        return HEAD + value + HOSTILE
    if isinstance(value, dict):
        return {hostile(k): hostile(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(hostile(v) for v in value)
    return value


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def text_fields(cls) -> list[str]:
    """From the schema: the fields whose annotation can hold text (str, enums, containers)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        shown = str(hints[f.name])
        if not re.fullmatch(r"(<class '(int|float|bool)'>|(int|float|bool) \| None)", shown):
            out.append(f.name)
    return out


def has_text(event: ev.Event) -> bool:
    """Whether the event carries text (a held-out event: whether the event it wraps does)."""
    if isinstance(event, ev.HeldOutEvent):
        inner = event.unwrap()
        return inner is not None and has_text(inner)
    return any(strings(getattr(event, name)) for name in text_fields(type(event)))


def hostile_event(event: ev.Event) -> ev.Event:
    if isinstance(event, ev.HeldOutEvent):  # the wrapped event's own text (its kind kept readable)
        inner = event.unwrap()
        assert inner is not None
        return ev.HeldOutEvent.wrap(hostile_event(inner), event.after_updates)
    return dataclasses.replace(event, **{name: hostile(getattr(event, name)) for name in text_fields(type(event))})


EVENT_KINDS = [cls for cls in ev.Event.__subclasses__() if cls.kind]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """A synthetic run (errors, advisories, a decision, logs, checkpoints) with every string of
    every event made hostile, and its capture files (written from the plain events)."""
    folder = tmp_path_factory.mktemp("hostile")
    captures = SyntheticCaptures(folder)
    events = list(
        synthetic_run(
            steps=3,
            groups=2,
            group_size=2,
            turns=(3, 5),
            error_at=(1, 1),
            log_path=str(folder),
            captures=captures,
            heldout_at=(3,),
        )
    )
    for e in events:
        inner = e.unwrap() if isinstance(e, ev.HeldOutEvent) else e
        if isinstance(inner, ev.ProxyRequest):
            captures.write(inner)
    # What the synthetic run does not raise: advisories (one raised and one cleared, on a trial
    # of step 1), a task dropped from the batches, and log lines of each level.
    trial = next(e for e in events if isinstance(e, ev.TrialEnded) and e.step == 1)
    at = events[-1].ts
    extra = [
        ev.AdvisoryRaised(
            ts=at,
            key="stall:a",
            rule="stall",
            severity="warning",
            message="stalled",
            threshold="stall_s >= 300",
            value=301.0,
            step=1,
            group=trial.group,
            trial=trial.trial,
            metric="time/stall",
        ),
        ev.AdvisoryRaised(ts=at, key="stall:b", rule="stall", severity="error", message="gone", threshold="x >= 1"),
        ev.AdvisoryCleared(ts=at, key="stall:b", message="back"),
        ev.TaskAdmission(ts=at, task=trial.trial.split(".")[0], weight=0.0, step=2, by="user", reason="dropped"),
        *(ev.LogLine(ts=at, level=level, message=f"a {level} line") for level in ("info", "warning", "error")),
        # The off-policy mode's: its limit lowered, a group trained a step late and one dropped.
        ev.OffPolicyLimit(ts=at, max_steps_off_policy=1, from_update=2, by="console"),
        ev.GroupTrained(ts=at, step=1, group=trial.group, update=2, weights=[1]),
        ev.GroupDropped(ts=at, step=1, group=trial.group, reason="stale", weights=[0], update=2, trials=2),
    ]
    events[-1:-1] = extra
    kinds = {type(e) for e in events}
    plain_events, events = events, [hostile_event(e) for e in events]
    # Each training trial's capture file under its hostile id too: the console finds files by the
    # ids as the runner wrote them (a "/" in the hostile text makes folders of it, read alike).
    run = RunFolder(folder)
    for before, after in zip(plain_events, events, strict=True):
        if isinstance(before, ev.ProxyRequest) and isinstance(after, ev.ProxyRequest) and before.captured:
            source = run.capture_file(before.step, before.group, before.trial)
            target = run.capture_file(after.step, after.group, after.trial)
            if source.exists() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    (folder / "events.jsonl").write_text("".join(e.to_json() + "\n" for e in events))  # for the timeline
    return folder, events, kinds


def test_the_run_carries_every_event_kind_with_text(hostile_run):
    _, events, kinds = hostile_run
    # Every kind with a text field is in the run, so the screens below see each one's text.
    missing = {cls.kind for cls in EVENT_KINDS if text_fields(cls)} - {cls.kind for cls in kinds}
    assert not missing, f"the synthetic run lacks {sorted(missing)}: add them so they are checked"
    with_text = [e for e in events if has_text(e)]
    assert len(with_text) > 0.9 * len(events)
    assert all(MARK in repr(e) for e in with_text), [e for e in with_text if MARK not in repr(e)][:3]


def leaks(strips: list[Strip]) -> list[str]:
    """What in these strips is not inert: a control character, or markup taken as markup (a
    style, a click action or a link from event text)."""
    found = []
    for strip in strips:
        line = strip.text
        if CONTROL.search(line):
            found.append(f"control character: {line!r}")
        for segment in strip:
            style = segment.style
            if style is not None and (
                style.strike or "evil" in str(style.link or "") or "from_event" in str(style.meta.get("@click", ""))
            ):
                found.append(f"markup from event text applied: {line!r}")
    return found


def screen_strips(app) -> list[Strip]:
    return app.screen._compositor.render_strips()


def console_screens() -> set[type]:
    """Every screen class the console's screens package defines (the compare app's excepted:
    it is checked over the hostile run on its own)."""
    found = set()
    for info in pkgutil.iter_modules(tbconsole.ui.screens.__path__):
        module = importlib.import_module(f"tbconsole.ui.screens.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Screen) and cls.__module__ == module.__name__:
                found.add(cls)
    return found - {CompareScreen}


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_every_screen_shows_hostile_event_text_inertly(hostile_run, size):
    folder, events, _ = hostile_run
    source = ListSource(events)
    source.path = folder  # type: ignore[attr-defined]  # the folder the timeline reads, as a followed run's
    app = ConsoleApp(source=source, clock=lambda: events[-1].ts + 5)
    seen: dict[str, list[str]] = {}
    visited: set[type] = set()

    async def look(pilot, name: str, shows: str = MARK) -> None:
        # Each screen shows event text once it has drawn (the timeline reads the file first; at
        # 80 columns it has no room for names and shows bars only).
        if name == "timeline" and size[0] < 100:
            shows = "timeline step"
        await wait_for(pilot, lambda: name == "help" or any(shows in s.text for s in screen_strips(app)), timeout=30)
        seen[name] = leaks(screen_strips(app))
        visited.add(type(app.screen))

    async def back_to_main(pilot) -> None:
        while type(app.screen).__name__ != "MainScreen":
            await pilot.press("escape")
            await pilot.pause()

    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events) and app.screen.grid.selected_trial(), timeout=60)
        await pilot.pause()
        await look(pilot, "main")
        visited.add(type(app.screen))
        for key, screen_type, name in (
            ("l", LogScreen, "log"),
            ("v", AdvisoriesScreen, "advisories"),
            ("question_mark", HelpScreen, "help"),
            ("D", LedgerScreen, "ledger"),
            ("P", PipelineScreen, "pipeline"),
        ):
            await pilot.press(key)
            await wait_for(pilot, lambda t=screen_type: isinstance(app.screen, t))
            await pilot.pause()
            await look(pilot, name)
            await back_to_main(pilot)
        trial = app.screen.grid.selected_trial()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        transcript = app.screen
        # Its capture file, found by the hostile id: the turns are there, and so is the token view.
        await wait_for(pilot, lambda: any(k.startswith("turn") for k in transcript.blocks), timeout=30)
        await look(pilot, "transcript")
        await pilot.press("home", "k")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen), timeout=30)
        await pilot.pause()
        await look(pilot, "tokens")
        await back_to_main(pilot)
        for key, name in (("g", "group"), ("w", "timeline")):
            await pilot.press(key)
            await wait_for(pilot, lambda: type(app.screen).__name__ != "MainScreen", timeout=30)
            await pilot.pause()
            await look(pilot, name)
            await back_to_main(pilot)
        # Find searches under the run's log_path, here hostile text naming no folder: it finds
        # nothing (tests/ui/screens/test_raw_paths.py draws the matches of a hostile trial id).
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        finder = app.screen
        await pilot.press(*"the", "enter")
        await wait_for(pilot, lambda: finder.result is not None and not finder.searching, timeout=30)
        await look(pilot, "find", shows="the")
        await back_to_main(pilot)
        # What a live run would ask (a replay is not steered): the prompts that name a task or a
        # trial, and the decision on an error (the hostile error.raised itself, every field).
        task = app.state.trials[trial].task
        error = next(e for e in events if isinstance(e, ev.ErrorRaised))
        for screen, name in (
            (WeightScreen(task, 1.0), "weight"),
            (DecisionScreen(error, can_decide=False), "decision"),
        ):
            app.push_screen(screen)
            await wait_for(pilot, lambda s=screen: app.screen is s)
            await look(pilot, name, shows=MARK[:2])
            await back_to_main(pilot)
        app.push_screen(OffPolicyLimitScreen(1))  # names no event text: drawn all the same
        await wait_for(pilot, lambda: isinstance(app.screen, OffPolicyLimitScreen))
        await look(pilot, "off-policy limit", shows="max_steps_off_policy")
        await back_to_main(pilot)
        app.confirm_cancel_trial(trial)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await look(pilot, "cancel trial", shows=MARK[:2])
        await back_to_main(pilot)
    bad = {name: found for name, found in seen.items() if found}
    assert not bad, "\n".join(f"{name}: {line}" for name, found in bad.items() for line in found[:5])
    missing = {cls.__name__ for cls in console_screens() - visited}
    assert not missing, f"screens the tour does not open: {sorted(missing)}: add them"
    assert folder.is_dir()


@pytest.mark.e2e
async def test_the_compare_screen_shows_hostile_runs_inertly(hostile_run, tmp_path):
    """``tbconsole compare`` over two copies of the hostile run: task names, labels, settings."""
    folder, _, _ = hostile_run
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        shutil.copyfile(folder / "events.jsonl", tmp_path / name / "events.jsonl")
    for size in ((120, 60), (80, 40)):
        app = CompareApp([RunReading.open(tmp_path / name) for name in ("a", "b")])
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda a=app: a.reads >= 1 and isinstance(a.screen, CompareScreen), timeout=30)
            await pilot.pause()
            assert any(MARK in s.text for s in screen_strips(app))
            found = leaks(screen_strips(app))
            assert not found, "\n".join(found[:5])


def test_the_exit_summary_and_the_headless_log_are_inert(hostile_run):
    folder, events, _ = hostile_run
    state = reduce_all(events)
    lease = read_lease(folder)
    assert lease.state is RunnerState.NONE
    summary = exit_summary(state, lease, folder)
    assert MARK in summary and not CONTROL.search(summary), repr(summary)
    out = io.StringIO()
    log = ProgressLog(out)
    for e in events:
        log(e)
    printed = out.getvalue()
    assert MARK in printed
    bad = [line for line in printed.splitlines() if CONTROL.search(line)]
    assert not bad, bad[:5]
