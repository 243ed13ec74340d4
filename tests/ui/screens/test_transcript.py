"""The transcript built from capture files: what each turn saw and said, read as the file grows,
decoded from tokens for lines without text, completed by Harbor's files, drawn lazily."""

import json
from collections import Counter
from dataclasses import replace

import pytest

from tbconsole.bench.transcript import TRIAL, long_trial_run
from tbconsole.record.capturefile import read_records
from tbconsole.record.events import EventBus, ProxyRequest, TrialEnded
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import reduce_all
from tbconsole.synthetic.captures import SyntheticCaptures
from tbconsole.synthetic.run import synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import BusSource, Replay
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.present.transcript_doc import Options, TranscriptBuilder
from tbconsole.ui.present.trial_outputs import AtifStep, TrialFiles
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.recorded import record_finished
from tests_support.ui import T_FIXED, wait_for

pytestmark = pytest.mark.timeout(120)


def shown_text(sections) -> str:
    return "\n".join("".join(text for text, _ in piece.spans) for s in sections for piece in s.pieces)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The finished fixture's run with its capture files: (folder, events)."""
    folder = tmp_path_factory.mktemp("finished") / "run"
    return folder, record_finished(folder)


def test_turns_come_from_capture_lines_as_plain_text(recorded):
    folder, events = recorded
    state = reduce_all(events)
    t = next(t for t in state.trials.values() if t.done and t.scored and t.turns >= 4)
    records = read_records(RunFolder(folder).capture_file(t.step, t.group, t.trial))
    assert records and all(r.has_text for r in records)
    sections = TranscriptBuilder().build(t, records, TrialFiles(trial_dir=None), Options())
    keys = [s.key for s in sections]
    assert keys[0] == "instruction" and keys[-1] == "verifier"
    assert [k for k in keys if k.startswith("turn")] == [f"turn{r.turn}" for r in records]
    text = shown_text(sections)
    assert f"Task {t.task}: make the tests pass." in text  # the user's message of turn 0
    assert "<returncode>0</returncode>" in text  # a tool output (a later turn's new message)
    assert records[1].reply.reasoning in text and "ls -la /app" in text  # replies: reasoning, text
    # Hostile strings stay inert: no escape, bell or bidi override reaches the screen.
    assert not any(ch in text for ch in "\x1b\x07\x08\u202e")
    rejected = [turn for turn in t.transcript if not turn.captured]
    assert len([k for k in keys if k.startswith("request")]) == len(rejected)


def test_a_line_without_text_is_decoded_from_its_tokens(tmp_path):
    captures = SyntheticCaptures(tmp_path)
    events = list(
        synthetic_run(
            steps=1, groups=1, group_size=1, turns=(3, 3), text=False, log_path=str(tmp_path), captures=captures
        )
    )
    captures.write_all()
    state = reduce_all(events)
    t = next(iter(state.trials.values()))
    records = read_records(RunFolder(tmp_path).capture_file(0, 0, t.trial))
    assert records and not any(r.has_text for r in records)
    builder = TranscriptBuilder()
    waiting = shown_text(builder.build(t, records, TrialFiles(trial_dir=None), Options()))
    assert "decoding its tokens" in waiting
    decoder = load_decoder(state.model_name)
    assert decoder.available
    text = shown_text(builder.build(t, records, TrialFiles(trial_dir=None), Options(decoder=decoder)))
    assert "decoded from its tokens" in text and "echo synthetic" in text
    # Harbor's trajectory fills in the messages the lines lack: turn 1's tool output.
    steps = [
        AtifStep(step_id=1, source="user", message="the task, from trajectory.json"),
        AtifStep(step_id=2, source="agent", message="ls", observations=["output of ls, from trajectory.json"]),
    ]
    text = shown_text(builder.build(t, records, TrialFiles(trial_dir=None, steps=steps), Options(decoder=decoder)))
    assert "the task, from trajectory.json" in text and "output of ls, from trajectory.json" in text
    # ``c``: the reply's tokens, coloured by probability.
    coloured = builder.build(t, records, TrialFiles(trial_dir=None), Options(decoder=decoder, logprobs=True))
    assert "tokens coloured by probability" in shown_text(coloured)


