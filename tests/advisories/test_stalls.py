"""stalled and past-timeout: time-based rules, driven by the stream's own clock."""

from tbconsole.advisories import Advisor, Thresholds, replay
from tbconsole.advisories.facts import AgentTimeout
from tbconsole.record import events as ev

from tests_support.advisories import cleared, raised


def test_the_recorded_run_has_no_stalls_and_no_overdue_trials(recorded):
    out = replay(recorded, tick_every=1.0)
    assert raised(out, "stalled") == [] and raised(out, "past-timeout") == []


def _peers_then_one_left_in_agent(stream, agent_s=60.0):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0], agent_s=agent_s)  # 4 finished agent phases of 60-63 s
    stream.event(ev.GroupStarted, step=0, group=1, task="t", trials=["slow"], proxy_url="p")
    stream.event(ev.TrialPhaseChanged, step=0, group=1, trial="slow", phase="agent")
    return stream.now


def test_a_trial_far_longer_in_its_phase_than_its_peers_stalls_and_clears_when_it_moves_on(stream):
    start = _peers_then_one_left_in_agent(stream)
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    # the floor (300 s) is above 3 × the 60 s median: nothing until 300 s
    assert raised(advisor.tick(start + 299)) == []
    (advice,) = raised(advisor.tick(start + 301))
    assert advice.key == "stalled:slow" and advice.trial == "slow" and (advice.step, advice.group) == (0, 1)
    # the median, 61.5 s, rounds to the second like every duration shown (formatting.format_duration)
    assert "in agent for 5m01s, over 3× the run's median agent (1m02s)" in advice.message
    assert advice.threshold == "advise.stall_factor=3, advise.stall_floor_s=300"
    assert raised(advisor.tick(start + 900)) == []  # raised once, not on every check
    out = advisor.feed(ev.TrialPhaseChanged(ts=start + 950, step=0, group=1, trial="slow", phase="verifying"))
    (gone,) = cleared(out)
    assert gone.key == "stalled:slow" and gone.message == "slow moved on to verifying"


def test_the_factor_applies_above_the_floor(stream):
    start = _peers_then_one_left_in_agent(stream, agent_s=200.0)  # median 200 s: limit 600 s
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    assert raised(advisor.tick(start + 590)) == []
    assert [e.key for e in raised(advisor.tick(start + 610))] == ["stalled:slow"]


def test_without_enough_peers_or_in_the_queue_nothing_stalls(stream):
    stream.run_started()
    stream.event(ev.TrialPhaseChanged, step=0, group=0, trial="a", phase="agent")
    stream.event(ev.TrialPhaseChanged, step=0, group=0, trial="b", phase="queued")
    advisor = Advisor(Thresholds(stall_floor_s=1))
    for item in stream.items:
        advisor.feed(item)
    assert advisor.tick(stream.now + 10_000) == []  # no finished agent phase to compare with


def test_a_stalled_trial_cancelled_with_its_group_clears(stream):
    start = _peers_then_one_left_in_agent(stream)
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    assert raised(advisor.tick(start + 400))
    out = advisor.feed(ev.GroupEnded(ts=start + 401, step=0, group=1, rewards=[None], ok=False))
    assert [(e.key, e.message) for e in cleared(out)] == [("stalled:slow", "slow was stopped with its group")]


def test_a_trial_past_its_agent_timeout_that_harbor_has_not_ended(stream):
    stream.run_started()
    stream.event(ev.GroupStarted, step=0, group=0, task="t", trials=["x"], proxy_url="p")
    stream.add(AgentTimeout(trial="x", seconds=600))
    stream.event(ev.TrialPhaseChanged, step=0, group=0, trial="x", phase="agent")
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    assert raised(advisor.tick(stream.now + 659), "past-timeout") == []  # within the 60 s grace
    (advice,) = raised(advisor.tick(stream.now + 661), "past-timeout")
    assert advice.trial == "x" and "past its agent timeout (10m00s) and Harbor has not ended it" in advice.message
    assert advice.threshold == "agent timeout 600 s + advise.timeout_grace_s=60"
    out = advisor.feed(
        ev.TrialEnded(
            ts=stream.now + 700,
            step=0,
            group=0,
            trial="x",
            outcome="TimeLimitExceeded",
            scored=True,
            reward=0.0,
            turns=0,
            output_tokens=0,
            trial_dir=None,
            timings={},
        )
    )
    assert [(e.key, e.message) for e in cleared(out)] == [("past-timeout:x", "x ended")]


def test_no_timeout_known_no_past_timeout(stream):
    stream.run_started()
    stream.event(ev.TrialPhaseChanged, step=0, group=0, trial="x", phase="agent")
    advisor = Advisor()
    for item in stream.items:
        advisor.feed(item)
    assert raised(advisor.tick(stream.now + 86_400), "past-timeout") == []
