"""Numbers that fit: every counter is compact (12.3k, 1.2M, 3.4G) in a bounded width, and a
day-shaped run's panels and per-task table show no number cut short by an ellipsis."""

import re

import pytest
from textual.geometry import Region

from tbconsole.common.formatting import (
    BYTE_UNITS,
    COMPACT_WIDTH,
    COUNT_UNITS,
    format_bytes,
    format_count,
    format_duration,
    format_reward,
    format_value,
)
from tbconsole.synthetic.run import synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource
from tbconsole.ui.screens.main import PANELS
from tbconsole.ui.widgets.base import columns
from tbconsole.ui.widgets.header import RunHeader
from tbconsole.ui.widgets.trials import TrialsGrid

from tests_support.ui import wait_for

pytestmark = pytest.mark.timeout(120)

# From 0 to 1e13 in small steps, with the values just below and at each rounding edge.
MAGNITUDES = sorted(
    {round(10 ** (e / 20)) for e in range(0, 261)}
    | {m * 10**k + d for k in range(14) for m in (1, 9.995, 99.95, 999.5) for d in (-1, 0, 1)}
    | {999, 1000, 999_999, 1_000_000, 99_949, 99_950, 99_960}
)


def parse(text: str, base: int, units: tuple[str, ...]) -> float:
    """What a compact figure says, as a number."""
    unit = next((u for u in reversed(units) if u and text.endswith(u)), "")
    return float(text[: len(text) - len(unit)]) * base ** units.index(unit)


@pytest.mark.parametrize(
    ("fmt", "base", "units"),
    [(format_count, 1000, COUNT_UNITS), (format_bytes, 1024, BYTE_UNITS)],
    ids=["count", "bytes"],
)
def test_compact_figures_are_bounded_close_and_in_order(fmt, base, units):
    previous = -1.0
    for n in MAGNITUDES:
        text, negative = fmt(n), fmt(-n)
        assert len(text) <= COMPACT_WIDTH, (n, text)
        assert negative == (f"-{text}" if n else text), (n, negative)
        value = parse(text, base, units)
        assert abs(value - n) <= 0.05 * n, (n, text)  # at least two significant figures
        assert value >= previous, (n, text)  # a larger count never reads smaller
        previous = value
        digits = re.match(r"\d+", text)
        assert digits and len(digits.group()) <= 3, (n, text)  # never 1000k or 1023K


def test_compact_figures_at_the_edges():
    cases = {
        0: "0",
        999: "999",
        1000: "1.0k",
        12_345: "12.3k",
        99_949: "99.9k",
        99_960: "100k",
        123_456: "123k",
        999_999: "1.0M",
        1_234_567: "1.2M",
        3.4e9: "3.4G",
        1e13: "10.0T",
        1.25: "1.25",
        6.5: "6.50",
        -0.001: "0.00",
    }
    assert {n: format_count(n) for n in cases} == cases
    assert (format_bytes(512), format_bytes(1023), format_bytes(1536), format_bytes(3.4 * 2**30)) == (
        "512B",
        "1.0K",
        "1.5K",
        "3.4G",
    )
    assert format_count(None) == format_bytes(None) == "–"


def test_values_rewards_and_durations_are_bounded():
    for e in range(-9, 14):
        for v in (10.0**e, 1.2345 * 10**e, 9.9999 * 10**e):
            assert len(format_value(v)) <= 8 and len(format_value(-v)) <= 9, v  # the metrics column: 9
            assert len(format_reward(v)) <= COMPACT_WIDTH and len(format_reward(-v)) <= COMPACT_WIDTH + 1, v
    assert [format_reward(r) for r in (1.0, 0.0, 0.5, 1 / 3, -0.25, 12.5, 1234.0)] == [
        "1",
        "0",
        "0.5",
        "0.33",
        "-0.25",
        "12.5",
        "1.2k",
    ]
    for s in [0, 59, 60, 3599, 3600, 86_399, 359_999, 360_000, 99 * 86_400]:
        assert len(format_duration(s)) <= 6, s
    shown = [format_duration(s) for s in (42, 185, 75_840, 369_000, -90)]
    assert shown == ["42s", "3m05s", "21h04m", "4d06h", "-1m30s"]


# -- a day-shaped run on screen ---------------------------------------------------------------

# A real run is 100 steps × 4 groups × 8 trials of 20-200 turns (about 384k model calls). Fewer
# steps of long trials reach the same kinds of totals at a third of the events: 100k requests,
# billions of prompt tokens, 100+ trials per task.
DAY = {"steps": 25, "groups": 4, "group_size": 8, "turns": (100, 150), "text": False, "hostile": False}
# A figure cut short: a word that is all digits and separators but for its ellipsis ("128.…",
# "107/4…", "…000025"). A name cut after a digit ("Qwen3-4…") is a name, not a number.
CUT = re.compile(r"[\d.,/]*\d[\d.,/]*…|…[\d.,/]*\d[\d.,/]*")


def cut_numbers(line: str) -> list[str]:
    return [word for word in line.replace("│", " ").split() if CUT.fullmatch(word)]


@pytest.fixture(scope="module")
def day_events():
    return list(synthetic_run(**DAY))


def screen_lines(app) -> dict[str, list[str]]:
    """The text each of the main screen's panels, the header and the trials grid show."""
    widgets = [app.screen.query_one(f"#{name}") for name in PANELS]
    widgets += [app.screen.query_one(RunHeader), app.screen.query_one(TrialsGrid)]
    return {
        w.id or type(w).__name__: [strip.text for strip in w.render_lines(Region(0, 0, *w.outer_size))] for w in widgets
    }


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
async def test_a_day_shaped_run_shows_no_number_cut_short(day_events, size):
    app = ConsoleApp(source=ListSource(day_events), clock=lambda: day_events[-1].ts + 5, drain_budget_s=0.5)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(day_events), timeout=60)
        for _ in range(2):
            app.tick()
            await pilot.pause()
        # A panel that the layout resized draws at its new width on a later tick, which a loaded
        # machine may not have reached yet: draw each panel once more at the size it has now.
        for name in PANELS:
            app.screen.query_one(f"#{name}").show(app.state, day_events[-1].ts + 5)
        await pilot.pause()
        lines = screen_lines(app)
    totals = app.state.totals
    # The shape this test is about: totals past what the old formats fitted.
    assert totals.requests >= 100_000 and totals.prompt_tokens >= 1e9 and totals.output_tokens >= 1e7
    assert max(s.scored for s in app.state.task_stats.values()) >= 100
    cut = [(name, line) for name, shown in lines.items() for line in shown if cut_numbers(line)]
    assert not cut, "\n".join(f"{name}: {line}" for name, line in cut)
    captures = "\n".join(lines["captures"])
    assert format_count(totals.requests) in captures and format_count(totals.prompt_tokens) in captures
    if size[0] >= 120:  # the per-task table: solved/scored in full
        rewards = "\n".join(lines["rewards"])
        s = max(app.state.task_stats.values(), key=lambda s: s.scored)
        assert f"{format_count(s.solved)}/{format_count(s.scored)}" in rewards


def test_the_check_sees_a_number_cut_short():
    assert cut_numbers(columns(["run", "128.4k", "121.0k"], [3, 5, 5], {1, 2}).plain) == ["128.…", "121.…"]
    assert cut_numbers(columns(["hello-file", "107/400"], [10, 6]).plain) == ["107/4…"]
    assert cut_numbers("│ sampler …0025 │") == ["…0025"]
    assert not cut_numbers(columns(["recover-lost-commit", "104/104", "Qwen/Qwen3-4B"], [10, 7, 12]).plain)
