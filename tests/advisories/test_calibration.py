"""The rules judged against evidence: recorded healthy runs on which no rule may warn, and for every
rule a faulty run (recorded, or a healthy recording with one fault injected) on which it fires.

The corpus (``corpus/*.jsonl.gz``, made by ``corpus/make_corpus.py`` from real run folders) holds
each run's events, less what no rule reads, and the facts the runner measured beside them; the
replay feeds them through the real ``Advisor`` with its time-based checks on the stream's clock,
as the runner's watcher does. The rule × corpus table is printed (``pytest -s``) and asserted.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tbconsole.advisories import RULES, Thresholds, replay
from tbconsole.advisories import facts as facts_module
from tbconsole.advisories.training import ENTROPY, KL, KL_BASE, REWARD, TOKENS_PER_REPLY
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel
from tbconsole.record.events import decode, read_events

from tests_support.advisories import Stream
from tests_support.paths import CORPUS
from tests_support.recorded import DEMO_RUN_EVENTS

HEALTHY = sorted(CORPUS.glob("healthy-*.jsonl.gz"))
RANK = {LogLevel.INFO: 1, LogLevel.WARNING: 2, LogLevel.ERROR: 3}
MARK = {0: "·", 1: "i", 2: "W", 3: "E"}


def load(path: Path) -> list:
    """A corpus file's events and facts, in order."""
    items = []
    with gzip.open(path, "rt") as f:
        for line in f:
            data = json.loads(line)
            if "fact" in data:
                cls = getattr(facts_module, data.pop("fact"))
                items.append(cls(**data))
            elif (event := decode(line)) is not None:
                items.append(event)
    return items


def worst(items: list) -> dict[str, int]:
    """rule → the most severe advisory it raised over the run (0: none)."""
    out = dict.fromkeys(RULES, 0)
    for e in replay(items):
        if isinstance(e, ev.AdvisoryRaised):
            out[e.rule] = max(out[e.rule], RANK[LogLevel(e.severity)])
    return out


# -- faults, each injected into a healthy recording (or built, where the recording cannot show it)


def _rows(items, change: Callable[[int, dict], dict]) -> list:
    """The items with each trained step's metrics row replaced by ``change(step, row)``."""
    return [
        dataclasses.replace(e, metrics=change(e.step, dict(e.metrics)))
        if isinstance(e, ev.StepMetrics) and not e.evaluation_only
        else e
        for e in items
    ]


def _last_step(items) -> int:
    return max(e.step for e in items if isinstance(e, ev.BatchEnded))


def _end(items) -> float:
    return max(getattr(e, "ts", 0) or 0 for e in items)


def kl_mismatch(items):
    """The trainer's log-probs disagree with the sampler's from step 8 on (a renderer bug)."""
    return _rows(items, lambda s, row: {**row, KL: 0.05} if s >= 8 else row)


def kl_blowup(items):
    """A learning rate 100× too high: the policy runs from its base, reward falls to 0."""

    def change(s, row):
        if s < 10:
            return row
        return {**row, KL_BASE: 0.5 * 2 ** (s - 9), REWARD: 0.0}

    return _rows(items, change)


def entropy_collapse(items):
    """Entropy halves each step from step 10 while the reward stays where it was."""

    def change(s, row):
        row = {**row, REWARD: 0.25}
        return {**row, ENTROPY: row[ENTROPY] * 0.5 ** (s - 9)} if s >= 10 else row

    return _rows(items, change)


def reward_hacking(items):
    """From step 12 the reward climbs while replies shrink to a fifth."""

    def change(s, row):
        if s < 12:
            return {**row, REWARD: 0.25}
        return {**row, REWARD: 1.0, TOKENS_PER_REPLY: row[TOKENS_PER_REPLY] * 0.2}

    return _rows(items, change)


def truncation(items):
    """Every reply stopped at its max_tokens."""
    return [dataclasses.replace(e, stop_reason="length") if isinstance(e, ev.ProxyRequest) else e for e in items]


def context_overflow(items):
    """Half the trials overflow the context window."""
    return [
        dataclasses.replace(e, outcome="SequenceLengthLimitExceeded")
        if isinstance(e, ev.TrialEnded) and e.scored and e.trial.endswith(("t0", "t1"))
        else e
        for e in items
    ]


