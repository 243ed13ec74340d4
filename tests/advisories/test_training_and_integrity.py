"""kl, entropy, shrinking-replies (the metrics row of each step); captures and tokens (the proxy's
record against the training data)."""

import dataclasses

from tbconsole.advisories import Advisor, Thresholds, replay
from tbconsole.advisories.facts import CaptureFile
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel

from tests_support.advisories import cleared, raised

KL, ENTROPY = "optim/kl_sample_train_v1", "optim/entropy"
REWARD, TOKENS = "env/all/reward/total", "env/all/ac_tokens_per_turn"


def _steps(stream, rows):
    stream.run_started()
    for step, row in enumerate(rows):
        stream.group(step, 0, [0.0, 1.0, 0.0, 1.0])
        stream.step_end(step, row)
    return replay(stream.items)


def test_the_recorded_run_trains_within_every_metrics_threshold(recorded):
    out = replay(recorded)
    for rule in ("kl", "entropy", "shrinking-replies", "tokens", "captures"):
        assert raised(out, rule) == [], rule


def test_kl_over_its_threshold_fires_and_clears(stream):
    out = _steps(stream, [{KL: 0.002}, {KL: 0.09}, {KL: -0.02}, {KL: 0.005}])
    kl = raised(out, "kl")
    assert [(e.step, e.value) for e in kl] == [(1, 0.09), (2, -0.02)]  # |v1|: a large negative too
    assert kl[0].threshold == "advise.kl_max=0.01" and kl[0].metric == KL
    assert [e.message for e in cleared(out, "kl")] == ["step 3: sampler↔trainer KL 0.005, within 0.01"]
    assert raised(replay(stream.items, Thresholds(kl_max=0.1)), "kl") == []


def test_kl_reads_only_the_fresh_tokens_where_a_step_trained_stale_ones(stream):
    # An off-policy step: its tokens sampled with older weights differ from the trainer by design
    # (the whole-batch KL 0.1, as the async demo's second update shows); the numerics check reads
    # the fresh tokens' KL, and a step with no fresh tokens says nothing.
    fresh, share = "offpolicy/kl_sample_train/fresh", "offpolicy/stale_token_share"
    rows = [{KL: 0.10, fresh: 1e-7, share: 0.5}, {KL: 0.12, share: 1.0}, {KL: 0.3, fresh: 0.05, share: 0.5}]
    kl = raised(_steps(stream, rows), "kl")
    assert [(e.step, e.value, e.metric) for e in kl] == [(2, 0.05, fresh)]


def test_entropy_collapsing_while_the_reward_stands_still_fires(stream):
    rows = [{ENTROPY: 1.0 + 0.01 * (s % 2), REWARD: 0.25} for s in range(5)]
    rows += [{ENTROPY: 0.4 - 0.05 * s, REWARD: 0.25} for s in range(5)]  # every later value under every earlier
    out = _steps(stream, rows)
    (advice,) = raised(out, "entropy")
    assert (
        advice.step == 9 and "entropy fell to 0.3 from 1 (medians of 5 steps, 70% down, 0.004 likely" in advice.message
    )
    assert advice.threshold == "advise.entropy_drop=0.5, advise.entropy_p=0.01 over advise.entropy_steps=5"


def test_entropy_falling_while_the_reward_rises_is_convergence(stream):
    """The issue's demo: entropy 0.03 → 0.006 while reward 0.25 → 1.0: no alarm."""
    rows = [{ENTROPY: 0.03 - 0.001 * s, REWARD: 0.25 + 0.05 * s} for s in range(5)]
    rows += [{ENTROPY: 0.008 - 0.0005 * s, REWARD: 0.75 + 0.05 * s} for s in range(5)]
    out = _steps(stream, rows)
    assert raised(out, "entropy") == []
    # solved and sharpening further: the reward flat at the top is no collapse either
    solved = [{ENTROPY: 0.01 * 0.8**s, REWARD: 1.0} for s in range(10)]
    assert raised(_steps(type(stream)(), solved), "entropy") == []


