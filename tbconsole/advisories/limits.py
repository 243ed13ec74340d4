"""limits: per step, how many trials ended at a limit (output tokens, context window, agent
timeout) and how many replies were cut at their max_tokens. Each is its own condition (key), set
or cleared when a step ends: a limit hit often means the run trains on cut-off work."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tbconsole.advisories.base import Advice, Rule, share, step_done
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel, TrialOutcome

# key → (the outcome counted, its threshold's name, what to say, what to look at)
OUTCOMES = {
    "output-limit": (
        TrialOutcome.OUTPUT_LIMIT,
        "output_limit_rate",
        "trials ended at the output-token limit",
        "raise max_tokens in trial.json or config.max_tokens",
    ),
    "context-overflow": (
        TrialOutcome.SEQUENCE_LIMIT,
        "context_overflow_rate",
        "trials overflowed the context window",
        "look at how long their transcripts grow; the proxy's context_window in trial.json",
    ),
    "agent-timeout": (
        TrialOutcome.TIME_LIMIT,
        "agent_timeout_rate",
        "trials hit their agent timeout",
        "look at what their agents were doing; the tasks' agent timeouts",
    ),
}


class Limits(Rule):
    """H0: a limit is hit now and then (a long task, an unlucky sample, one bad update). A share
    of a quarter of the trials (half of the replies, for max_tokens) ending at one in
    ``advise.limit_steps`` steps in a row is the budget, not luck: warning. A single step over the
    share is info: a healthy 20-step demo had one update garble every reply of a step (6 of 8 cut at
    max_tokens), undone by the next update; a budget too small for the task cuts every step."""

    name = "limits"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.outcomes: dict[int, Counter[str]] = {}  # step → outcome → trials
        self.replies: dict[int, list[int]] = {}  # step → [replies, replies cut at max_tokens]
        self.done: set[int] = set()
        self.over: dict[str, int] = {}  # key → steps in a row its share was over the limit

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.TrialEnded) and item.scored:
            self.outcomes.setdefault(item.step, Counter())[item.outcome] += 1
        elif isinstance(item, ev.ProxyRequest) and item.captured:
            counts = self.replies.setdefault(item.step, [0, 0])
            counts[0] += 1
            counts[1] += item.stop_reason == "length"
        step = step_done(item)
        if step is not None and step not in self.done:
            self.done.add(step)
            self._judge(step)
            self.outcomes.pop(step, None)
            self.replies.pop(step, None)

    def _judge(self, step: int) -> None:
        outcomes = self.outcomes.get(step, Counter())
        trials = sum(outcomes.values())
        for sub, (outcome, option, what, look) in OUTCOMES.items():
            self._rate(step, sub, outcomes[outcome], trials, option, what, look)
        replies, cut = self.replies.get(step, [0, 0])
        self._rate(
            step,
            "cut-replies",
            cut,
            replies,
            "cut_reply_rate",
            "replies stopped at their max_tokens",
            "the policy learns from cut-off replies; raise max_tokens in trial.json or config.max_tokens",
        )

    def _rate(self, step: int, sub: str, part: int, whole: int, option: str, what: str, look: str) -> None:
        key = f"{self.name}:{sub}"
        if whole == 0:
            return
        limit = getattr(self.t, option)
        rate = part / whole
        if rate < limit:
            self.over.pop(key, None)
            self.release(key, f"step {step}: {share(part, whole)} {what}, under {limit:.0%}")
            return
        streak = self.over[key] = self.over.get(key, 0) + 1
        persists = streak >= self.t.limit_steps
        self.hold(
            Advice(
                key=key,
                severity=LogLevel.WARNING if persists else LogLevel.INFO,
                message=(
                    f"step {step}: {share(part, whole)} {what}"
                    + (f" ({streak} steps in a row) — {look}" if persists else " — one step; a warning if it persists")
                ),
                threshold=f"advise.{option}={limit:g} in advise.limit_steps={self.t.limit_steps} steps in a row",
                value=round(rate, 4),
                step=step,
            )
        )
