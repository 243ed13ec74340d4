"""The token view (``TokenScreen``): the log-prob colour scale and its legend, the token layout,
the loss mask and advantage rule, Pilot tests over a real demo run folder (colours that change
with log-prob, a cursor and a click that show one token's numbers, turns, held-out trials), and
snapshots of the screen in both themes over a small recorded run (``fixtures/token-view``)."""

import math
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from textual.geometry import Region

from tbconsole.record.capturefile import read_records
from tbconsole.record.events import RunStarted, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.state.reducer import reduce_all
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay
from tbconsole.ui.present.logprob_scale import LogprobScale, TurnStats, escaped, logprob_text, position, prob_text
from tbconsole.ui.present.token_layout import lay_out, shown, word_start
from tbconsole.ui.present.trained import trial_training
from tbconsole.ui.screens.tokens import TokenScreen

from tests_support.paths import FIXTURES
from tests_support.ui import T_FIXED, wait_for

pytestmark = pytest.mark.timeout(120)

DARK = dict(background="#14181F", foreground="#D8DEE9", warning="#E5B567", error="#EF6B73")
TOKEN_FIXTURE = FIXTURES / "token-view"


# -- the scale, the layout, the rule (pure) ---------------------------------------------------


def test_scale_is_continuous_and_separates_confident_tokens():
    probs = [1.0, 0.99999, 0.9999, 0.999, 0.99, 0.95, 0.9, 0.5, 0.1, 1e-3, 1e-5]
    positions = [position(math.log(p)) for p in probs]
    assert positions == sorted(positions) and positions[0] == 0.0 and positions[-1] == 1.0
    scale = LogprobScale.for_theme(**DARK)
    colours = [scale.colour(math.log(p)).hex for p in probs[2:]]
    assert len(set(colours)) == len(colours)  # from p=0.9999 down, every step is its own colour
    # A confident reply (every token above p=0.9) still spans a good part of the scale.
    assert position(math.log(0.91)) - position(math.log(0.99999)) > 0.4
    assert scale.colour(0.0).hex == DARK["background"].upper()  # a certain token is not tinted


def test_legend_says_when_all_tokens_are_above_0_9_and_stretches_to_the_turn():
    scale = LogprobScale.for_theme(**DARK)
    confident = TurnStats.of([math.log(p) for p in (0.999, 0.95, 0.9999, 0.93)])
    legend = scale.legend(confident).plain
    assert "all tokens above p=0.9" in legend and "4 tokens" in legend and "least likely p=0.93" in legend
    assert "╵.9" in legend and "╵.5" in legend  # the probabilities ticked under the bar
    mixed = TurnStats.of([math.log(p) for p in (0.999, 0.3, 0.05)])
    assert "2 below p=0.9" in scale.legend(mixed).plain
    stretched = scale.stretched(confident)
    assert stretched.relative and "this turn's range" in stretched.legend(confident).plain
    # Stretched over the turn: its most and least likely tokens take the scale's two ends.
    assert stretched.colour(math.log(0.9999)) == scale.ramp.at(0.0)
    assert stretched.colour(math.log(0.93)) == scale.ramp.at(1.0)
    assert confident.order[0] == 3 and confident.ranks()[3] == 1


def test_layout_wraps_at_token_boundaries_and_shows_whitespace():
    from rich.style import Style

    pieces = ["def", " f", "():", "\n", "\t", "return", " 1", "  ", "", " longer", " long" * 6]
    styles = [Style(bgcolor=f"#0000{i:02x}") for i in range(len(pieces))]
    layout = lay_out(pieces, styles, width=12)
    assert shown("\n") == "⏎\n" and shown("  ") == "··" and shown("") == "∅" and shown("\t") == "⇥"
    assert layout.rows[:4] == (0, 0, 0, 0) and layout.rows[4] == 1  # after the newline
    assert layout.cols[4] == 0
    for i, (start, end) in enumerate(layout.spans):  # each token's span holds its shown text
        assert layout.text.plain[start:end].replace("\n", "") == shown(pieces[i]).replace("\n", "")
    assert all(len(line) <= 12 for line in layout.text.plain.split("\n"))
    assert layout.rows[9] == 2 and layout.cols[9] == 0  # a token wider than what is left starts a row
    assert layout.rows[10] == 2 and layout.row_count == 6  # one wider than a row is split
    assert layout.vertical(4, -1, goal_col=3) == 1  # up from row 1, column 3: " f" on row 0
    assert layout.vertical(0, 1, goal_col=0) == 4
    assert word_start(pieces, 0, 1) == 1 and word_start(pieces, 4, 1) == 5


def test_training_rule_follows_the_cookbook(finished_events):
    state = reduce_all(finished_events)
    ended = [t for t in state.trials.values() if t.done and t.scored]
    assert ended
    for t in ended:
        group = state.groups[(t.step, t.group)]
        rewards = group.trial_rewards(state.trials)
        training = trial_training(state, t.trial)
        if group.ok is False or any(r is None for r in rewards):
            assert training.mask is not True
            continue
        assert training.advantage == pytest.approx(t.reward - sum(rewards) / len(rewards))
        assert training.mask is True
        assert training.trained == (t.step < state.trained_steps)
    retired = [t for g in state.groups.values() for t in g.retired]
    assert retired  # a retried group's first attempt: never trained on
    assert all(trial_training(state, t).why.startswith("an earlier attempt") for t in retired)
    assert all(trial_training(state, t).mask is False for t in retired)
    held = trial_training(state, "anything", evaluation=True)
    assert held.mask is False and "held-out" in held.why