def test_entropy_noise_is_no_trend(stream):
    """Step-to-step swings of a small entropy (0.03 one step, 0.01 the next, as the demo's tiny
    policy shows) are its noise: the rank test sees no trend."""
    values = [0.025, 0.032, 0.013, 0.012, 0.025, 0.030, 0.040, 0.011, 0.018, 0.034, 0.010, 0.031]
    out = _steps(stream, [{ENTROPY: v, REWARD: 0.25} for v in values])
    assert raised(out, "entropy") == []


def test_kl_policy_base_climbing_without_reward_is_a_warning_one_spike_is_not(stream):
    base = "kl_policy_base"
    rows = [{base: 0.01, REWARD: 0.5}] * 3 + [{base: 1.5, REWARD: 0.25}, {base: 3.0, REWARD: 0.0}]
    (advice,) = raised(_steps(stream, rows), "kl")
    assert advice.key == "kl:policy-base" and advice.step == 4 and advice.metric == base
    assert "the policy's KL from its base rose to 3 per token over 2 steps (from 1.5)" in advice.message
    spike = [{base: 0.01, REWARD: 0.5}] * 3 + [{base: 2.0, REWARD: 0.5}, {base: 0.02, REWARD: 0.5}]
    assert raised(_steps(type(stream)(), spike), "kl") == []
    learning = [{base: 0.01, REWARD: 0.25}] * 3 + [{base: 1.5, REWARD: 0.5}, {base: 2.0, REWARD: 0.75}]
    assert raised(_steps(type(stream)(), learning), "kl") == []


def test_reward_up_while_replies_collapse_is_flagged_reward_up_with_steady_replies_is_not(stream):
    rows = [{REWARD: 0.2, TOKENS: 400}] * 3 + [{REWARD: 0.3, TOKENS: 150}, {REWARD: 0.5, TOKENS: 120}] * 2
    advice, *later = raised(_steps(stream, rows), "shrinking-replies")
    assert advice.step == 5 and [e.step for e in later] == [6]  # raised again as it changes
    assert "median reward rose 0.2→0.3 (steps 0–2 → the last 3)" in advice.message
    assert "tokens per reply fell 400→150 (62%)" in advice.message
    healthy = [{REWARD: 0.2, TOKENS: 400}] * 3 + [{REWARD: 0.5, TOKENS: 380}, {REWARD: 0.9, TOKENS: 350}] * 2
    assert raised(_steps(type(stream)(), healthy), "shrinking-replies") == []


def test_one_garbled_step_and_its_recovery_are_no_sign_of_hacking(stream):
    """The new user's 20-step demo: one update garbles a step (every reply runs to max_tokens,
    reward 0), the next ones recover. Judged from the garbled step, reward rose 0→0.375 while
    tokens per reply fell 127→61; against the medians of the steps before, nothing moved."""
    rows = [{REWARD: r, TOKENS: 60} for r in (0.25, 0.125, 0.375, 0.25, 0.25)]
    rows += [{REWARD: 0.0, TOKENS: 127}, {REWARD: 0.0, TOKENS: 90}]
    rows += [{REWARD: r, TOKENS: 61} for r in (0.25, 0.375, 0.5, 0.5, 0.625)]
    assert raised(_steps(stream, rows), "shrinking-replies") == []


def test_tokens_the_training_data_does_not_hold_are_an_error(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0])  # 4 trials × 2 turns × 100 reply tokens
    stream.step_end(0, {"env/all/total_ac_tokens": 795.0})
    (advice,) = raised(replay(stream.items), "tokens")
    assert advice.severity == LogLevel.ERROR and advice.step == 0
    assert "the proxy captured 8 turns, 8000 prompt and 800 reply tokens" in advice.message
    assert "the training data holds 8, 8000 and 795" in advice.message and advice.metric == "env/all/total_ac_tokens"
    assert raised(replay(stream.items, Thresholds(token_mismatch=5)), "tokens") == []


def test_tokens_count_only_the_groups_that_are_trained(stream):
    stream.run_started(remove_constant_reward_groups=True)
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0])
    stream.group(0, 1, [0.0, 0.0, 0.0, 0.0])  # dropped from training: all rewards equal
    stream.group(0, 2, [0.0, 0.0, 1.0, None], ok=False)  # a failed attempt: not trained
    stream.step_end(
        0, {"env/all/total_turns": 8.0, "env/all/total_ob_tokens": 8000.0, "env/all/total_ac_tokens": 800.0}
    )
    assert raised(replay(stream.items), "tokens") == []
    kept = dataclasses.replace(stream.items[0], config={"config": {"remove_constant_reward_groups": False}})
    assert raised(replay([kept, *stream.items[1:]]), "tokens")  # now group 1's 800 tokens are missing


