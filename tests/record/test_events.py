"""Events: round-trip through events.jsonl, tolerance of damage and newer kinds, redaction."""

import errno
import json
import math
import os

from tbconsole.record.enums import TrialPhase as Phase
from tbconsole.record.events import (
    RESERVE_FILE,
    TRIAL_PHASES,
    ControlChanged,
    EventBus,
    EventsReader,
    GroupEnded,
    LogLine,
    RunEnded,
    RunStarted,
    StepMetrics,
    TrialPhaseChanged,
    decode,
    read_events,
    redact,
)


def test_round_trip_through_the_file(tmp_path):
    bus = EventBus(tmp_path)
    seen = []
    bus.subscribe(seen.append)
    events = [
        TrialPhaseChanged(step=0, group=1, trial="t", phase="agent", task="hello"),
        GroupEnded(step=0, group=1, rewards=[1.0, None], ok=False, error="boom"),
    ]
    for event in events:
        bus.publish(event)
    bus.close()
    assert seen == events
    assert list(read_events(tmp_path / "events.jsonl")) == events
    first = json.loads((tmp_path / "events.jsonl").read_text().splitlines()[0])
    assert first["v"] == 1 and first["kind"] == "trial.phase"


def test_damaged_and_unknown_lines_are_skipped(tmp_path):
    path = tmp_path / "events.jsonl"
    good = TrialPhaseChanged(step=1, group=0, trial="x", phase="done").to_json()
    path.write_text("\n".join([good, '{"v": 9, "kind": "from.the.future", "ts": 1}', "[]", good[:20]]) + "\n")
    assert len(list(read_events(path))) == 1
    assert decode('{"kind": "trial.phase", "step": "missing fields"}') is None


def test_decoding_takes_what_the_writer_writes_and_what_a_newer_one_adds():
    nan = StepMetrics(ts=1.0, step=2, metrics={"loss": float("nan"), "lr": 1e-6})
    assert "NaN" in nan.to_json()  # not strict JSON: read by the standard parser
    again = decode(nan.to_json())
    assert isinstance(again, StepMetrics) and again.metrics["lr"] == 1e-6 and math.isnan(again.metrics["loss"])
    newer = json.loads(LogLine(ts=1.0, level="info", message="hi").to_json()) | {"shown_by": "a newer writer"}
    assert decode(json.dumps(newer)) == LogLine(ts=1.0, level="info", message="hi")
    assert decode(b'{"kind":"log","ts":1,"level":"info","message":"cut \xff\xfe"}').message == "cut \ufffd\ufffd"
    default = decode(
        '{"kind":"trial.ended","ts":1,"step":0,"group":0,"trial":"t","outcome":"Submitted",'
        '"scored":true,"reward":1.0,"turns":3,"output_tokens":9,"trial_dir":null,"timings":{}}'
    )
    assert default.new_datum == {} and default.datums is None  # defaults of fields an older writer lacked
    assert default.verifier_touches == [] and default.reply_digest is None and default.reply_text is None
    assert decode('{"kind": ["log"], "ts": 1}') is None and decode("7") is None


def test_the_reader_takes_whole_lines_from_its_offset(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [LogLine(ts=float(i), level="info", message="x" * (10 * i)).to_json() for i in range(4)]
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:15])  # the last line still being written
    with EventsReader(path) as reader:
        assert [e.ts for e in reader.read(limit=8)] == [0.0]  # a line longer than the limit comes whole
        assert [e.ts for e in reader.read()] == [1.0, 2.0] and not reader.more
        assert reader.offset == sum(len(line) + 1 for line in lines[:3])
        with open(path, "a") as handle:
            handle.write(lines[3][15:] + "\n")
        assert [e.ts for e in reader.read()] == [3.0] and reader.offset == path.stat().st_size
    with EventsReader(path, offset=len(lines[0]) + 1) as reader:
        assert [e.ts for e in reader.read(end=len(lines[0]) + len(lines[1]) + 2)] == [1.0]
        assert reader.read(end=reader.offset) == [] and not reader.more
    assert EventsReader(tmp_path / "none").read() == []


