"""`tbconsole export` over recorded synthetic runs and hand-written capture files: which trials
(scored ones of groups that trained, never a failed attempt or a held-out trial), their
advantages, their conversations in both formats, token ids, and usage errors."""

import json

import orjson
import pytest

from tbconsole.entry.main import main
from tbconsole.export.atif import atif_trajectory
from tbconsole.export.conversation import read_conversation
from tbconsole.export.records import _Decoder
from tbconsole.export.sharegpt import sharegpt_record
from tbconsole.record.capturefile import CAPTURE_VERSION
from tbconsole.record.events import GroupEnded, GroupStarted, HeldOutEvent, TrialEnded
from tbconsole.record.runfolder import RunFolder
from tbconsole.synthetic.run import record_run

pytestmark = pytest.mark.timeout(120)


def export(folder, *args, capsys=None) -> tuple[int, list[dict]]:
    out = folder.parent / f"export-{len(list(folder.parent.glob('export-*')))}.jsonl"
    rc = main(["export", str(folder), "--out", str(out), *args])
    return rc, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Two trained steps of 2 groups × 3 trials; step 1's group 1 fails once and is retried;
    held-out evaluations before and after training."""
    folder = tmp_path_factory.mktemp("synthetic") / "run"
    events = record_run(folder, steps=2, groups=2, group_size=3, error_at=(1, 1), heldout_at=(0, 2))
    return folder, events


def test_scored_trials_of_the_groups_that_trained_with_the_cookbooks_advantages(synthetic):
    folder, events = synthetic
    rc, records = export(folder)
    assert rc == 0
    started = {(e.step, e.group): e.trials for e in events if isinstance(e, GroupStarted)}  # the last attempt
    ended = [e for e in events if isinstance(e, GroupEnded)]
    failed = {t for e in events if isinstance(e, GroupStarted) for t in e.trials} - {
        t for trials in started.values() for t in trials
    }
    assert failed and any(not e.ok for e in ended)
    expected = [t for key in sorted(started) for t in started[key]]
    assert [r["id"] for r in records] == expected
    held = {e.event["trial"] for e in events if isinstance(e, HeldOutEvent) and e.event["kind"] == "trial.ended"}
    assert held and not held & {r["id"] for r in records}
    rewards = {e.trial: e.reward for e in events if isinstance(e, TrialEnded) and e.scored}
    for r in records:
        group = [x for x in records if (x["step"], x["group"]) == (r["step"], r["group"])]
        assert r["reward"] == rewards[r["id"]] and r["group_rewards"] == [x["reward"] for x in group]
        assert r["advantage"] == pytest.approx(r["reward"] - sum(r["group_rewards"]) / len(group), abs=1e-6)
        assert "reproduced from the group's rewards" in r["advantage_source"] and r["trained"]
        turns = [m for m in r["conversations"] if m["from"] == "gpt"]
        lines = RunFolder(folder).capture_file(r["step"], r["group"], r["id"]).read_bytes().splitlines()
        assert [m["turn"] for m in turns] == list(range(len(lines))) and "token_ids" not in turns[0]
        assert r["conversations"][0]["from"] == "system" and r["conversations"][1]["from"] == "human"


def test_steps_tokens_and_atif(synthetic):
    folder, _ = synthetic
    rc, records = export(folder, "--step", "1", "--tokens", "--format", "atif")
    assert rc == 0 and records and {r["extra"]["tbconsole"]["step"] for r in records} == {1}
    from harbor.models.trajectories import Trajectory

    for record in records:
        trajectory = Trajectory.model_validate(record)  # Harbor reads it back
        trial = record["extra"]["tbconsole"]
        path = RunFolder(folder).capture_file(trial["step"], trial["group"], trial["id"])
        lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        agent = [s for s in trajectory.steps if s.source == "agent"]
        assert [s.metrics.completion_token_ids for s in agent] == [line["output"] for line in lines]
        assert [s.metrics.logprobs for s in agent] == [line["logprobs"] for line in lines]
        assert trajectory.steps[0].source == "system" and trajectory.steps[1].source == "user"
        assert all(s.observation is not None for s in agent[:-1])  # each command's output came back


def test_token_only_lines_are_decoded_with_the_runs_tokenizer(tmp_path):
    folder = tmp_path / "run"
    events = record_run(folder, steps=1, groups=1, group_size=2, text=False)
    rc, records = export(folder, "--tokens")
    assert rc == 0 and len(records) == 2
    decode = _Decoder(next(e for e in events if e.kind == "run.started").model_name)
    for r in records:
        replies = [m for m in r["conversations"] if m["from"] == "gpt"]
        assert replies and all(m["decoded"] and m["value"] == decode(m["token_ids"]) for m in replies)
        assert "echo synthetic" in replies[0]["value"]
        prompts = [m for m in r["conversations"] if m["from"] == "human"]
        assert prompts and all(m["decoded"] for m in prompts)


def capture_line(turn: int, prompt: list[int], previous: list[int], **text) -> bytes:
    shared = len(previous) if prompt[: len(previous)] == previous else 0
    record = {
        "v": CAPTURE_VERSION,
        "trial": "t",
        "turn": turn,
        "prompt_len": len(prompt),
        "prompt_shared": shared,
        "prompt_tail": prompt[shared:],
        "output": [100 + turn, 200 + turn],
        "logprobs": [-0.5, -0.25],
        "stop_reason": "stop",
        "api": "openai",
        "started_at": 1_767_225_600.0 + turn,
        "sample_ms": 10.0,
        "max_tokens": 64,
        "temperature": 1.0,
        **text,
    }
    return orjson.dumps(record) + b"\n"


def test_tool_calls_results_and_a_rewritten_history(tmp_path):
    """Turn 0 calls two tools; turn 1 gets both results (by id) and answers; turn 2's request
    rewrote the history (restarted): carried-again history is marked, every reply appears once."""
    system = {"role": "system", "content": "be brief"}
    user = {"role": "user", "content": "count the files"}
    calls = [{"name": "bash", "arguments": '{"command": "ls"}'}, {"name": "bash", "arguments": "not json"}]
    results = [
        {"role": "tool", "content": "a b", "tool_call_id": "c1", "name": "bash"},
        {"role": "tool", "content": "oops", "tool_call_id": "c2", "name": "bash"},
    ]
    path = tmp_path / "t.jsonl"
    p0, p1, p2 = [1, 2, 3], [1, 2, 3, 100, 200, 4, 5], [9, 8]
    path.write_bytes(
        capture_line(0, p0, [], messages=[system, user], reply={"text": "", "tool_calls": calls, "reasoning": "hm"})
        + capture_line(1, p1, p0, messages=results, echoed=1, reply={"text": "2 files"})
        + capture_line(
            2,
            p2,
            p1,
            restarted=True,
            messages=[system, user, {"role": "assistant", "content": "2 files"}, {"role": "user", "content": "sure?"}],
            reply={"text": "yes"},
        )
    )
    messages = read_conversation(path, _Decoder(None))
    assert [(m.role, m.copied, m.turn) for m in messages] == [
        ("system", False, None),
        ("user", False, None),
        ("assistant", False, 0),
        ("tool", False, None),
        ("tool", False, None),
        ("assistant", False, 1),
        ("system", True, None),
        ("user", True, None),
        ("assistant", True, None),
        ("user", False, None),
        ("assistant", False, 2),
    ]
    facts = {"id": "t", "reward": 1.0}
    record = sharegpt_record(facts, messages, tokens=True)
    gpt = [m for m in record["conversations"] if m["from"] == "gpt" and "turn" in m]
    assert [m["token_ids"] for m in gpt] == [[100, 200], [101, 201], [102, 202]]
    assert gpt[0]["tool_calls"] == calls and gpt[0]["reasoning"] == "hm"
    assert [m.get("tool_call_id") for m in record["conversations"] if m["from"] == "tool"] == ["c1", "c2"]

    from harbor.models.trajectories import Trajectory

    trajectory = Trajectory.model_validate(
        atif_trajectory(facts, messages, agent=("mini-swe-agent", "2"), model_name="m", tokens=True)
    )
    first = trajectory.steps[2]
    assert [c.tool_call_id for c in first.tool_calls] == ["c1", "c2"]
    assert first.tool_calls[0].arguments == {"command": "ls"} and first.tool_calls[1].arguments == {
        "arguments": "not json"
    }
    assert [r.source_call_id for r in first.observation.results] == ["c1", "c2"]
    assert first.reasoning_content == "hm" and first.metrics.completion_token_ids == [100, 200]
    copied = [s for s in trajectory.steps if s.is_copied_context]
    assert [s.source for s in copied] == ["system", "user", "agent"] and copied[-1].metrics is None
    assert trajectory.steps[-1].message == "yes" and trajectory.final_metrics.total_completion_tokens == 6


def test_usage_errors_exit_2_with_a_message(synthetic, tmp_path, capsys):
    folder, _ = synthetic
    assert main(["export", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["export", str(tmp_path / "empty")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["export", str(folder), "--step", "7"]) == 2
    assert "step 7 is not in this run (its steps are 0–1)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["export", str(folder), "--format", "xml"])
    assert stop.value.code == 2 and "invalid choice: 'xml'" in capsys.readouterr().err
    assert main(["export", str(folder), "--harbor-view", "no-such-trial"]) == 2
    assert "no such trial" in capsys.readouterr().err


def test_a_damaged_capture_file_leaves_its_trial_out_and_says_so(tmp_path, capsys):
    folder = tmp_path / "run"
    events = record_run(folder, steps=1, groups=1, group_size=2)
    ended = next(e for e in events if isinstance(e, TrialEnded))
    path = RunFolder(folder).capture_file(ended.step, ended.group, ended.trial)
    path.write_bytes(b"{not json\n" + path.read_bytes())
    rc, records = export(folder)
    assert rc == 1 and len(records) == 1 and records[0]["id"] != ended.trial
    err = capsys.readouterr().err
    assert f"left out {ended.trial}" in err and "line 1 is damaged" in err
