"""Rewards: histogram of the current batch, mean/std trend over steps, per-task breakdown."""

from __future__ import annotations

from collections import Counter

from rich.console import Group
from rich.text import Text

from tbconsole.common.formatting import format_count
from tbconsole.state import RunState, TaskStats, family_stats
from tbconsole.ui.present.plotmath import bar, reward_bins, sparkline
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import UNIFORM_WORDS, advises_on, uniform_groups
from tbconsole.ui.widgets.base import Palette, Panel, columns


def _f(v: float | None) -> str:
    """A mean reward: two decimals while small, compact past 10 (a verifier may score 0-100)."""
    if v is None:
        return "–"
    return f"{v:.2f}" if abs(v) < 9.995 else format_count(v)


def fit_widths(rows: list[list[str]], minimum: list[int]) -> list[int]:
    """Each column as wide as its widest cell and at least ``minimum``: a count is never cut (a
    day-long run's task has solved 1.2k/3.2k)."""
    return [max(m, *(len(row[i]) for row in rows)) for i, m in enumerate(minimum)]


def solved_text(s: TaskStats) -> str:
    return f"{format_count(s.solved)}/{format_count(s.scored)}"


class RewardsPanel(Panel):
    TITLE = "rewards"
    HELP = (
        "The newest step's rewards: count per value, mean ± std, groups whose trials all got one reward "
        "(they train nothing: all solved is a learnt task, all failed one out of reach); the mean and std "
        "over steps; per task (per family when tasks are variants of one: name-003, name-004, … ×N): trials, "
        "mean, the last step's mean, solved/scored."
    )

    def render_state(self, state: RunState, now: float, p: Palette) -> Group:
        """The newest step's summary and histogram, the trend over steps, then as many tasks (or
        families) as the height leaves room for."""
        width = max(20, (self.content_size.width or 50))
        height = max(3, self.content_size.height or 10)
        parts = step_lines(state, p, width)
        trend = trend_line(state, p, width)
        if trend is not None:
            parts.append(trend)
        parts += task_lines(state, p, width, room=height - len(parts) - 1)
        return Group(*parts)


def step_lines(state: RunState, p: Palette, width: int) -> list[Text]:
    """The newest step with rewards: its count, mean ± std and groups of one reward, then a bar
    per reward value (or a line saying there is none yet)."""
    step, rewards = state.histogram_rewards()
    head = Text(no_wrap=True, overflow="ellipsis")
    if step is None:
        head.append("no rewards yet", style=p.muted)
        return [head]
    summary = state.steps[step]
    head.append(f"step {step}", style="bold")
    head.append(f"  n={len(rewards)}  mean {_f(summary.mean)} ± {_f(summary.std)}")
    # One reward for the whole group: all solved is success, not a warning. Where the run
    # publishes no-signal advisories, they carry the warning and this only states the fact.
    uniform = uniform_groups(state, step)
    advised = advises_on(state, "no-signal")
    if uniform.get("solved"):
        head.append(f"  ✓ {uniform['solved']} {UNIFORM_WORDS['solved']}", style=p.success)
    for kind in ("failed", "same"):
        if uniform.get(kind):
            words = f"{uniform[kind]} {UNIFORM_WORDS[kind]}"
            if advised:
                head.append(f"  {words}", style=p.muted)
            else:
                head.append(f"  ⚠ {words}", style=f"bold {p.warning}")
    parts = [head]
    counts, labels = reward_bins(rewards)
    top = max(counts) if counts else 0
    label_w = max(len(x) for x in labels) if labels else 1
    count_w = max([4, *(len(format_count(c)) for c in counts)])  # the counts after the bars
    for count, label in zip(counts, labels, strict=False):
        line = Text(no_wrap=True)
        line.append(f"{label:>{label_w}} ", style=p.muted)
        line.append(bar(count, top, max(4, width - label_w - count_w - 2)), style=p.bar)
        line.append(f" {format_count(count)}")
        parts.append(line)
    return parts


def trend_line(state: RunState, p: Palette, width: int) -> Text | None:
    """The mean and the std of the reward over steps, as sparklines with the latest values."""
    trend = state.reward_trend()
    if not trend:
        return None
    spark_w = max(4, (width - 24) // 2)
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append("mean ", style=p.muted)
    means = [m for _, m, _ in trend]
    line.append(sparkline(means, spark_w, 0.0, 1.0 if max(means) <= 1 else None), style=p.line)
    line.append(f" {_f(trend[-1][1])}  ")
    line.append("std ", style=p.muted)
    line.append(sparkline([s for _, _, s in trend], spark_w, 0.0), style=p.accent)
    line.append(f" {_f(trend[-1][2])}")
    return line


def task_lines(state: RunState, p: Palette, width: int, room: int) -> list[Text]:
    """Per task, the latest-trained first, in ``room`` lines (none below two): trials, mean, the
    last step's mean, solved/scored; a family's tasks (the runner's rule: task.toml's category,
    else the name) roll up into one row, ``×N``."""
    if not state.task_stats or room < 2:
        return []
    family = state.ledger.family
    members = Counter(family(t) for t in state.task_stats)
    by_family = len(members) < len(state.task_stats)
    every = family_stats(list(state.task_stats.values()), family) if by_family else list(state.task_stats.values())
    stats = sorted(every, key=lambda s: (-(s.last_step or -1), s.task))[: room - 1]
    titles = ["n", "mean", "last", "solved"]
    rows = [[format_count(s.trials), _f(s.mean), _f(s.last_mean), solved_text(s)] for s in stats]
    num_w = fit_widths([titles, *rows], [4, 5, 5, 6])
    widths = [max(6, width - sum(num_w) - 4), *num_w]
    right = {1, 2, 3, 4}
    parts = [columns(["family" if by_family else "task", *titles], widths, right, style=f"bold {p.muted}")]
    for s, cells in zip(stats, rows, strict=True):
        name = one_line(s.task, 40) + (f" ×{members[s.task]}" if by_family and members[s.task] > 1 else "")
        parts.append(columns([name, *cells], widths, right))
    if len(every) > len(stats):
        parts.append(Text(f"+{len(every) - len(stats)} {'families' if by_family else 'tasks'}", style=p.muted))
    return parts