def test_secrets_are_redacted():
    config = {
        "config": {"base_url": "http://x", "api_key": "tml-abcdefghijkl"},
        "harbor": {"trial_config": "t.json"},
        "env": {"OPENAI_API_KEY": "{proxy_api_key}", "E2B_API_KEY": "e2b_0123456789", "note": "key sk-abcdefgh1234"},
    }
    clean = redact(config)
    text = json.dumps(clean)
    assert "tml-abcdefghijkl" not in text and "e2b_0123456789" not in text and "sk-abcdefgh1234" not in text
    assert clean["env"]["OPENAI_API_KEY"] == "{proxy_api_key}"  # a placeholder is not a secret
    assert clean["config"]["base_url"] == "http://x"
    # Token counts are not tokens: a kept resume command must keep config.max_tokens=8192.
    assert redact({"max_tokens": "8192", "proxy_token": "abc", "HF_TOKEN": "hf"}) == {
        "max_tokens": "8192",
        "proxy_token": "***",
        "HF_TOKEN": "***",
    }
    event = RunStarted(
        run_id="r",
        log_path="/l",
        model_name="m",
        base_url=None,
        renderer_name=None,
        total_steps=1,
        groups_per_batch=1,
        group_size=1,
        tasks=[],
        config=clean,
    )
    assert "tml-" not in event.to_json()


def test_events_after_run_ended_and_close_are_delivered_and_written(tmp_path):
    bus = EventBus(tmp_path)
    seen = []
    bus.subscribe(seen.append)
    events = [RunEnded(status="done", step=3), ControlChanged(state="done")]
    bus.publish(events[0])
    bus.close()
    assert not (tmp_path / RESERVE_FILE).exists()  # close gives the reserve back
    bus.publish(events[1])
    bus.close()
    assert seen == events
    assert list(read_events(tmp_path / "events.jsonl")) == events


def test_a_cut_line_left_by_a_crash_stays_one_cut_line(tmp_path):
    path = tmp_path / "events.jsonl"
    good = TrialPhaseChanged(step=1, group=0, trial="x", phase="done")
    path.write_text(good.to_json() + "\n" + good.to_json()[:25])  # a writer died mid-line
    bus = EventBus(tmp_path)
    later = TrialPhaseChanged(step=1, group=0, trial="y", phase="agent")
    bus.publish(later)
    bus.close()
    assert list(read_events(path)) == [good, later]
    assert len(path.read_text().splitlines()) == 3  # the cut line alone on its line, not glued to `later`


def test_close_does_not_raise_when_fsync_fails(tmp_path, monkeypatch):
    def fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    bus = EventBus(tmp_path)
    bus.publish(ControlChanged(state="running"))
    monkeypatch.setattr(os, "fsync", fsync)
    bus.close()
    assert len(list(read_events(tmp_path / "events.jsonl"))) == 1


def test_a_subscription_starts_where_the_file_stands(tmp_path):
    """What a resumed run's console relies on: the events before the offset are in the file and
    not delivered, every later one is delivered. Each is seen exactly once."""
    earlier = [ControlChanged(state="running"), RunEnded(status="stopped", step=1)]
    bus = EventBus(tmp_path)
    for event in earlier:
        bus.publish(event)
    bus.close()
    resumed = EventBus(tmp_path)  # the same folder, a new process
    before = TrialPhaseChanged(step=2, group=0, trial="before-the-console", phase=Phase.QUEUED)
    resumed.publish(before)
    seen = []
    unsubscribe, offset = resumed.subscribe_after_file(seen.append)
    later = [TrialPhaseChanged(step=2, group=0, trial="t", phase=Phase.AGENT), RunEnded(status="done", step=3)]
    for event in later:
        resumed.publish(event)
    resumed.close()
    path = tmp_path / "events.jsonl"
    head = path.read_bytes()[:offset].decode()
    assert head.endswith("\n") and [decode(line) for line in head.splitlines()] == [*earlier, before]
    assert seen == later
    assert len(list(read_events(path))) == len(earlier) + 1 + len(later)
    unsubscribe()
    resumed.publish(ControlChanged(state="done"))
    assert seen == later
    assert EventBus().subscribe_after_file(seen.append)[1] == 0  # no file: nothing to read first


def test_phases_are_the_enum_and_travel_as_plain_strings():
    assert TRIAL_PHASES == tuple(Phase) and TRIAL_PHASES[0] == "queued"
    event = TrialPhaseChanged(step=0, group=0, trial="t", phase=Phase.VERIFYING)
    assert json.loads(event.to_json())["phase"] == "verifying"
    assert decode(event.to_json()) == event
