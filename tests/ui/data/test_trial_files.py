"""Trial files as the console reads them: ATIF trajectories, verifier output, result.json and
capture files, whole or still being written."""

import json

from tbconsole.ui.data.captures import capture_path, read_capture_outputs
from tbconsole.ui.data.trialfiles import load_trial_files, parse_atif
from tbconsole.ui.present.token_text import TokenDecoder

ATIF = {
    "schema_version": "ATIF-v1.6",
    "session_id": "s",
    "agent": {"name": "mini-swe-agent", "version": "2"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are a helpful agent."},
        {"step_id": 2, "source": "user", "message": "Create /app/hello.txt [bold]now[/bold]"},
        {
            "step_id": 3,
            "source": "agent",
            "message": [{"type": "text", "text": "ok \x1b[2J"}],
            "reasoning_content": "think",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "echo hi > /app/hello.txt"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "done\x07"}]},
            "metrics": {"prompt_tokens": 100, "completion_tokens": 20},
        },
    ],
}


def make_trial_dir(tmp_path, *, trajectory=ATIF, task_instruction="Write hello.", complete=True):
    trial = tmp_path / "hello-file__abc"
    (trial / "agent").mkdir(parents=True)
    (trial / "verifier").mkdir()
    task = tmp_path / "task"
    task.mkdir()
    (task / "instruction.md").write_text(task_instruction)
    body = json.dumps(trajectory)
    (trial / "agent" / "trajectory.json").write_text(body if complete else body[:40])
    (trial / "verifier" / "test-stdout.txt").write_text("1 passed\n")
    (trial / "result.json").write_text(
        json.dumps(
            {
                "task_name": "hello-file",
                "trial_name": trial.name,
                "config": {"task": {"path": str(task)}},
                "verifier_result": {"rewards": {"reward": 1.0}},
                "exception_info": None,
            }
        )
    )
    return trial


def test_trial_files(tmp_path):
    trial = make_trial_dir(tmp_path)
    files = load_trial_files(trial)
    assert files.instruction == "Write hello."
    assert [s.source for s in files.steps] == ["system", "user", "agent"]
    agent = files.steps[2]
    assert agent.message == "ok \x1b[2J" and agent.reasoning == "think"
    assert agent.tool_calls == [("bash", '{"command": "echo hi > /app/hello.txt"}')]
    assert agent.observations == ["done\x07"] and agent.completion_tokens == 20
    assert files.verifier_stdout == "1 passed\n" and files.rewards == {"reward": 1.0}
    assert files.exception is None and files.problems == []
    assert load_trial_files(None).steps == [] and load_trial_files(tmp_path / "missing").steps == []


def test_trial_files_being_written(tmp_path):
    trial = make_trial_dir(tmp_path, complete=False)
    files = load_trial_files(trial)
    assert files.steps == [] and files.problems
    assert parse_atif({"steps": [{"source": "agent"}, "junk"]})[0].message == ""


def test_capture_outputs(tmp_path):
    path = capture_path(tmp_path, 3, 1, "t1")
    assert path == tmp_path / "capture" / "step_000003" / "group_001" / "t1.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        json.dumps(
            {
                "v": 1,
                "trial": "t1",
                "turn": i,
                "prompt_len": 3,
                "prompt_shared": 0,
                "prompt_tail": [1, 2, 3],
                "output": [10 + i, 11],
                "logprobs": [-0.1, -2.0],
                "stop_reason": "stop",
            }
        )
        for i in range(2)
    ]
    path.write_text("\n".join(lines) + "\n" + lines[0][:20])  # a cut-short last line
    turns = read_capture_outputs(path)
    assert [t.turn for t in turns] == [0, 1] and turns[1].output == [11, 11] and turns[0].logprobs == [-0.1, -2.0]
    assert read_capture_outputs(None) == [] and read_capture_outputs(tmp_path / "nope") == []
    assert TokenDecoder(None).piece(42) == "⟨42⟩"