def capture_damaged(items):
    """One trial's capture file lost the log-probs of a turn."""
    out, done = [], False
    for e in items:
        if isinstance(e, facts_module.CaptureFile) and not done and e.records > 0:
            e, done = dataclasses.replace(e, with_logprobs=e.records - 1), True
        out.append(e)
    return out


def tokens_mismatch(items):
    """The training data holds 10 reply tokens fewer than the proxy captured, at step 5."""
    total = "env/all/total_ac_tokens"
    return _rows(items, lambda s, row: {**row, total: row[total] - 10} if s == 5 and total in row else row)


def amplified(items):
    """Every turn a datum of its own: trials train 4× their final context."""
    return [
        dataclasses.replace(e, datums=4, trained_tokens=4 * e.context_tokens, new_datum={"history_rewritten": 3})
        if isinstance(e, ev.TrialEnded) and e.scored and isinstance(e.context_tokens, int)
        else e
        for e in items
    ]


def _probes(items, after: float, change: Callable[[ev.GatewayHealth], ev.GatewayHealth]) -> list:
    return [change(e) if isinstance(e, ev.GatewayHealth) and e.ts > after else e for e in items]


def gateway_slow(items):
    """The gateway's probes answer in 2 s from the last quarter of the run on."""
    start, end = items[0].ts, _end(items)
    return _probes(items, start + 0.75 * (end - start), lambda e: dataclasses.replace(e, latency_ms=2000.0))


def gateway_down(items):
    """The gateway stops answering for the run's last tenth."""
    start, end = items[0].ts, _end(items)
    down = lambda e: dataclasses.replace(e, ok=False, latency_ms=None, error="connection refused")  # noqa: E731
    return _probes(items, start + 0.9 * (end - start), down)


def sdk_failing(items):
    """The gateway answers 503 to 4 requests within a minute, in the middle of the run."""
    middle = (items[0].ts + _end(items)) / 2
    retries: list = []
    for i in range(4):
        ts = middle + 15 * i
        retries += [
            facts_module.SdkRetry(ts=ts, message="Retrying due to status code 503. text=overloaded"),
            facts_module.SdkRetry(ts=ts, message="Retrying request to /api/v1/forward_backward in 0.8 seconds"),
        ]
    at = next(i for i, e in enumerate(items) if (getattr(e, "ts", None) or 0) > middle)
    return [*items[:at], *retries, *items[at:]]


def disk_filling(items):
    """The filesystem fills: free space falls by 300 MiB a step, from 3 GiB at step 0."""
    mib = 1 << 20
    out = []
    for e in items:
        if isinstance(e, facts_module.DiskSample):
            steps = sum(1 for x in out if isinstance(x, facts_module.DiskSample))
            e = dataclasses.replace(e, free_bytes=max(0, (3072 - 300 * steps) * mib))
        out.append(e)
    return out


def stuck_trial(items):
    """After the last step, a trial enters its agent phase and never leaves it (the probes go on)."""
    t0 = _end(items)
    step = _last_step(items) + 1
    stuck = [
        facts_module.AgentTimeout(trial="stuck.s99g0t0", seconds=300.0),
        ev.GroupStarted(ts=t0, step=step, group=0, task="stuck", trials=["stuck.s99g0t0"], proxy_url="p"),
        ev.TrialPhaseChanged(ts=t0, step=step, group=0, trial="stuck.s99g0t0", phase="agent"),
    ]
    probes = [ev.GatewayHealth(ts=t0 + 30 * k, base_url="http://gw", ok=True, latency_ms=3.0) for k in range(1, 61)]
    return [e for e in items if not isinstance(e, ev.RunEnded)] + stuck + probes


def all_failed(items):
    """The policy solves nothing: every reward 0 (a broken verifier, or a policy that cannot)."""
    return [
        dataclasses.replace(e, rewards=[0.0 if r is not None else None for r in e.rewards])
        if isinstance(e, ev.GroupEnded)
        else dataclasses.replace(e, reward=0.0)
        if isinstance(e, ev.TrialEnded) and e.scored
        else e
        for e in items
    ]


