"""The rules over a real demo run folder (the session's `demo_run`): its captures and the training
data agree, nothing stalls; and the run's own watcher wrote what the rules say."""

import pytest

from tbconsole.advisories import Advisor, replay
from tbconsole.record import events as ev
from tbconsole.record.events import read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.advise import read_capture_file
from tbconsole.state.ledger import family_by_name

from tests_support.advisories import raised

pytestmark = pytest.mark.e2e


@pytest.mark.root
def test_a_real_runs_captures_and_training_data_agree(demo_run):
    folder = RunFolder(demo_run)
    events = list(read_events(folder.events))
    advisor = Advisor()
    out = []
    facts = 0
    for event in events:
        out += advisor.feed(event)
        if isinstance(event, ev.TrialEnded) and event.scored:
            fact = read_capture_file(folder, event)
            assert fact is not None and fact.error is None and fact.records == event.turns > 0
            assert fact.with_logprobs == fact.records and fact.output_tokens == event.output_tokens
            facts += 1
            out += advisor.feed(fact, now=event.ts)
    assert facts >= 8
    # Every scored trial reports its training cost, and a healthy run trains each as one datum.
    data = [e for e in events if isinstance(e, ev.TrialEnded) and e.scored]
    assert data and all(e.datums == 1 and e.trained_tokens < e.context_tokens for e in data)
    for rule in ("captures", "tokens", "stalled", "past-timeout", "kl", "gateway-probes", "amplification"):
        assert raised(out, rule) == [], rule
    # The reward-hacking watch's readings, on real trials: each scored trial's reply fingerprint
    # (its commands), no command near the verifier's files, one instruction per family.
    assert all(e.reply_digest and e.reply_chars is not None and e.verifier_touches == [] for e in data)
    started = [e for e in events if isinstance(e, ev.GroupStarted)]
    assert all(e.instruction for e in started)
    assert len({e.instruction for e in started}) == len({family_by_name(e.task) for e in started})


@pytest.mark.root
def test_the_runs_own_advisories_are_in_its_events(demo_run):
    events = list(read_events(RunFolder(demo_run).events))
    written = [e for e in events if isinstance(e, ev.AdvisoryRaised | ev.AdvisoryCleared)]
    assert all(e.key for e in written)
    assert not [e for e in raised(written) if e.rule in ("captures", "tokens")]
    # a fresh demo is a healthy run: at most information (e.g. a group with no signal), no alarm
    alarms = [(e.rule, e.severity, e.message) for e in raised(written) if e.severity in ("warning", "error")]
    assert not alarms, alarms
    # each step's no-signal judgement the rules make over the stream, the runner made live too
    replayed = {(e.key, e.step) for e in raised(replay(events)) if e.rule == "no-signal"}
    live = {(e.key, e.step) for e in raised(written) if e.rule == "no-signal"}
    assert live == replayed