@pytest.mark.e2e
async def test_a_reply_shows_within_a_second_of_its_capture(tmp_path):
    """Live: the capture line is written, its event published; the transcript shows the reply."""
    captures = SyntheticCaptures(tmp_path)
    events = list(
        synthetic_run(
            steps=1, groups=1, group_size=1, turns=(6, 6), hostile=False, log_path=str(tmp_path), captures=captures
        )
    )
    requests = [i for i, e in enumerate(events) if isinstance(e, ProxyRequest) and e.captured]
    bus = EventBus()
    app = ConsoleApp(source=BusSource(bus, history=events[: requests[0]]), clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.selected_trial())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        assert not [k for k in screen.blocks if k.startswith("turn")]
        # Only the capture line, no event yet: the once-a-second poll finds it.
        first = events[requests[0]]
        captures.write(first)
        await wait_for(pilot, lambda: "turn0" in screen.blocks, timeout=30)
        assert "I'll look at the files first." in shown_text(screen.body.sections)
        # The event of the next turn: read at once, not at the next second.
        bus.publish(first)
        second = events[requests[1]]
        for e in events[requests[0] + 1 : requests[1]]:
            bus.publish(e)
        captures.write(second)
        bus.publish(second)
        await wait_for(pilot, lambda: "turn1" in screen.blocks, timeout=3)
        assert not app.state.trials[second.trial].done


@pytest.mark.e2e
async def test_k_opens_the_token_view_of_the_turn_at_the_top(recorded):
    folder, events = recorded
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and "turn0" in app.screen.blocks)
        screen = app.screen
        await pilot.press("home")
        await pilot.press("k")
        await pilot.pause(0.2)
        try:
            from tbconsole.ui.screens.tokens import TokenScreen
        except ImportError:  # not there yet: the key says so instead of failing
            assert isinstance(app.screen, TranscriptScreen)
            assert any("token view" in str(n.message) for n in app._notifications)
        else:
            assert isinstance(app.screen, TokenScreen)
        del screen


@pytest.mark.e2e
async def test_a_long_transcript_draws_only_what_is_on_screen(tmp_path):
    events = long_trial_run(tmp_path / "run", 200)
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: events[-1].ts)
    app.animation_level = "none"
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.2)
        app.open_transcript(TRIAL)
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.body.lines_rendered)
        view = app.screen.body
        pieces = sum(len(s.pieces) for s in view.sections)
        assert len(app.screen.records) == 200 and pieces > 600 and view.total_lines > 4000
        assert view.follow and view.scroll_y == view.max_scroll_y  # opens at the end, following
        assert view.pieces_drawn < 25  # one screen's worth, not 200 turns
        await pilot.press("home")
        for _ in range(5):
            await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert not view.follow and view.pieces_drawn < 60
        top = view.section_at(round(view.scroll_y))
        # What is drawn is what the layout says is there: the line at the top belongs to its section.
        assert top is not None and top.key.startswith(("turn", "instruction"))
        await pilot.press("end")
        await wait_for(pilot, lambda: view.follow and view.scroll_y == view.max_scroll_y)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


@pytest.mark.e2e
async def test_a_replay_moved_back_shows_the_turns_reported_so_far(recorded):
    folder, events = recorded
    captured = Counter(e.trial for e in events if isinstance(e, ProxyRequest) and e.captured)
    trial = next(e.trial for e in events if isinstance(e, TrialEnded) and e.scored and captured[e.trial] >= 3)
    requests = [i for i, e in enumerate(events) if isinstance(e, ProxyRequest) and e.trial == trial and e.captured]
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        app.replay_seek(requests[1] + 1)  # its first two turns reported, the file holds them all
        app.open_transcript(trial)
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and "turn1" in app.screen.blocks)
        screen = app.screen
        assert len(screen.records) == len(requests) >= 3
        assert [k for k in screen.blocks if k.startswith("turn")] == ["turn0", "turn1"]
        assert screen.blocks[-1] != "verifier"  # the trial has not ended at this point of the replay