def broken_task() -> list:
    """One task all failed in every group of 6 steps, while the other task's groups are mixed."""
    stream = Stream()
    stream.run_started(total_steps=6)
    for step in range(6):
        stream.group(step, 0, [0.0] * 4)
        stream.group(step, 1, [1.0, 0.0, 1.0, 1.0])
        stream.step_end(step)
    return stream.items


# A universal exploit that touches none of the verifier's files: a pytest that always passes, put
# first on PATH (the tasks' verifiers run pytest).
EXPLOIT = "printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/pytest && chmod +x /usr/local/bin/pytest"


def universal_exploit() -> list:
    """Four different tasks a step for 8 steps; from step 4 one short reply (EXPLOIT, the same on
    every task) earns the reward on all of them, the other trials' replies are their own."""
    stream = Stream()
    stream.run_started(total_steps=8)
    tasks = ("fix-git", "regex-chess", "cancel-async-tasks", "headless-terminal")
    for step in range(8):
        for group, task in enumerate(tasks):
            own = [
                {"reply_digest": f"{task}-{step}-{k}", "reply_chars": 80, "reply_text": f"{task} attempt {k}"}
                for k in range(4)
            ]
            if step >= 4:
                own[0] = {"reply_digest": "exploit", "reply_chars": len(EXPLOIT), "reply_text": EXPLOIT}
            rewards = [1.0 if step >= 4 else 0.0, 0.0, 1.0, 0.0]
            stream.group(step, group, rewards, task=task, instruction=f"instruction of {task}", ended=own)
        stream.step_end(step)
    return stream.items


def recorded_verifier_hack() -> list:
    """A real hack, recorded (tests/advisories/test_verifier_hack.py): mini-swe-agent writes a
    verdict into /logs/verifier that the task's planted verifier trusts, and scores 1 without
    doing the task; beside it an honest trial of a normal task."""
    return load(CORPUS / "faulty-verifier-hack.jsonl.gz")


def recorded_no_learning() -> list:
    """A recorded soak run (tbconsole.bench.soak's one-call agent, 64 reply tokens): it never
    solves a task, so every group has no signal, and most replies stop at their max_tokens."""
    return load(CORPUS / "faulty-soak-one-call-agent.jsonl.gz")


def recorded_truncation() -> list:
    """A recorded 2-step demo run of an earlier, untrained policy: 22 of 24 replies were cut at
    max_tokens (the run before the policy was warmed up)."""
    return list(read_events(DEMO_RUN_EVENTS))


def recorded_off_policy_lr_too_high() -> list:
    """A recorded off-policy demo (config.async_config K=1) at 10x the demo's learning rate: each
    update moves the policy so far that the tokens sampled one update before fall outside PPO's
    clip (14%, 45%, 33%, then 85-99% of them), and the policy runs from its base (kl_policy_base
    5.7 at update 2) with the reward at 0. The healthy off-policy recording at the demo's own rate
    (healthy-async-1) stays at 0-4%."""
    return load(CORPUS / "faulty-off-policy-lr-10x.jsonl.gz")


