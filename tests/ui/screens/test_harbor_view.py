"""`h` in a transcript: the command that opens the trial's Harbor trial folder in Harbor's own
viewer, shown and copied to the clipboard (the console starts no server); the key is in the
footer at 80 columns; a trial without a folder says so."""

import shlex

import pytest

from tbconsole.harbor.harborview import harbor_view
from tbconsole.synthetic.run import synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.ui import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def footer_text(app) -> str:
    return app.screen._compositor.render_strips()[-1].text


async def open_transcript(app, pilot, events):
    await wait_for(pilot, lambda: app.state.events == len(events) and app.screen.grid.selected_trial())
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
    return app.screen


async def test_h_shows_and_copies_the_harbor_view_command_of_the_trial(tmp_path):
    events = list(
        synthetic_run(steps=1, groups=1, group_size=2, hostile=False, log_path=str(tmp_path), trials_dir=str(tmp_path))
    )
    app = ConsoleApp(source=ListSource(events), clock=lambda: events[-1].ts)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_transcript(app, pilot, events)
        trial_dir = app.state.find_trial(screen.trial).trial_dir
        assert trial_dir and "h Harbor" in footer_text(app) and "q Quit" in footer_text(app)
        await pilot.press("h")
        view = harbor_view(trial_dir)
        assert app.clipboard == view.command
        assert shlex.split(view.command)[1:] == ["view", str(tmp_path.parent), "--jobs"]
        assert view.path == f"/jobs/{tmp_path.name}/trials/{screen.trial}"
        (note,) = [n for n in app._notifications if n.title.startswith("harbor view")]
        assert view.command in note.message and view.path in note.message
        assert isinstance(app.screen, TranscriptScreen)  # nothing else happened


async def test_a_trial_without_a_folder_says_so(tmp_path):
    events = list(synthetic_run(steps=1, groups=1, group_size=1, hostile=False, log_path=str(tmp_path)))
    app = ConsoleApp(source=ListSource(events), clock=lambda: events[-1].ts)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_transcript(app, pilot, events)
        await pilot.press("h")
        assert app.clipboard == ""
        assert any("has not made this trial's folder" in n.message for n in app._notifications)
