"""What the trials grid draws, as pure functions of the state (unit-tested without a widget): a
trial's cell, a group's label, a whole fixed-width line, the column under a click."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from tbconsole.common.formatting import format_cell_duration, format_count, format_reward, format_value
from tbconsole.record.enums import TrainingMode, TrialOutcome, TrialPhase
from tbconsole.state import GroupState, RunState, TrialState
from tbconsole.state.model import EvaluationState
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import PHASE_LABELS, UNIFORM_FLAGS, solved_reward, uniform_kind
from tbconsole.ui.widgets.base import Palette

CELL_PADDING = 1  # blank columns on each side of every cell, as DataTable drew them
LIMIT_MARKS: dict[str, str] = {  # a scored trial that hit a limit: the letter after its reward
    TrialOutcome.TIME_LIMIT: "T",
    TrialOutcome.SEQUENCE_LIMIT: "L",
    TrialOutcome.OUTPUT_LIMIT: "L",
}
GROUP_FAILED = "✗err"
GROUP_DROPPED = "drop"  # no update trained it (group.dropped)
GROUP_WAITING = "wait"  # off-policy: returned, no update has taken it yet


def staleness_badge(g: GroupState, state: RunState) -> tuple[str, str] | None:
    """The group's place in the pipeline as (badge, palette role): ``+N`` once an update trained
    it (its weights N updates old), ``drop`` when none will, ``wait`` while it waits for one.
    Shown where the run is not synchronous, or the group was trained stale; else None."""
    if g.dropped is not None:
        return GROUP_DROPPED, "error"
    staleness = g.staleness
    if state.pipeline.mode == TrainingMode.SYNC and not staleness:
        return None
    if staleness is not None:
        return f"+{staleness}", "warning" if staleness > 0 else "muted"
    if g.ok and g.update is None and state.pipeline.off_policy and not state.finished:
        return GROUP_WAITING, "muted"
    return None


def cell_text(t: TrialState | None, now: float, width: int, p: Palette) -> Text:
    """What one trial's cell says, in at most ``width`` characters."""
    if t is None:
        return Text("·", style=p.muted)
    if t.cancelled:
        return Text("cancel", style=p.muted)
    wide = width >= 12
    if t.done:
        elapsed = format_cell_duration(t.elapsed(now))
        if t.scored and t.reward is not None:
            good = t.reward >= 1.0
            mark = "✓" if good else ("◐" if t.reward > 0 else "✗")
            style = p.success if good else (p.warning if t.reward > 0 else p.error)
            text = Text(f"{mark}{format_reward(t.reward)}", style=f"bold {style}")
            if t.outcome in LIMIT_MARKS:
                text.append(LIMIT_MARKS[t.outcome], style=p.warning)
            stale = t.staleness
            if stale and width - len(text) >= 3:  # trained on weights that many updates old
                text.append(f" +{stale}", style=p.warning)
            if width - len(text) > len(elapsed):
                text.append(" " + elapsed, style=p.muted)
            return text
        text = Text("! " + one_line(t.exception_type or t.outcome or "error"), style=f"bold {p.error}")
        text.truncate(width, overflow="ellipsis")
        return text
    phase = PHASE_LABELS.get(t.phase, t.phase)
    elapsed = format_cell_duration(t.phase_elapsed(now))
    if t.phase == TrialPhase.AGENT:
        turns = format_count(t.live_turns)
        if wide:
            text = Text(f"agent {turns}t", style=f"bold {p.primary}")
            if width >= 16:
                text.append(f" {format_count(t.live_tokens)}", style=p.primary)
        else:
            text = Text(f"a{turns}", style=f"bold {p.primary}")
    elif t.phase == TrialPhase.QUEUED:
        text = Text("queued" if wide else "q", style=p.muted)
    elif t.phase == TrialPhase.VERIFYING:
        text = Text(phase if wide else "v", style=p.accent)
    else:
        text = Text(phase if wide else phase[0], style=p.fg)
    if t.lost:
        text.append("!", style=f"bold {p.error}")
    if elapsed and len(text) + 1 + len(elapsed) <= width:
        text.append(" " + elapsed, style=p.muted)
    return text


