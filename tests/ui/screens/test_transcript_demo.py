"""The transcript over real demo runs (the local sandbox, the embedded engine, mini-swe-agent
through the capture proxy): live, a reply shows before its trial ends; replayed, a finished
trial shows its turns, the verifier and the agent's log from Harbor's files."""

import contextlib
import os

import pytest

from tbconsole.bench.console import start_demo, stop_runner
from tbconsole.demo.recipe import MULTI_TURN_FLAG
from tbconsole.entry.attach import attach_app
from tbconsole.record.control import ControlClient
from tbconsole.record.enums import ControlCommand
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay, read_all
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.ui import wait_for
from tests_support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]


def replies(screen) -> list[str]:
    """The replies' text on the transcript: what follows each "assistant ›" label."""
    out = []
    for section in screen.body.sections:
        spans = [span for piece in section.pieces for span in piece.spans]
        for i, (text, _) in enumerate(spans):
            if text == "assistant ›":
                after = "".join(t for t, _ in spans[i + 1 :]).strip()
                if after and not after.startswith("(decoding"):
                    out.append(after)
    return out


@pytest.mark.timeout(1200)
async def test_a_live_transcript_shows_a_reply_before_its_trial_ends(tmp_path):
    log = tmp_path / "run"
    # One small batch, straight away (no held-out evaluation first, no KL reference to load), of
    # the multi-turn demo: a trial's first reply is there while its second turn is still to come.
    small = ("config.eval_every=0", "config.kl_penalty_coef=0", "config.dataset_builder.groups_per_batch=1")
    pid = start_demo(log, 1, MULTI_TURN_FLAG, *small)  # returns once a batch is in flight
    try:
        app = attach_app(log, None)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.state.trials, timeout=120)
            trial = min(app.state.trials.values(), key=lambda t: (t.done, t.started or 0)).trial
            app.open_transcript(trial)
            await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
            screen = app.screen
            t = lambda: app.state.trials[trial]  # noqa: E731
            assert not t().done, "the trial ended before the console could open it"
            await wait_for(pilot, lambda: replies(screen) or t().done, timeout=600, step=0.2)
            assert replies(screen) and not t().done, "the reply showed only after the trial ended"
            assert screen.records and [k for k in screen.blocks if k.startswith("turn")]
            await wait_for(pilot, lambda: t().done, timeout=600, step=0.5)
            await wait_for(pilot, lambda: "verifier" in screen.blocks, timeout=10)
    finally:
        # seen what it came for: abort (a stop would train the batch first), then make sure
        ControlClient(log).send(ControlCommand.ABORT)
        with contextlib.suppress(AssertionError):  # not gone in time: stop_runner's signals follow
            wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 60, lambda: "the runner outlived its abort")
        stop_runner(pid)


@pytest.mark.timeout(1500)
async def test_a_replayed_demo_trial_shows_turns_verifier_and_agent_log(demo_run):
    events = read_all(demo_run)
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: events[-1].ts)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        trial = next(t for t in app.state.trials.values() if t.done and t.scored).trial
        app.open_transcript(trial)
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        await wait_for(pilot, lambda: replies(screen), timeout=30)  # text, or decoded from tokens
        keys = screen.blocks
        assert keys[0] == "instruction" and "turn0" in keys and "verifier" in keys
        assert "agentlog" in keys  # Harbor's agent/*.txt
        assert screen.files is not None and screen.files.instruction
