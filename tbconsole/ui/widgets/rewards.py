"""Rewards: histogram of the current batch, mean/std trend over steps, per-task breakdown."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.state import RunState
from tbconsole.ui.plotmath import bar, reward_bins, sparkline
from tbconsole.ui.present import UNIFORM_WORDS, advises_on, uniform_groups
from tbconsole.ui.sanitize import one_line
from tbconsole.ui.widgets.base import Palette, Panel, columns


def _f(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


class RewardsPanel(Panel):
    TITLE = "rewards"
    HELP = (
        "The newest step's rewards: count per value, mean ± std, groups whose trials all got one reward "
        "(they train nothing: all solved is a learnt task, all failed one out of reach); the mean and std "
        "over steps; per task: trials, mean, the last step's mean, solved/scored."
    )

    def render_state(self, state: RunState, now: float, p: Palette):
        width = max(20, (self.content_size.width or 50))
        height = max(3, self.content_size.height or 10)
        step, rewards = state.histogram_rewards()
        parts = []
        head = Text(no_wrap=True, overflow="ellipsis")
        if step is None:
            head.append("no rewards yet", style=p.muted)
            parts.append(head)
        else:
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
            parts.append(head)
            counts, labels = reward_bins(rewards)
            top = max(counts) if counts else 0
            label_w = max(len(x) for x in labels) if labels else 1
            for count, label in zip(counts, labels, strict=False):
                line = Text(no_wrap=True)
                line.append(f"{label:>{label_w}} ", style=p.muted)
                line.append(bar(count, top, max(4, width - label_w - 6)), style=p.bar)
                line.append(f" {count}")
                parts.append(line)
        trend = state.reward_trend()
        if trend:
            spark_w = max(4, (width - 24) // 2)
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append("mean ", style=p.muted)
            means = [m for _, m, _ in trend]
            line.append(sparkline(means, spark_w, 0.0, 1.0 if max(means) <= 1 else None), style=p.line)
            line.append(f" {_f(trend[-1][1])}  ")
            line.append("std ", style=p.muted)
            line.append(sparkline([s for _, _, s in trend], spark_w, 0.0), style=p.accent)
            line.append(f" {_f(trend[-1][2])}")
            parts.append(line)
        room = height - len(parts) - 1
        if state.task_stats and room >= 2:
            num_w = [4, 5, 5, 6]
            widths = [max(6, width - sum(num_w) - 4), *num_w]
            right = {1, 2, 3, 4}
            parts.append(columns(["task", "n", "mean", "last", "solved"], widths, right, style=f"bold {p.muted}"))
            stats = sorted(state.task_stats.values(), key=lambda s: (-(s.last_step or -1), s.task))
            for s in stats[: room - 1]:
                parts.append(
                    columns(
                        [one_line(s.task, 40), str(s.trials), _f(s.mean), _f(s.last_mean), f"{s.solved}/{s.scored}"],
                        widths,
                        right,
                    )
                )
            if len(stats) > room - 1:
                parts.append(Text(f"+{len(stats) - room + 1} tasks", style=p.muted))
        return Group(*parts)