def group_label(g: GroupState, state: RunState, width: int, p: Palette) -> Text:
    """A group's label in ``width`` cells: its number and task, flagged when every trial got one
    reward (it trains nothing): ``✓all`` all solved (success, in its colour), ``✗all`` all failed,
    ``=all`` one partial reward; or ``✗err`` when the group failed. Then its staleness badge
    (``staleness_badge``). The task name is cut, never the flag or the badge."""
    failed = g.ok is False
    reward = None if failed else g.uniform_reward(state.trials)
    kind = uniform_kind(reward, solved_reward(state)) if reward is not None else None
    flag = GROUP_FAILED if failed else (UNIFORM_FLAGS[kind] if kind else "")
    badge = staleness_badge(g, state)
    text = Text(f"{g.group:>2} ", style=p.muted, no_wrap=True, overflow="ellipsis")
    task = Text(one_line(g.task), style="bold")
    room = width - text.cell_len - (len(flag) + 1 if flag else 0) - (len(badge[0]) + 1 if badge else 0)
    task.truncate(max(1, room), overflow="ellipsis")
    text.append_text(task)
    if flag:
        colour = p.error if failed else p.success if kind == "solved" else p.warning
        text.append(" " + flag, style=f"bold {colour}")
    if badge:
        text.append(" " + badge[0], style=f"bold {getattr(p, badge[1])}")
    return text


def heldout_heading(ev: EvaluationState, width: int, p: Palette) -> Text:
    """The held-out section's first line: ``held-out · step 3`` (the weights after 3 updates,
    those that sample step 3), then its mean reward once it ended."""
    text = Text("held-out", style=f"bold {p.accent}", no_wrap=True, overflow="ellipsis")
    text.append(f" · step {ev.after_updates}" if width >= 18 else f" · {ev.after_updates}", style=p.accent)
    if not ev.running and ev.reward is not None and width - text.cell_len >= 8:
        text.append(f" · {format_value(ev.reward)}", style=p.muted)
    return text


def heldout_label(g: GroupState, width: int, p: Palette) -> Text:
    """A held-out group's label: ``h``, its number and task; ``✗err`` when it failed. No
    one-reward flag: a held-out group trains nothing whatever its rewards."""
    failed = g.ok is False
    text = Text(f"h{g.group:<2}", style=p.accent, no_wrap=True, overflow="ellipsis")
    task = Text(one_line(g.task))
    task.truncate(max(1, width - text.cell_len - (len(GROUP_FAILED) + 1 if failed else 0)), overflow="ellipsis")
    text.append_text(task)
    if failed:
        text.append(" " + GROUP_FAILED, style=f"bold {p.error}")
    return text


def grid_widths(widget_width: int, size: int) -> tuple[int, int]:
    """(label width, cell width) for a grid ``widget_width`` wide with ``size`` trials a row."""
    total = max(40, (widget_width or 120) - 4)
    label = 24 if total >= 100 else 14
    cell = max(5, min(16, (total - label - 2) // max(1, size) - 2))  # 2: the cell padding
    return label, cell


def fit(text: Text, width: int) -> Text:
    """``text`` cut (or padded with blanks) to exactly ``width`` cells, on one line."""
    out = text.copy()
    out.truncate(max(0, width), overflow=text.overflow or "crop")
    if out.cell_len < width:  # the blank fill is unstyled, as DataTable left it
        padded = Text(end="")
        padded.append_text(out)
        padded.append(" " * (width - out.cell_len))
        return padded
    return out


def row_text(
    label: Text,
    cells: list[Text | None],
    label_w: int,
    cell_w: int,
    cursor: int | None = None,
    cursor_style: Style | str | None = None,
) -> Text:
    """One grid line: the label column then one column per trial, each padded by
    ``CELL_PADDING`` on both sides. ``cursor`` (1-based trial column) gets ``cursor_style``
    over its whole padded width."""
    pad = " " * CELL_PADDING
    line = Text(no_wrap=True, end="")
    line.append(pad)
    line.append_text(fit(label, label_w))
    line.append(pad)
    for i, cell in enumerate(cells, start=1):
        start = len(line)
        line.append(pad)
        line.append_text(fit(cell if cell is not None else Text(""), cell_w))
        line.append(pad)
        if cursor == i and cursor_style:
            line.stylize(cursor_style, start, len(line))
    return line


def header_text(size: int, label_w: int, cell_w: int, p: Palette) -> Text:
    """The column headings: "group", then the trial numbers 1..size."""
    return row_text(
        Text("group", style=f"bold {p.muted}"),
        [Text(str(i + 1), style=f"bold {p.muted}") for i in range(size)],
        label_w,
        cell_w,
    )


def column_at(x: int, label_w: int, cell_w: int, size: int) -> int | None:
    """The column under content x: 0 for the label, 1..size for a trial, None past the end."""
    label_end = label_w + 2 * CELL_PADDING
    if x < label_end:
        return 0 if x >= 0 else None
    column = (x - label_end) // (cell_w + 2 * CELL_PADDING) + 1
    return column if column <= size else None
