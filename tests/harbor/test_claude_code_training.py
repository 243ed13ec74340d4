"""One training step with Claude Code: `tbconsole demo` on a bundled task with the shipped
claude-code example config — Claude Code's streamed Anthropic calls are captured with log-probs
and the cookbook's PPO step trains on exactly those tokens. One trial (its calls of about 26k
tokens each; more would exceed what two cores train in a test's time).

The model is named ``anthropic/policy``, a name Claude Code does not know: it then puts its
environment notes in a ``system`` turn inside ``messages`` (it does not for a Claude model
name, which ``test_agent_trials.test_claude_code`` runs), and the proxy must take that turn too:
every call is answered and captured."""

import json
import os
import subprocess
import sys

import pytest

from tbconsole.harbor import agents
from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR
from tbconsole.proxy import read_capture
from tbconsole.record.events import read_events

from tests_support.paths import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "claude-code-local.json"


def test_a_one_step_training_run_with_claude_code(tmp_path):
    problem = agents.problem("claude-code")
    if problem:
        pytest.fail(problem, pytrace=False)
    config = json.loads(EXAMPLE.read_text())
    config["agent"]["model_name"] = "anthropic/policy"
    trial_config = tmp_path / "trial.json"
    trial_config.write_text(json.dumps(config))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "hello-file").symlink_to(BUNDLED_TASKS_DIR / "hello-file")
    log = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "demo",
            "--headless",
            f"config.log_path={log}",
            f"harbor.trial_config={trial_config}",
            f"config.dataset_builder.tasks_dir={tasks}",
            "config.dataset_builder.groups_per_batch=1",
            "config.dataset_builder.group_size=1",
            "config.kl_penalty_coef=0",
            "config.max_steps=1",
            "config.eval_every=0",
            "config.max_tokens=64",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    events = list(read_events(log / "events.jsonl"))
    requests = [e for e in events if e.kind == "proxy.request"]
    assert requests and {e.api for e in requests} == {"anthropic"} and all(e.stream for e in requests)
    assert all(e.status == 200 and e.captured for e in requests), [e.error for e in requests]
    [ended] = [e for e in events if e.kind == "trial.ended"]
    assert ended.scored and ended.reward is not None
    captured = [t for p in sorted((log / "capture").rglob("*.jsonl")) for t in read_capture(p)]
    assert all(len(t.logprobs) == len(t.output_tokens) > 0 for t in captured)
    [row] = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert row["env/all/total_ac_tokens"] == sum(len(t.output_tokens) for t in captured)
    assert row["env/all/total_ob_tokens"] == sum(len(t.prompt_tokens) for t in captured)
    assert [e.status for e in events if e.kind == "run.ended"] == ["done"]