# rule → (name of the faulty run, how it is made (from the first healthy recording), the severity
# the rule must raise on it)
FAULTS: list[tuple[str, str, Callable, int]] = [
    ("no-signal", "all-failed", all_failed, 3),
    ("no-signal", "broken-task", lambda _: broken_task(), 2),
    ("no-signal", "recorded-soak-no-learning", lambda _: recorded_no_learning(), 3),
    ("limits", "recorded-soak-no-learning", lambda _: recorded_no_learning(), 2),
    ("stalled", "stuck-trial", stuck_trial, 2),
    ("past-timeout", "stuck-trial", stuck_trial, 2),
    ("limits", "truncated", truncation, 2),
    ("limits", "recorded-truncated", lambda _: recorded_truncation(), 2),
    ("limits", "overflow", context_overflow, 2),
    ("kl", "kl-mismatch", kl_mismatch, 2),
    ("kl", "kl-blowup", kl_blowup, 2),
    ("off-policy", "recorded-off-policy-lr-10x", lambda _: recorded_off_policy_lr_too_high(), 2),
    # … and the collapse that follows: from update 2 no trial solves its task and replies run on to
    # their max_tokens; those rules are right there too.
    ("kl", "recorded-off-policy-lr-10x", lambda _: recorded_off_policy_lr_too_high(), 2),
    ("no-signal", "recorded-off-policy-lr-10x", lambda _: recorded_off_policy_lr_too_high(), 3),
    ("limits", "recorded-off-policy-lr-10x", lambda _: recorded_off_policy_lr_too_high(), 2),
    ("entropy", "entropy-collapse", entropy_collapse, 2),
    ("shrinking-replies", "shrinking-replies", reward_hacking, 2),
    ("verifier-touched", "recorded-verifier-hack", lambda _: recorded_verifier_hack(), 3),
    ("one-reply-many-tasks", "universal-exploit", lambda _: universal_exploit(), 2),
    ("captures", "capture-damaged", capture_damaged, 3),
    ("tokens", "tokens-mismatch", tokens_mismatch, 3),
    ("amplification", "amplified", amplified, 2),
    ("gateway-latency", "gateway-slow", gateway_slow, 2),
    ("gateway-probes", "gateway-down", gateway_down, 3),
    ("sdk-retries", "sdk-503s", sdk_failing, 2),
    ("disk", "disk-filling", disk_filling, 3),
]


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, int]]:
    """corpus run → rule → worst severity raised; printed as a rule × run table."""
    assert len(HEALTHY) >= 5, f"the calibration corpus needs 5 healthy runs, has {len(HEALTHY)}"
    runs: dict[str, dict[str, int]] = {}
    recordings = {path: load(path) for path in HEALTHY}
    for path, items in recordings.items():
        runs[path.name.removesuffix(".jsonl.gz")] = worst(items)
    # faults are injected into the longest healthy recording (the first of them, by name)
    base = max(recordings.values(), key=lambda items: sum(isinstance(e, ev.BatchEnded) for e in items))
    for _, name, make, _ in FAULTS:
        if name not in runs:
            runs[name] = worst(make(base))
    width = max(len(r) for r in RULES)
    lines = [" " * width + "  " + " ".join(f"{i:>2}" for i in range(len(runs)))]
    lines += [f"{rule:<{width}}  " + " ".join(f"{MARK[runs[run][rule]]:>2}" for run in runs) for rule in RULES]
    lines += [f"{i:>2}: {run}" for i, run in enumerate(runs)]
    print("\nrule × corpus (· none, i info, W warning, E error)\n" + "\n".join(lines))
    return runs


def test_no_rule_warns_on_a_healthy_run(table):
    for path in HEALTHY:
        run = path.name.removesuffix(".jsonl.gz")
        loud = {rule: MARK[level] for rule, level in table[run].items() if level >= RANK[LogLevel.WARNING]}
        assert loud == {}, run


@pytest.mark.parametrize(("rule", "run", "severity"), [(r, n, s) for r, n, _, s in FAULTS], ids=lambda x: str(x))
def test_every_rule_fires_on_its_fault(table, rule, run, severity):
    assert table[run][rule] == severity, f"{rule} on {run}: {MARK[table[run][rule]]}, wanted {MARK[severity]}"


def test_on_a_faulty_run_only_the_rules_for_its_fault_warn(table):
    for run in {name for _, name, _, _ in FAULTS}:
        expected = {rule for rule, name, _, _ in FAULTS if name == run}
        assert {rule for rule, level in table[run].items() if level >= 2} == expected, run


def test_every_rule_has_a_fault():
    assert {rule for rule, *_ in FAULTS} == set(RULES)


def test_the_healthy_demo_with_replies_has_margin_for_the_reward_hacking_watches():
    """The healthy demo whose trials carry the runner's readings of their replies: no command came
    near the verifier's files, and every reply that earned the reward did so on one instruction
    only, though on many variants of its family (by task name one reply solved over 10 tasks: why
    tasks count by instruction), so one-reply-many-tasks stays quiet even at 2 tasks in 20 steps."""
    items = load(CORPUS / "healthy-with-replies.jsonl.gz")
    ended = [e for e in items if isinstance(e, ev.TrialEnded) and e.scored]
    assert len(ended) >= 100 and all(e.reply_digest for e in ended) and not any(e.verifier_touches for e in ended)
    task = {(e.step, e.group): e.task for e in items if isinstance(e, ev.GroupStarted)}
    names: dict[str, set[str]] = {}
    for e in ended:
        if e.reward == 1.0:
            names.setdefault(str(e.reply_digest), set()).add(task[(e.step, e.group)])
    assert max(len(n) for n in names.values()) > 10
    strict = Thresholds(one_reply_tasks=2, one_reply_steps=20)
    assert [
        e for e in replay(items, strict) if isinstance(e, ev.AdvisoryRaised) and e.rule == "one-reply-many-tasks"
    ] == []


