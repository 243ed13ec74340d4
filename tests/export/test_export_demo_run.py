"""`tbconsole export` of the session's real demo run (conftest's ``demo_run``), read back in both
formats: one record per scored training trial, rewards and advantages as the events and the group
means say, ATIF that Harbor's own models validate, sampled token ids and log-probs as captured;
and the `harbor view` command of one of its trials, served by Harbor's own viewer app."""

import json
import shlex
from pathlib import Path

import orjson
import pytest

from tbconsole.entry.main import main
from tbconsole.record.events import GroupEnded, TrialEnded, read_events
from tbconsole.record.runfolder import RunFolder

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.timeout(300)]


def exported(demo_run: Path, out: Path, *args: str) -> list[dict]:
    assert main(["export", str(demo_run), "--out", str(out), "--tokens", *args]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def captured(demo_run: Path, facts: dict) -> list[dict]:
    path = RunFolder(demo_run).capture_file(facts["step"], facts["group"], facts["id"])
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_an_export_of_the_demo_run_reads_back_in_both_formats(demo_run, tmp_path):
    from harbor.models.trajectories import Trajectory

    events = list(read_events(RunFolder(demo_run).events))
    scored = {e.trial: e for e in events if isinstance(e, TrialEnded) and e.scored}  # held-out ones come wrapped
    groups = {(e.step, e.group): e.rewards for e in events if isinstance(e, GroupEnded) and e.ok}
    sharegpt = exported(demo_run, tmp_path / "sharegpt.jsonl")
    atif = exported(demo_run, tmp_path / "atif.jsonl", "--format", "atif")
    assert len(sharegpt) == len(atif) == len(scored) >= 8
    assert sorted(r["id"] for r in sharegpt) == sorted(scored)
    for record, trajectory in zip(sharegpt, atif, strict=True):
        rewards = groups[(record["step"], record["group"])]
        assert record["reward"] == scored[record["id"]].reward and record["group_rewards"] == rewards
        assert record["advantage"] == pytest.approx(record["reward"] - sum(rewards) / len(rewards), abs=1e-6)
        lines = captured(demo_run, record)
        replies = [m for m in record["conversations"] if m["from"] == "gpt"]
        assert [(m["token_ids"], m["logprobs"]) for m in replies] == [(x["output"], x["logprobs"]) for x in lines]
        assert [(m["value"], m.get("tool_calls", [])) for m in replies] == [
            (x["reply"]["text"], x["reply"].get("tool_calls", [])) for x in lines
        ]
        assert [m["from"] for m in record["conversations"][:2]] == ["system", "human"]

        parsed = Trajectory.model_validate(trajectory)  # Harbor's own models read it back
        facts = parsed.extra["tbconsole"]
        assert {k: facts[k] for k in ("id", "reward", "advantage")} == {
            k: record[k] for k in ("id", "reward", "advantage")
        }
        agent = [s for s in parsed.steps if s.source == "agent"]
        assert [(s.metrics.completion_token_ids, s.metrics.logprobs) for s in agent] == [
            (x["output"], x["logprobs"]) for x in lines
        ]
        assert parsed.agent.name == "mini-swe-agent" and parsed.agent.model_name == record["model"]


def test_the_harbor_view_command_of_a_demo_trial_serves_it(demo_run, capsys):
    from fastapi.testclient import TestClient
    from harbor.viewer import create_app

    trial = next(e for e in read_events(RunFolder(demo_run).events) if isinstance(e, TrialEnded) and e.scored)
    assert main(["export", str(demo_run), "--harbor-view", trial.trial]) == 0
    command, where = capsys.readouterr().out.splitlines()
    harbor, view, jobs, flag = shlex.split(command)
    assert Path(harbor).name == "harbor" and (view, flag) == ("view", "--jobs")
    path = where.split()[2].removeprefix("http://127.0.0.1:8080")
    client = TestClient(create_app(Path(jobs), mode="jobs", static_dir=None))
    answer = client.get(f"/api{path}")
    assert answer.status_code == 200 and answer.json()["trial_name"] == trial.trial
    assert client.get(f"/api{path}/trajectory").status_code == 200  # Harbor's own ATIF of the agent