def test_constant_groups_are_dropped_only_when_the_run_says_so(finished_events):
    state = reduce_all(finished_events)
    constant = next(
        g for g in state.groups.values() if g.ok and g.all_same(state.trials) and g.trial_rewards(state.trials)
    )
    trial = constant.trials[0]
    kept = trial_training(state, trial)
    assert kept.mask is True and kept.advantage == 0.0 and "no signal" in kept.why
    state.config = {"config": {"remove_constant_reward_groups": True}}
    dropped = trial_training(state, trial)
    assert dropped.mask is False and "dropped" in dropped.why


# -- over a real demo run ------------------------------------------------------------------------


def _app(run: Path, theme: str = "dark") -> ConsoleApp:
    return ConsoleApp(replay=Replay(list(read_events(run / "events.jsonl"))), mode="replay", theme=theme)


async def _open(pilot, trial: str, turn: int = 0) -> TokenScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.state.finished and app.state.log_path)
    screen = TokenScreen(trial, turn)
    app.push_screen(screen)
    await wait_for(pilot, lambda: screen.loaded and screen.token_layout is not None)
    await pilot.pause(0.1)
    return screen


def _token_bgcolours(screen: TokenScreen) -> dict[int, set[str]]:
    """Token index → the background colours its rendered segments carry (what the terminal shows)."""
    widget = screen.query_one("#ktokens")
    out: dict[int, set[str]] = {}
    for strip in widget.render_lines(Region(0, 0, widget.size.width, widget.virtual_size.height)):
        for segment in strip:
            if segment.style is None:
                continue
            index = segment.style.meta.get("token")
            if isinstance(index, int) and segment.style.bgcolor is not None:
                out.setdefault(index, set()).add(segment.style.bgcolor.get_truecolor().hex)
    return out


def _varied_turn(run: Path) -> tuple[str, int, list[float]]:
    """A training trial's turn whose tokens' log-probs differ most."""
    state = reduce_all(read_events(run / "events.jsonl"))
    folder = RunFolder(run)
    best = None
    for t in state.trials.values():
        for record in read_records(folder.capture_file(t.step, t.group, t.trial)):
            spread = position(min(record.logprobs, default=0.0)) if record.logprobs else 0.0
            if best is None or spread > best[0]:
                best = (spread, t.trial, record.turn, list(record.logprobs))
    assert best is not None, "the demo run captured no turn"
    return best[1], best[2], best[3]


@pytest.mark.e2e
@pytest.mark.root
async def test_token_colours_change_with_logprob(demo_run):
    trial, turn, logprobs = _varied_turn(demo_run)
    app = _app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, trial, turn)
        assert screen.current is not None and screen.current.turn == turn
        screen.select(screen.stats.order[-1])  # the cursor on the most likely: the least likely shows its colour
        await pilot.pause(0.1)
        colours = _token_bgcolours(screen)
        cursor = screen.cursor
        scale = screen._scale()
        shown_tokens = [i for i in colours if i != cursor]
        assert len(shown_tokens) >= min(len(logprobs) - 1, 20)
        # Tokens whose log-probs sit apart on the scale are drawn in different colours, and every
        # token's colour is the scale's colour for its log-prob.
        for i in shown_tokens:
            assert colours[i] == {scale.colour(logprobs[i]).hex.lower()}
        by_position = sorted(shown_tokens, key=lambda i: position(logprobs[i]))
        low, high = by_position[0], by_position[-1]
        assert position(logprobs[high]) - position(logprobs[low]) > 0.05
        assert colours[low] != colours[high]
        assert len({c for i in shown_tokens for c in colours[i]}) >= 3
        legend = screen.query_one("#klegend").render().plain
        assert "this turn" in legend and f"{len(logprobs)} tokens" in legend


