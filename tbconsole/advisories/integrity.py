"""captures and tokens: what the capture proxy recorded against what the run trains on.

captures: every scored trial's turns are on disk, each with one log-prob per output token, and
as many as the proxy reported (its ``proxy.request`` events and the trial's ``trial.ended``).
tokens: per step, the proxy's captured turns, prompt and reply tokens of the trained groups equal
the training data's (the cookbook's ``env/all/total_*`` metrics). Nothing else compares the two:
a renderer, tokenizer or merge bug shows up here first, as a difference.
"""

from __future__ import annotations

from typing import Any

from tbconsole.advisories.base import Advice, Rule, step_done
from tbconsole.advisories.facts import CaptureFile
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel


class Captured:
    """What the proxy's events say each trial captured: turns, prompt and output tokens."""

    def __init__(self) -> None:
        self.trials: dict[str, list[int]] = {}

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.ProxyRequest) and item.captured:
            counts = self.trials.setdefault(item.trial, [0, 0, 0])
            counts[0] += 1
            counts[1] += item.prompt_tokens
            counts[2] += item.output_tokens

    def of(self, trial: str) -> tuple[int, int, int]:
        turns, prompt, output = self.trials.get(trial, (0, 0, 0))
        return turns, prompt, output


class Captures(Rule):
    """H0: the proxy's record is whole: every scored trial's capture file holds the turns the proxy
    reported, each with one log-prob per output token. No noise is allowed here — any difference
    is a bug, and the run trains on what it cannot vouch for: error."""

    name = "captures"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.captured = Captured()
        self.ended: dict[str, ev.TrialEnded] = {}  # scored trials
        self.problems: dict[int, dict[str, str]] = {}  # step → trial → what is wrong
        self.done: set[int] = set()

    def observe(self, item: Any) -> None:
        self.captured.observe(item)
        if isinstance(item, ev.TrialEnded) and item.scored:
            self.ended[item.trial] = item
            turns, _, output = self.captured.of(item.trial)
            if (turns, output) != (item.turns, item.output_tokens):
                self._problem(
                    item.step,
                    item.trial,
                    f"the proxy reported {turns} turns / {output} reply tokens, the trial ended with "
                    f"{item.turns} / {item.output_tokens}",
                )
        elif isinstance(item, CaptureFile):
            self._check_file(item)
        step = step_done(item)
        if step is not None and step not in self.done:
            self.done.add(step)
            self._judge(step)

    def _check_file(self, f: CaptureFile) -> None:
        ended = self.ended.get(f.trial)
        turns = ended.turns if ended is not None else self.captured.of(f.trial)[0]
        output = ended.output_tokens if ended is not None else self.captured.of(f.trial)[2]
        if f.error is not None:
            self._problem(f.step, f.trial, f"its capture file cannot be read: {f.error}")
        elif f.records != turns or f.output_tokens != output:
            self._problem(
                f.step,
                f.trial,
                f"its capture file holds {f.records} turns / {f.output_tokens} reply tokens, "
                f"the proxy reported {turns} / {output}",
            )
        elif f.with_logprobs != f.records:
            self._problem(f.step, f.trial, f"{f.records - f.with_logprobs} of its {f.records} turns lack log-probs")
        elif f.damaged:
            self._problem(f.step, f.trial, f"{f.damaged} lines of its capture file cannot be read")

    def _problem(self, step: int, trial: str, what: str) -> None:
        self.problems.setdefault(step, {}).setdefault(trial, what)
        if step in self.done:  # a late fact for a step already judged
            self._judge(step)

    def _judge(self, step: int) -> None:
        bad = self.problems.get(step, {})
        scored = sum(1 for e in self.ended.values() if e.step == step)
        if not bad:
            if scored:
                self.release(self.name, f"step {step}: every scored trial's turns are captured with log-probs")
            return
        trial, what = next(iter(bad.items()))
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        self.hold(
            Advice(
                key=self.name,
                severity=LogLevel.ERROR,
                message=f"step {step}: {trial}: {what}{more} — the run trains on these captures; look at the file",
                threshold="every scored trial: captured turns = reported turns, one log-prob per token",
                value=float(len(bad)),
                step=step,
                trial=trial,
            )
        )


class Tokens(Rule):
    """H0: the training data is what the proxy captured: turns, prompt and reply tokens equal to
    within ``advise.token_mismatch``. A difference is a renderer, tokenizer or merge bug: error."""

    name = "tokens"

    METRICS = (
        ("turns", "env/all/total_turns"),
        ("prompt", "env/all/total_ob_tokens"),
        ("reply", "env/all/total_ac_tokens"),
    )

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.captured = Captured()
        self.attempt: dict[tuple[int, int], list[str]] = {}  # (step, group) → trials of its latest attempt
        self.ended_ok: dict[int, dict[int, tuple[list[str], bool]]] = {}  # step → group → (trials, all equal)
        self.drops_flat = False  # config.remove_constant_reward_groups: equal-reward groups are not trained

    def observe(self, item: Any) -> None:
        self.captured.observe(item)
        if isinstance(item, ev.RunStarted):
            self.drops_flat = bool((item.config.get("config") or {}).get("remove_constant_reward_groups"))
        elif isinstance(item, ev.GroupStarted):
            self.attempt[(item.step, item.group)] = list(item.trials)
        elif isinstance(item, ev.GroupEnded) and item.ok:
            trials = self.attempt.get((item.step, item.group), [])
            self.ended_ok.setdefault(item.step, {})[item.group] = (trials, len(set(item.rewards)) == 1)
        elif isinstance(item, ev.StepMetrics) and not item.evaluation_only:
            self._judge(item.step, item.metrics)

    def _trained(self, step: int) -> list[str]:
        """The trials whose turns the step trains on: its groups that ended ok, less those with
        one reward for all when the cookbook drops them (it keeps the first if all are)."""
        groups = sorted(self.ended_ok.pop(step, {}).items())
        if self.drops_flat:
            kept = [g for g in groups if not g[1][1]] or groups[:1]
            groups = kept
        return [trial for _, (trials, _) in groups for trial in trials]

    def _judge(self, step: int, metrics: dict[str, float]) -> None:
        if not all(metric in metrics for _, metric in self.METRICS):
            return
        proxy = [0, 0, 0]
        for trial in self._trained(step):
            proxy = [a + b for a, b in zip(proxy, self.captured.of(trial), strict=True)]
        training = [int(metrics[metric]) for _, metric in self.METRICS]
        tolerance = {"turns": 0, "prompt": self.t.token_mismatch, "reply": self.t.token_mismatch}
        diffs = [
            (name, p, d)
            for (name, _), p, d in zip(self.METRICS, proxy, training, strict=True)
            if abs(p - d) > tolerance[name]
        ]
        if not diffs:
            self.release(self.name, f"step {step}: the proxy's tokens and the training data agree")
            return
        name, p, d = diffs[0]
        self.hold(
            Advice(
                key=self.name,
                severity=LogLevel.ERROR,
                message=(
                    f"step {step}: the proxy captured {proxy[0]} turns, {proxy[1]} prompt and {proxy[2]} reply tokens; "
                    f"the training data holds {training[0]}, {training[1]} and {training[2]} — the {name} counts "
                    "differ: look at the step's capture files and the renderer"
                ),
                threshold=f"advise.token_mismatch={self.t.token_mismatch}",
                value=float(d - p),
                step=step,
                metric=dict(self.METRICS)[name],
            )
        )