def test_a_trial_whose_end_disagrees_with_the_proxy_is_an_error(stream):
    stream.run_started()
    trials = stream.group(0, 0, [0.0, 1.0, 0.0, 1.0])
    ended = next(e for e in stream.items if isinstance(e, ev.TrialEnded) and e.trial == trials[1])
    stream.items[stream.items.index(ended)] = dataclasses.replace(ended, turns=3)
    stream.step_end(0)
    (advice,) = raised(replay(stream.items), "captures")
    assert advice.trial == trials[1] and advice.severity == LogLevel.ERROR
    assert "the proxy reported 2 turns / 200 reply tokens, the trial ended with 3 / 200" in advice.message


def test_capture_files_without_logprobs_or_turns_are_errors_whole_ones_clear(stream):
    stream.run_started()
    trials = stream.group(0, 0, [0.0, 1.0, 0.0, 1.0])
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    whole = {"step": 0, "group": 0, "records": 2, "output_tokens": 200}
    for trial in trials[:3]:
        advisor.feed(CaptureFile(trial=trial, with_logprobs=2, **whole))
    advisor.feed(CaptureFile(trial=trials[3], with_logprobs=1, **whole))
    stream.step_end(0)
    out = [e for item in stream.items[-2:] for e in advisor.feed(item)]
    (advice,) = raised(out, "captures")
    assert advice.trial == trials[3] and "1 of its 2 turns lack log-probs" in advice.message
    # the next step's captures are whole: cleared
    stream.group(1, 0, [0.0, 1.0, 0.0, 1.0])
    stream.step_end(1)
    out = [e for item in stream.items if getattr(item, "step", None) == 1 for e in advisor.feed(item)]
    assert [e.message for e in cleared(out, "captures")] == [
        "step 1: every scored trial's turns are captured with log-probs"
    ]


def test_when_every_group_is_flat_the_cookbook_trains_the_first(stream):
    stream.run_started(remove_constant_reward_groups=True)
    stream.group(0, 0, [0.0, 0.0, 0.0, 0.0])
    stream.group(0, 1, [1.0, 1.0, 1.0, 1.0])
    stream.step_end(
        0, {"env/all/total_turns": 8.0, "env/all/total_ob_tokens": 8000.0, "env/all/total_ac_tokens": 800.0}
    )
    assert raised(replay(stream.items), "tokens") == []


def _with_data(items, datums: int, trained: int, context: int, why: dict[str, int]):
    """The stream's scored trials, each with the training cost trial.ended carries."""
    return [
        dataclasses.replace(e, datums=datums, trained_tokens=trained, context_tokens=context, new_datum=why)
        if isinstance(e, ev.TrialEnded) and e.scored
        else e
        for e in items
    ]


def test_amplification_fires_with_its_cause_and_is_silent_when_trials_train_as_one_datum(stream):
    stream.run_started()
    for step in range(3):
        stream.group(step, 0, [0.0, 1.0, 0.0, 1.0], turns=12)
        stream.step_end(step)
    healthy = replay(_with_data(stream.items, 1, 5_999, 6_000, {}))
    assert raised(healthy, "amplification") == []
    # Continuity off: every one of 12 turns a datum of its own, 6.5x the final context.
    wasteful = replay(_with_data(stream.items, 12, 39_000, 6_000, {"continuity_off": 11}))
    fired = raised(wasteful, "amplification")
    assert [e.step for e in fired] == [0, 1, 2] and fired[0].severity == LogLevel.WARNING
    assert fired[0].threshold == "advise.amplification_max=1.5" and fired[0].value == 6.5
    assert "12.0 datums per trial" in fired[0].message and "harbor.token_continuity=true" in fired[0].message
    # An agent that compacts its history once: two datums, 1.4x, under the threshold.
    assert raised(replay(_with_data(stream.items, 2, 8_400, 6_000, {"history_rewritten": 1})), "amplification") == []