# -- how the agent exited ---------------------------------------------------------------------------


def mini_swe_agent_record(folder, exit_status, *, info_status=None, messages=3, filler=0):
    """``agent/mini-swe-agent.trajectory.json`` as mini-swe-agent 2 writes it: its info (config,
    exit status) first, then the messages, the last one its exit."""
    agent = folder / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    body = {
        "info": {"config": {"agent": {"step_limit": 3}}, "exit_status": info_status or exit_status, "submission": ""},
        "messages": [{"role": "user", "content": "x" * filler} for _ in range(messages)]
        + [{"role": "exit", "content": exit_status, "extra": {"exit_status": exit_status, "submission": ""}}],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    path = agent / "mini-swe-agent.trajectory.json"
    path.write_text(json.dumps(body, indent=2))
    (agent / "mini-swe-agent.txt").write_text(f"…\nExit:\n{exit_status}\nSaved trajectory\n")
    return path


def test_the_agents_exit_is_read_from_its_own_record(tmp_path):
    from tbconsole.ui.data.trialfiles import agent_exit, load_trial_files

    small = tmp_path / "small"
    mini_swe_agent_record(small, "LimitsExceeded")
    assert agent_exit(small) == load_trial_files(small).agent_exit == "LimitsExceeded"
    # A long run's record: read at its ends only; the last word (its exit message) counts.
    long = tmp_path / "long"
    path = mini_swe_agent_record(long, "LimitsExceeded", info_status="Submitted", messages=50, filler=10_000)
    assert path.stat().st_size > 400_000 and agent_exit(long) == "LimitsExceeded"
    # One being written (no end yet): its info says.
    path.write_bytes(path.read_bytes()[:300_000])
    assert agent_exit(long) == "Submitted"
    assert agent_exit(tmp_path / "none") is None  # an agent without such a record (Claude Code, Codex)
    assert load_trial_files(tmp_path / "none").agent_exit is None


def head_text(app) -> str:
    head = app.screen.query("#thead")
    return head.first().content.plain if head and head.first().content else ""


@pytest.mark.e2e
async def test_the_header_says_how_the_agent_exited_beside_the_outcome(recorded, tmp_path):
    """A trial cut at its step limit: Harbor saw the agent exit 0 (Submitted, scored 0); the agent's
    own record says LimitsExceeded, and so does the header."""
    _, events = recorded
    ended = next(e for e in events if isinstance(e, TrialEnded) and e.outcome == "Submitted" and e.reward == 0)
    mini_swe_agent_record(tmp_path / "trial", "LimitsExceeded")
    events = [replace(e, trial_dir=str(tmp_path / "trial")) if e is ended else e for e in events]
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        app.open_transcript(ended.trial)
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and "reward" in head_text(app))
        head = head_text(app).splitlines()
        assert head[1].startswith("reward 0  agent exit LimitsExceeded (scored as Submitted)"), head
        other = next(e for e in events if isinstance(e, TrialEnded) and e.trial != ended.trial and e.scored)
        await pilot.press("escape")
        app.open_transcript(other.trial)  # no agent record: the outcome alone, as before
        await wait_for(
            pilot,
            lambda: (
                isinstance(app.screen, TranscriptScreen)
                and app.screen.trial == other.trial
                and "reward" in head_text(app)
            ),
        )
        head = head_text(app).splitlines()
        assert head[1].startswith(f"reward {other.reward:g}  {other.outcome}") and "agent exit" not in head[1]