@pytest.mark.e2e
@pytest.mark.root
async def test_cursor_and_click_show_a_tokens_numbers(demo_run):
    trial, turn, logprobs = _varied_turn(demo_run)
    state = reduce_all(read_events(demo_run / "events.jsonl"))
    t = state.trials[trial]
    rewards = state.groups[(t.step, t.group)].trial_rewards(state.trials)
    advantage = t.reward - sum(rewards) / len(rewards)
    app = _app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, trial, turn)
        record = screen.current
        detail = lambda: screen.query_one("#kdetail").render().plain  # noqa: E731
        # The view opens on the turn's least likely token.
        least = min(range(len(logprobs)), key=lambda i: (logprobs[i], i))
        assert screen.cursor == least and "rank 1/" in detail()
        await pilot.press("home")
        assert screen.cursor == 0
        await pilot.press("right", "right")
        i = screen.cursor
        assert i == 2
        text = detail()
        assert f"token 3/{len(record.output)}" in text
        assert f"id {record.output[i]}" in text
        assert escaped(screen.pieces[i]) in text
        assert f"logprob {logprob_text(logprobs[i])}" in text and f"p {prob_text(math.exp(logprobs[i]))}" in text
        assert "loss mask 1 trained on" in text  # a scored trial of a group that trained
        assert f"advantage {advantage:+.4g}" in text
        # A click on another token selects it.
        target = len(record.output) - 1
        layout = screen.token_layout
        widget = screen.query_one("#ktokens")
        await pilot.click(widget, offset=(layout.cols[target], layout.rows[target] - int(screen.body.scroll_y)))
        assert screen.cursor == target
        assert f"id {record.output[target]}" in detail()
        rank = screen.ranks[target]
        await pilot.press("n")  # the next less likely token after the one clicked (from the least likely on)
        assert screen.ranks[screen.cursor] == rank % len(record.output) + 1


@pytest.mark.e2e
@pytest.mark.root
async def test_turns_held_out_trials_and_back(demo_run):
    state = reduce_all(read_events(demo_run / "events.jsonl"))
    folder = RunFolder(demo_run)
    trial = max(
        state.trials.values(), key=lambda t: len(read_records(folder.capture_file(t.step, t.group, t.trial)))
    ).trial
    records = read_records(folder.capture_file(state.trials[trial].step, state.trials[trial].group, trial))
    app = _app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, trial, 0)
        assert screen.position == 0
        await pilot.press("right_square_bracket")
        assert screen.position == min(1, len(records) - 1)
        assert f"turn {screen.position + 1} of {len(records)}" in screen.query_one("#khead").render().plain
        await pilot.press("left_square_bracket")
        assert screen.position == 0
        await pilot.press("escape")
        assert not isinstance(app.screen, TokenScreen)
        held = sorted((demo_run / "heldout" / "capture").rglob("*.jsonl"))
        if held:
            screen = await _open(pilot, held[0].stem, 0)
            head = screen.query_one("#khead").render().plain
            assert screen.place.evaluation and "loss mask 0" in head and "held-out" in head
            assert screen.pieces


@pytest.mark.e2e
@pytest.mark.root
async def test_trainer_logprobs_are_recorded_and_shown(demo_run):
    """The run writes the trainer's log-prob of every trained token beside the captures; over a
    step they average to the run's own optim/kl_sample_train_v1, and the view shows them."""
    state = reduce_all(read_events(demo_run / "events.jsonl"))
    folder = RunFolder(demo_run)
    step = max(t.step for t in state.trials.values())  # the last step: its trials' detail is kept
    diffs: list[float] = []
    for t in state.trials.values():
        if t.step != step:
            continue
        sampled = {r.turn: r.logprobs for r in read_records(folder.capture_file(t.step, t.group, t.trial))}
        rows = [
            orjson.loads(line)
            for line in folder.trainer_logprobs_file(step, t.group, t.trial).read_bytes().splitlines()
        ]
        assert sorted(r["turn"] for r in rows) == sorted(sampled)
        for r in rows:
            assert len(r["logprobs"]) == len(sampled[r["turn"]])
            diffs += [s - tr for s, tr in zip(sampled[r["turn"]], r["logprobs"], strict=True)]
    v1 = dict(state.metrics["optim/kl_sample_train_v1"])[step]
    assert sum(diffs) / len(diffs) == pytest.approx(v1, rel=1e-3, abs=1e-12)

    trial, turn, logprobs = _varied_turn(demo_run)
    app = _app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot, trial, turn)
        trainer = screen.trainer_logprobs
        assert trainer is not None and len(trainer) == len(logprobs)
        text = screen.query_one("#kdetail").render().plain
        i = screen.cursor
        assert f"trainer logprob {logprob_text(trainer[i])}" in text
        assert f"trainer − sampler {trainer[i] - logprobs[i]:+.4g}" in text
        await pilot.press("m")
        assert screen.diff_mode and "trainer − sampler" in screen.query_one("#klegend").render().plain
        await pilot.press("m")
        assert not screen.diff_mode


# -- snapshots over a small recorded run -----------------------------------------------------------


def _fixture_events():
    events = list(read_events(TOKEN_FIXTURE / "events.jsonl"))
    return [replace(e, log_path=str(TOKEN_FIXTURE)) if isinstance(e, RunStarted) else e for e in events]


def _fixture_trial() -> str:
    return next((TOKEN_FIXTURE / "capture").rglob("*.jsonl")).stem


@pytest.mark.e2e
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_token_screen_snapshot(snap_compare, theme):
    async def open_tokens(pilot):
        await wait_for(pilot, lambda: pilot.app.state.finished)
        pilot.app.push_screen(TokenScreen(_fixture_trial(), 0))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TokenScreen) and pilot.app.screen.loaded)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)
        await pilot.press("right", "right", "right")
        await pilot.pause(0.2)

    app = ConsoleApp(replay=Replay(_fixture_events()), mode="replay", theme=theme, clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=(110, 34), run_before=open_tokens)