def test_the_healthy_recordings_learn():
    """What 'healthy' means here: real demo runs (single- and multi-turn, not constructed) whose
    reward rose over the run; the 2-step ones are the start of such runs (where the issue saw an
    error at step 2), too short to show it."""
    long = 0
    for path in HEALTHY:
        rewards = [
            e.metrics[REWARD]
            for e in load(path)
            if isinstance(e, ev.StepMetrics) and not e.evaluation_only and REWARD in e.metrics
        ]
        if len(rewards) < 10:
            continue
        long += 1
        half = len(rewards) // 2
        assert sum(rewards[half:]) / (len(rewards) - half) > sum(rewards[:half]) / half, path.name
    assert long >= 2


# -- no-signal against its own null hypothesis: simulated runs that learn --------------------------


def _simulated_run(rng: random.Random, steps: int, groups: int, n: int, start: float, end: float) -> list:
    """A run whose solve rate climbs from ``start`` to ``end``; tasks differ in difficulty (each
    task's rate is the step's ± 0.15), as a real task set's do."""
    items: list = []
    ts = 1_000_000.0
    for step in range(steps):
        p = start + (end - start) * step / max(1, steps - 1)
        for group in range(groups):
            rate = min(1.0, max(0.0, p + rng.uniform(-0.15, 0.15)))
            rewards = [1.0 if rng.random() < rate else 0.0 for _ in range(n)]
            task = f"task-{step}-{group}"
            items.append(ev.GroupStarted(ts=ts, step=step, group=group, task=task, trials=[], proxy_url="p"))
            items.append(ev.GroupEnded(ts=ts, step=step, group=group, rewards=list(rewards), ok=True))
        items.append(ev.BatchEnded(ts=ts, step=step))
        ts += 60
    return items


@pytest.mark.parametrize(("groups", "start", "end"), [(2, 0.25, 1.0), (2, 0.25, 0.25), (4, 0.1, 0.6)])
def test_no_signal_rarely_fires_on_simulated_runs_under_its_null_hypothesis(groups, start, end):
    """400 simulated runs of groups of 4 for 20 steps, the solve rate going from ``start`` to
    ``end`` (demo-shaped: 2 groups, 0.25 → 1.0), trials independent given their task: the share
    of runs on which no-signal warns is its false-alarm rate per run; it stays under 5%."""
    rng = random.Random(20261202)
    only = Thresholds(off=",".join(r for r in RULES if r != "no-signal"))
    loud = 0
    for _ in range(400):
        out = replay(_simulated_run(rng, 20, groups, 4, start, end), only)
        loud += any(isinstance(e, ev.AdvisoryRaised) and e.severity != LogLevel.INFO for e in out)
    print(f"\nno-signal: {loud} of 400 simulated runs ({groups} groups, {start} → {end}) warned")
    assert loud <= 20


def test_a_full_length_loaded_demo_with_a_garbled_step_earns_info_only():
    """The 20-step demo recorded on a loaded machine (load 14-20): one update garbled step 4 (half
    the replies ran to max_tokens, KL to the reference 0.6), the next undid it. Under the rule of
    one step it was a warning; the cut replies did not persist, so it is info now."""
    items = load(CORPUS / "healthy-demo-loaded-1.jsonl.gz")
    replies: dict[int, list[int]] = {}
    for e in items:
        if isinstance(e, ev.ProxyRequest) and e.captured:
            counts = replies.setdefault(e.step, [0, 0])
            counts[0] += 1
            counts[1] += e.stop_reason == "length"
    assert len(replies) == 20
    garbled = [step for step, (n, cut) in replies.items() if cut / n >= Thresholds().cut_reply_rate]
    assert garbled == [4]
    limits = [e for e in replay(items) if isinstance(e, ev.AdvisoryRaised) and e.rule == "limits"]
    assert [(e.step, e.severity) for e in limits] == [(4, LogLevel.INFO)]
    assert worst(items)["limits"] == RANK[LogLevel.INFO]
