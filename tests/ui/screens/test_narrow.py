"""What a 150- and an 80-column terminal show whole: the header's word on how the run ended (beside
the run's state when it fits, under it when not), and the token view's bottom lines and keys on a
screen with every key there is (an attached live run, the trainer's log-probs recorded)."""

import shutil
from dataclasses import replace

import orjson
import pytest
from textual.geometry import Region

from tbconsole.record.capturefile import read_records
from tbconsole.record.control import RunControl
from tbconsole.record.events import ControlChanged, RunEnded, RunStarted, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource, LocalControls, Replay
from tbconsole.ui.screens.tokens import TokenScreen
from tbconsole.ui.widgets.header import RunHeader

from tests_support.paths import FIXTURES
from tests_support.ui import T_FIXED, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]
SIZES = [(150, 45), (80, 24)]
STOPPED = "stopped cleanly before batch 3"  # the runner's words for a clean stop


def lines_of(widget) -> list[str]:
    return [strip.text for strip in widget.render_lines(Region(0, 0, *widget.outer_size))]


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_header_says_how_the_run_ended_whole(finished_events, size):
    # A long model name and run id: they take what the state and the news leave.
    events = [
        replace(e, model_name="Qwen/Qwen3-30B-A3B-Instruct-2507", run_id="tbconsole-demo-20261204-160000-8f3a2b")
        if isinstance(e, RunStarted)
        else replace(e, status="stopped", message=STOPPED)
        if isinstance(e, RunEnded)
        else e
        for e in finished_events
    ]
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=size) as pilot:
        header = app.screen.query_one(RunHeader)
        await wait_for(pilot, lambda: any(STOPPED in line for line in lines_of(header)))
        shown = lines_of(header)
        assert "STOPPED" in shown[0] and "step 2 · 3/3 trained" in shown[0]
        assert any(line.rstrip().endswith(STOPPED) for line in shown)  # whole, nothing cut after it
        assert (len(shown), STOPPED in shown[0]) == ((1, True) if size[0] >= 150 else (2, False))
        # The rest of the screen moved down under it, the footer still at the bottom.
        assert "Quit" in screen_lines(app)[-1]


class LiveList(ListSource):
    live = True  # as an attached run's source: q leaves, the run's keys are there


def token_run(tmp_path):
    """The token-view fixture's run as a live one, in a folder with the trainer's log-probs of its
    trial's turns: the token view then shows every key it has (m for the trainer's difference)."""
    folder = tmp_path / "run"
    shutil.copytree(FIXTURES / "token-view", folder)
    capture = next((folder / "capture").rglob("*.jsonl"))
    trial = capture.stem
    events = [
        replace(e, log_path=str(folder)) if isinstance(e, RunStarted) else e
        for e in read_events(folder / "events.jsonl")
    ]
    events = [e for e in events if not isinstance(e, (RunEnded, ControlChanged))]  # still running
    t = next(e for e in events if getattr(e, "trial", None) == trial and hasattr(e, "group"))
    trainer = RunFolder(folder).trainer_logprobs_file(t.step, t.group, trial)
    trainer.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"turn": r.turn, "logprobs": [lp - 0.01 for lp in r.logprobs]} for r in read_records(capture)]
    trainer.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return events, trial


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_token_views_bottom_lines_and_keys_fit(tmp_path, size):
    events, trial = token_run(tmp_path)
    app = ConsoleApp(
        source=LiveList(events),
        controls=LocalControls(RunControl(lambda e: None)),
        mode="attach",
        clock=lambda: T_FIXED,
    )
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events))
        app.push_screen(TokenScreen(trial, 0))
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen) and app.screen.loaded)
        await wait_for(pilot, lambda: app.screen.trainer_logprobs is not None)
        await pilot.press("right")
        await wait_for(pilot, lambda: "q Leave" in screen_lines(app)[-1])
        footer = screen_lines(app)[-1]
        for key in ("esc Back", "p Pause", "s Stop", "? Help", "q Leave"):  # none scrolled away
            assert key in footer, (key, footer)
        assert ("m Trainer Δ" in footer) == (size[0] >= 150)
        # The last key ends whole before the palette's key (was "q Leave (run goes ▏^p palette").
        assert footer.split("▏")[0].rstrip().endswith(("q Leave", "q Leave (run goes on)")), footer
        detail = lines_of(app.screen.query_one("#kdetail"))
        assert [line.split()[0] for line in detail] == ["token", "loss", "trainer"], detail  # all three
        assert "trainer − sampler" in detail[2]
        head = lines_of(app.screen.query_one("#khead"))
        assert head[2].lstrip().startswith("loss mask 1  advantage"), head
