"""Every advisory threshold, with its default and what it means: one dataclass.

The runner takes them as ``advise.<name>=<value>`` (``tbconsole train … advise.kl_max=0.02``,
listed by ``--help``); ``problems`` says what is wrong with a set of values (the runner exits 2
with it). The options table of docs/advisories.md is checked against ``DOCS`` by a test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# The rules, by the name ``advise.off`` and the advisories' ``rule`` field use.
RULES = (
    "no-signal",
    "stalled",
    "past-timeout",
    "limits",
    "kl",
    "off-policy",
    "entropy",
    "shrinking-replies",
    "verifier-touched",
    "one-reply-many-tasks",
    "captures",
    "tokens",
    "amplification",
    "gateway-latency",
    "gateway-probes",
    "sdk-retries",
    "disk",
)
# ``advise.off`` also takes a name for a set of rules: the three reward-hacking watches (the rule
# was called reward-hacking before it had siblings; a run's recorded options keep working).
RULE_SETS = {"reward-hacking": ("shrinking-replies", "verifier-touched", "one-reply-many-tasks")}


def _t(default, doc: str):
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Thresholds:
    # no-signal: groups whose trials all got the same reward teach nothing (zero advantage). By
    # chance a group of n all fails with probability (1-p)^n at solve rate p: the rule tests the
    # run's own counts against that (signal.py states the null hypotheses).
    no_signal_share: float = _t(0.5, "share of the last no_signal_steps steps' groups all failed that may warn")
    no_signal_steps: int = _t(5, "steps the no-signal tests look at; that many without any signal is an error")
    no_signal_p: float = _t(0.01, "no-signal fires only for what chance at the run's solve rate gives less often")
    solved_reward: float = _t(1.0, "a reward at or above this counts as solved (all-solved vs all-failed)")
    # stalled / past-timeout: time-based, checked every few seconds.
    stall_factor: float = _t(3.0, "a phase lasting this many times the run's median for that phase is a stall")
    stall_floor_s: float = _t(300.0, "…and at least this many seconds (short phases never stall)")
    stall_min_peers: int = _t(3, "finished phases of that kind the run needs before it compares")
    timeout_grace_s: float = _t(60.0, "seconds past a trial's agent timeout before it counts as not ended")
    # limits: per step, over the step's trials (outcomes) and captured replies.
    output_limit_rate: float = _t(0.25, "share of a step's trials ended OutputTokenLimitExceeded")
    cut_reply_rate: float = _t(0.5, "share of a step's replies stopped at their max_tokens")
    context_overflow_rate: float = _t(0.25, "share of a step's trials ended SequenceLengthLimitExceeded")
    agent_timeout_rate: float = _t(0.25, "share of a step's trials ended TimeLimitExceeded")
    limit_steps: int = _t(2, "steps in a row a limit's share must hold before it warns (fewer: info)")
    # training metrics (the cookbook's metrics row of each step).
    # kl: absolute floors, far above healthy runs (sample-train ~1e-7, policy-base under 0.3).
    kl_max: float = _t(0.01, "sampler↔trainer KL, abs(optim/kl_sample_train_v1), above this")
    kl_base_max: float = _t(1.0, "policy↔base KL (kl_policy_base) above this, climbing, reward not rising …")
    kl_base_steps: int = _t(2, "… in each of this many steps in a row")
    # off-policy: tokens sampled with older weights (config.async_config) that PPO's clip stops.
    off_policy_clip_max: float = _t(0.2, "share of an update's stale tokens outside PPO's clip above this …")
    off_policy_updates: int = _t(2, "… in each of this many updates in a row that trained stale tokens")
    # entropy: a trend beyond the run's own noise (a rank test), with the reward not rising.
    entropy_drop: float = _t(0.5, "median entropy of the last entropy_steps steps this share under the steps before")
    entropy_steps: int = _t(5, "steps in each of the two windows the entropy rule compares")
    entropy_p: float = _t(0.01, "entropy's fall must be less likely than this by chance (rank test)")
    # reward hacking: shrinking-replies (the metrics row), one-reply-many-tasks (each trial's
    # replies' fingerprint); verifier-touched has no threshold (any write is one).
    hack_reward_rise: float = _t(0.1, "median reward of the last hack_steps steps this much over the baseline's …")
    hack_tokens_drop: float = _t(0.5, "… while their median tokens per reply fell by at least this share")
    hack_steps: int = _t(3, "steps in the recent window; the baseline is the 2× as many steps before it")
    one_reply_tasks: int = _t(3, "different tasks (by instruction) one short reply earned the reward on …")
    one_reply_steps: int = _t(5, "… within this many steps")
    one_reply_chars: int = _t(
        300, "a trial's replies (their commands, whitespace collapsed) this long at most are short"
    )
    # captures / tokens: the proxy's record against the training data.
    token_mismatch: int = _t(0, "tokens the proxy's count and the training data may differ by per step")
    amplification_max: float = _t(1.5, "a step's trained tokens over this × its trials' final contexts")
    # gateway.
    latency_factor: float = _t(5.0, "probe latency (median of the last 3) over this × its own baseline")
    latency_floor_ms: float = _t(500.0, "…and over this many milliseconds")
    latency_baseline_probes: int = _t(5, "answered probes that make the baseline before latency is judged")
    failed_probes: int = _t(2, "failed gateway probes in a row")
    # sdk-retries: requests that failed and were sent again (the long-poll try_again of a
    # healthy engine is the SDK asking "done yet?", not a failure, and is not counted).
    sdk_retries: int = _t(3, "SDK request retries after a failure within sdk_retry_window_s")
    sdk_retry_window_s: float = _t(300.0, "the window sdk_retries counts in")
    # disk: the run folder's filesystem.
    disk_warn_mib: float = _t(2048.0, "free space (MiB) below which disk warns")
    disk_error_mib: float = _t(512.0, "free space (MiB) below which disk is an error")
    disk_steps_left: float = _t(5.0, "error when the run's growth per step fills the disk within this many steps")
    # switches.
    off: str = _t("", "rules turned off, comma-separated (e.g. sdk-retries,disk); reward-hacking: its three watches")

    def is_off(self, rule: str) -> bool:
        return rule in self.disabled()

    def disabled(self) -> set[str]:
        names = {name.strip() for name in self.off.split(",") if name.strip()}
        return {rule for name in names for rule in RULE_SETS.get(name, (name,))}


DEFAULTS = Thresholds()
DOCS = {f.name: f.metadata["doc"] for f in dataclasses.fields(Thresholds)}

_SHARES = (
    "off_policy_clip_max",
    "no_signal_share",
    "output_limit_rate",
    "cut_reply_rate",
    "context_overflow_rate",
    "agent_timeout_rate",
)
_FRACTIONS = ("entropy_drop", "hack_tokens_drop", "no_signal_p", "entropy_p")  # strictly between 0 and 1
_COUNTS = (
    "no_signal_steps",
    "stall_min_peers",
    "entropy_steps",
    "kl_base_steps",
    "off_policy_updates",
    "limit_steps",
    "hack_steps",
    "one_reply_steps",
    "one_reply_chars",
    "latency_baseline_probes",
    "failed_probes",
    "sdk_retries",
)
_POSITIVE = (
    "stall_floor_s",
    "kl_max",
    "kl_base_max",
    "hack_reward_rise",
    "latency_floor_ms",
    "sdk_retry_window_s",
    "disk_warn_mib",
    "disk_error_mib",
    "disk_steps_left",
)
_AT_LEAST_ONE = ("stall_factor", "latency_factor", "amplification_max")


def problems(t: Thresholds) -> list[str]:
    """What is wrong with these values, one line each, in ``advise.<name>`` terms ([] if fine)."""
    out = []
    for name in _SHARES:
        if not 0 < getattr(t, name) <= 1:
            out.append(f"advise.{name} is a share of the step's trials or groups: more than 0, at most 1")
    for name in _FRACTIONS:
        if not 0 < getattr(t, name) < 1:
            out.append(f"advise.{name} is a fraction: between 0 and 1")
    for name in _COUNTS:
        if getattr(t, name) < 1:
            out.append(f"advise.{name} must be at least 1")
    for name in _POSITIVE:
        if not getattr(t, name) > 0:
            out.append(f"advise.{name} must be more than 0")
    for name in _AT_LEAST_ONE:
        if not getattr(t, name) >= 1:
            out.append(f"advise.{name} is a factor: at least 1")
    if t.one_reply_tasks < 2:
        out.append("advise.one_reply_tasks must be at least 2 (one task solved by one reply is no sign)")
    if t.timeout_grace_s < 0:
        out.append("advise.timeout_grace_s must not be negative")
    if t.token_mismatch < 0:
        out.append("advise.token_mismatch must not be negative")
    if t.disk_error_mib > t.disk_warn_mib:
        out.append("advise.disk_error_mib must not be above advise.disk_warn_mib")
    unknown = sorted(t.disabled() - set(RULES))
    if unknown:
        out.append(
            f"advise.off names unknown rules {', '.join(unknown)} (rules: {', '.join(RULES)}; "
            f"sets: {', '.join(RULE_SETS)})"
        )
    return out
