"""The trials grid's cells and rows: fixed widths, the cursor, group flags, cancelled and limit cells."""

from tbconsole.record.events import GroupEnded


def test_trials_grid_rows_are_fixed_width_and_mark_the_cursor():
    from rich.text import Text

    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import column_at, fit, grid_widths, header_text, row_text

    p = Palette(*(["#010101"] * 9))
    assert fit(Text("abcdefgh"), 4).plain == "abcd"
    assert fit(Text("ab", style="bold"), 4).plain == "ab  " and fit(Text("ab"), 4).cell_len == 4
    assert fit(Text("a task name", overflow="ellipsis"), 6).plain == "a tas…"
    label, cells = Text("1 task"), [Text("✓1 3s"), None, Text("agent 2t")]
    line = row_text(label, cells, 8, 6)
    assert line.plain == " " + "1 task  " + " " + " ✓1 3s  " + " " * 8 + " agent  "
    assert line.cell_len == (8 + 2) + 3 * (6 + 2)
    marked = row_text(label, cells, 8, 6, cursor=3, cursor_style="reverse")
    assert marked.plain == line.plain
    assert [(s.start, s.end) for s in marked.spans if str(s.style) == "reverse"] == [(26, 34)]
    head = header_text(3, 8, 6, p)
    assert head.plain.split() == ["group", "1", "2", "3"] and head.cell_len == line.cell_len
    assert [column_at(x, 8, 6, 3) for x in (0, 9, 10, 17, 18, 33, 34)] == [0, 0, 1, 1, 2, 3, None]
    assert grid_widths(120, 4) == (24, 16) and grid_widths(80, 4) == (14, 13) and grid_widths(80, 20)[1] == 5


def test_group_flags_are_shown_whole_in_a_narrow_label(finished_events):
    """The label cuts the task name, never the ``✓all`` / ``✗err`` flag (it was cut to ``=a…``)."""
    from tbconsole.state import reduce_all
    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import fit, group_label

    p = Palette(*(["#010101"] * 9))
    state = reduce_all(finished_events)
    same = next(g for g in state.groups.values() if g.all_same(state.trials))
    for width in (10, 14, 24):
        label = fit(group_label(same, state, width, p), width).plain.rstrip()
        assert label.endswith(" ✓all") and len(label) <= width, label  # hello-file: all solved
    state = reduce_all(
        finished_events[: next(i for i, e in enumerate(finished_events) if isinstance(e, GroupEnded) and not e.ok) + 1]
    )
    failed = next(g for g in state.groups.values() if g.ok is False)
    assert fit(group_label(failed, state, 14, p), 14).plain.rstrip().endswith(" ✗err")


def test_cancelled_and_limit_cells():
    from tbconsole.state import TrialState
    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import cell_text

    p = Palette(*(["#010101"] * 9))
    cancelled = TrialState(
        trial="t", step=0, group=0, index=0, task="a", phase="agent", started=0.0, cancelled=True, ended=5.0
    )
    assert cell_text(cancelled, 100, 12, p).plain == "cancel"
    for outcome, mark in (
        ("TimeLimitExceeded", "T"),
        ("SequenceLengthLimitExceeded", "L"),
        ("OutputTokenLimitExceeded", "L"),
        ("Submitted", ""),
    ):
        t = TrialState(
            trial="t",
            step=0,
            group=0,
            index=0,
            task="a",
            outcome=outcome,
            scored=True,
            reward=1.0,
            started=0.0,
            ended=3.0,
        )
        assert cell_text(t, 100, 12, p).plain == f"✓1{mark} 3s"
    failed = TrialState(
        trial="t", step=0, group=0, index=0, task="a", outcome="AgentError", scored=False, exception_type="CaptureLost"
    )
    assert cell_text(failed, 100, 16, p).plain == "! CaptureLost"
    assert cell_text(failed, 100, 12, p).plain == "! CaptureLo…"  # cut to the cell, not past it
