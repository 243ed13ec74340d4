"""The compare screen (``tbconsole compare``) over two recorded real demo runs: snapshots at 120 and
80 columns, and a live run followed as it grows (its runner's lease held by a real process).
Update the snapshots after an intended change: pytest tests/ui/test_compare_view.py --snapshot-update"""

import gzip
import json
from pathlib import Path

import pytest
from textual.widgets import Static

from tbconsole.runs.compare import RunReading
from tbconsole.ui.compare_app import CompareApp
from tbconsole.ui.present.plotmath import OVERLAP, overlay
from tbconsole.ui.widgets.compare import TrendPlots

from tests_support.paths import CORPUS
from tests_support.ui import rendered, wait_for

pytestmark = pytest.mark.timeout(120)

RUNS = ("healthy-demo-1", "healthy-multi-turn-1")


def recorded_lines(name: str) -> list[str]:
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f:
        return [line for line in f if "kind" in json.loads(line)]  # the corpus' facts are no events


@pytest.fixture
def run_folders(tmp_path, monkeypatch):
    """The two recorded runs as run folders, named relative to the current folder (the screen shows
    the paths as given: the snapshots must not hold a temporary folder's name)."""
    for name in RUNS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "events.jsonl").write_text("".join(recorded_lines(name)))
    monkeypatch.chdir(tmp_path)
    return [Path(name) for name in RUNS]


async def read(pilot):
    await wait_for(pilot, lambda: pilot.app.reads >= 1)
    await pilot.pause(0.2)


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(120, 60), (80, 40)], ids=["120x60", "80x40"])
def test_compare_screen(snap_compare, run_folders, size):
    app = CompareApp([RunReading.open(p) for p in run_folders], theme="dark")
    assert snap_compare(app, terminal_size=size, run_before=read)


@pytest.mark.e2e
async def test_a_live_run_is_followed(tmp_path, hold_lease):
    """One run finished, one going on (its runner's lease held): the screen reads on while one is
    live, showing the steps the growing run gains, and says so in its title."""
    lines = recorded_lines(RUNS[0])
    first_metrics = next(i for i, line in enumerate(lines) if '"step.metrics"' in line and '"step":3,' in line)
    live = tmp_path / "live"
    live.mkdir()
    (live / "events.jsonl").write_text("".join(lines[: first_metrics + 1]))
    hold_lease(live)
    done = tmp_path / "done"
    done.mkdir()
    (done / "events.jsonl").write_text("".join(recorded_lines(RUNS[1])))

    app = CompareApp([RunReading.open(live), RunReading.open(done)], refresh_s=0.05)
    async with app.run_test(size=(120, 60)) as pilot:
        await wait_for(pilot, lambda: app.reads >= 1)
        assert app.comparison.live and [r.condition for r in app.comparison.runs] == ["live", "done"]
        assert [s for s, _ in app.comparison.get("reward").points[0]] == [0, 1, 2, 3]
        assert "live: read again every 0.05s" in str(app.screen.query_one("#compare-title", Static).render())
        with open(live / "events.jsonl", "a") as f:
            f.writelines(lines[first_metrics + 1 :])
        await wait_for(pilot, lambda: len(app.comparison.get("reward").points[0]) == 16)
        await pilot.pause(0.1)
        plots = rendered(app.screen.query_one(TrendPlots), width=120)
        assert "● 0.875 @15" in plots and "▲ 0.75 @19" in plots  # each run's newest training reward


def test_overlay_puts_every_series_on_one_grid():
    """Columns from the shared x range, rows from the shared y range (0 at the bottom); one
    series' points in one column are averaged; two series in one cell are an overlap."""
    grid = overlay([[(0, 0.0), (1, 1.0), (2, 0.0), (4, 1.0)], [(0, 0.0), (4, 0.5)]], width=3, height=3)
    assert (grid.x_lo, grid.x_hi, grid.y_lo, grid.y_hi) == (0, 4, 0.0, 1.0)
    assert grid.cells == [
        [None, None, 0],
        [None, 0, 1],  # x=1 and x=2 share the middle column: their mean, 0.5
        [OVERLAP, None, None],
    ]
    assert overlay([[], []], 10, 4) is None
    flat = overlay([[(3, 2.0)], [(3, 2.0)]], 5, 3)
    assert flat.cells[1][0] == OVERLAP  # a single value sits in the middle row, first column
