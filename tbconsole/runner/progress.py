"""The headless run log: one readable line per meaningful event (no terminal UI)."""

from __future__ import annotations

import sys
from typing import TextIO

from tbconsole.advisories import Thresholds
from tbconsole.common.formatting import format_clock, format_duration
from tbconsole.common.inert import inert_event
from tbconsole.record import events as ev

SOLVED_REWARD = Thresholds().solved_reward  # the no-signal advisory's default: reward 1 is solved

METRIC_LABELS = (
    ("env/all/reward/total", "reward"),
    ("optim/kl_sample_train_v1", "kl"),
    ("optim/entropy", "entropy"),
    ("time/total", "step_s"),
)


class ProgressLog:
    def __init__(self, out: TextIO = sys.stdout):
        self.out = out
        self.requests: dict[tuple[int, int], int] = {}
        self._last_health: tuple[bool, bool] | None = None
        self.lost = 0  # lines that could not be written

    def _print(self, text: str) -> None:
        try:
            self.out.write(f"{format_clock()}  {text}\n")
            self.out.flush()
        except OSError:  # stdout redirected to a full disk: the log is lost, the run must go on
            self.lost += 1

    def __call__(self, event: ev.Event) -> None:
        """Prints the event's line, if it has one. Long because it is one match over every kind
        of event the log shows, each case its own line's format."""
        event = inert_event(event)  # a task name or an error message may carry escape codes
        match event:
            case ev.RunStarted():
                self._print(
                    f"run {event.run_id}: {event.model_name} via {event.base_url}, steps "
                    f"{event.start_step}→{event.total_steps}, {event.groups_per_batch} groups × "
                    f"{event.group_size} trials, {len(event.tasks)} tasks, log {event.log_path}"
                )
            case ev.GatewayHealth() if (event.ok, event.starting) != self._last_health:
                self._last_health = (event.ok, event.starting)
                if event.ok:
                    state = f"ok ({event.latency_ms:.0f} ms)"
                else:
                    state = f"{'starting' if event.starting else 'DOWN'}: {event.error}"
                    if event.outage_limit_s:
                        state += f" (riding it out for up to {event.outage_limit_s:g} s: gateway.outage_limit)"
                self._print(f"gateway {state}")
            case ev.GroupStarted():
                self._print(f"step {event.step} group {event.group}: {event.task} × {len(event.trials)}")
            case ev.ProxyRequest():
                key = (event.step, event.group)
                self.requests[key] = self.requests.get(key, 0) + 1
            case ev.TrialEnded():
                reward = "-" if event.reward is None else f"{event.reward:g}"
                extra = f" — {event.exception_type}: {event.exception_message}" if not event.scored else ""
                self._print(
                    f"step {event.step} group {event.group} {event.trial}: {event.outcome} "
                    f"reward {reward}, {event.turns} turns, {event.output_tokens} tokens{extra}"
                )
            case ev.GroupEnded():
                rewards = " ".join("-" if r is None else f"{r:g}" for r in event.rewards)
                same = _no_signal(event.rewards) if event.ok else ""
                calls = self.requests.get((event.step, event.group), 0)
                self._print(
                    f"step {event.step} group {event.group}: rewards [{rewards}]{same}, {calls} model calls"
                    + ("" if event.ok else f" — FAILED: {event.error}")
                )
            case ev.StepMetrics() if event.evaluation_only:
                self._print(
                    f"evaluated after {event.step} updates: "
                    + ", ".join(f"{k} {v:.4g}" for k, v in sorted(event.metrics.items()))
                )
            case ev.StepMetrics():
                parts = [f"{label} {event.metrics[key]:.4g}" for key, label in METRIC_LABELS if key in event.metrics]
                stale = event.metrics.get("offpolicy/stale_token_share")
                if stale:
                    parts.append(f"stale tokens {stale:.0%}")
                self._print(f"step {event.step} trained: " + ", ".join(parts))
            case ev.GroupDropped():
                self._print(
                    f"step {event.step} group {event.group}: dropped, {_DROPPED.get(event.reason, event.reason)} "
                    f"(sampled with update {_weights(event.weights)}, update {event.update} reached) — "
                    f"{event.trials} trials, {format_duration(event.sandbox_seconds)} of sandbox time untrained"
                )
            case ev.OffPolicyLimit():
                self._print(
                    f"off-policy: max_steps_off_policy {event.max_steps_off_policy} from update {event.from_update}"
                    + ("" if event.by == "config" else f" (lowered by {event.by})")
                )
            case ev.CheckpointSaved():
                self._print(f"checkpoint {event.name} at step {event.step}: {event.state_path}")
            case ev.ErrorRaised():
                where = " ".join(
                    part
                    for part in (
                        f"step {event.step}" if event.step is not None else "",
                        f"group {event.group}" if event.group is not None else "",
                        event.trial or "",
                    )
                    if part
                )
                self._print(
                    f"ERROR{' ' + where if where else ''}: {event.exception_type}: {event.message}"
                    + (f" ({event.trial_dir})" if event.trial_dir else "")
                )
            case ev.DecisionMade():
                self._print(f"decision: {event.decision} ({event.by})")
            case ev.ControlChanged():
                self._print(f"control: {event.state}" + (f" — {event.reason}" if event.reason else ""))
            case ev.AdvisoryRaised():
                self._print(f"advisory {event.severity} [{event.rule}]: {event.message} ({event.threshold})")
            case ev.AdvisoryCleared():
                self._print(f"advisory cleared [{event.key}]: {event.message}")
            case ev.LogLine():
                self._print(f"{event.level}: {event.message}")
            case ev.RunEnded():
                message = f": {event.message}" if event.message else ""
                self._print(f"run {event.status} at step {event.step}{message}")


_DROPPED = {
    "stale": "too stale for max_steps_off_policy",
    "abandoned": "abandoned (the run stopped before an update took it)",
    "unfinished": "unfinished (no update left to take it)",
}


def _weights(weights: list[int]) -> str:
    return "?" if not weights else str(weights[0]) if len(weights) == 1 else f"{weights[0]}–{weights[-1]}"


def _no_signal(rewards: list[float | None]) -> str:
    """A group whose trials all got the same reward: success (all solved) or not, never just
    "no signal" — all-solved is what training aims for."""
    if len(set(rewards)) != 1 or rewards[0] is None:
        return ""
    if rewards[0] >= SOLVED_REWARD:
        return " (all solved: no signal left)"
    return " (all failed: no signal)" if rewards[0] <= 0 else " (all equal: no signal)"
