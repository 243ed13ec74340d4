"""examples/: every shipped trial config loads as the recipe loads it (placeholders filled, the
seed's keys translated for its agent, Harbor's options checked), from wherever this clone is."""

import json
import sys

import pytest

from tbconsole.harbor import agents
from tbconsole.runner.trials import load_template

from tests_support.agents import EXAMPLES

LOCAL = sorted(EXAMPLES.glob("*-local.json"))


def test_there_is_a_local_example_per_agent():
    assert [p.name for p in LOCAL] == [
        "claude-code-local.json",
        "codex-local.json",
        "mini-swe-agent-local.json",
        "terminus-2-local.json",
    ]


@pytest.mark.parametrize("path", LOCAL, ids=lambda p: p.stem)
def test_local_examples_load(path, tmp_path):
    agent = json.loads(path.read_text())["agent"]["name"]
    problem = agents.problem(agent)
    if problem:
        pytest.fail(problem, pytrace=False)
    template = load_template(path)
    text = json.dumps(template.raw)
    assert "{agents}" not in text and "{venv}" not in text
    assert template.calls_proxy and template.proxy.context_window == 32768 and template.proxy.temperature == 0.8
    config = template.config_for(tmp_path, "t", "http://127.0.0.1:9/t/t", "key", tmp_path)
    assert config.environment.import_path == "tbconsole.sandbox:LocalSandbox"
    host_paths = config.environment.kwargs.get("host_paths", [])
    if agent in agents.CLIS:
        assert str(agents.agents_dir()) in host_paths
        assert config.agent.env["PATH"].startswith(str(agents.bin_dir()) + ":")
    elif agent == "mini-swe-agent":
        assert host_paths == [sys.prefix]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*-e2b.json")), ids=lambda p: p.stem)
def test_seed_style_e2b_examples_load(path, tmp_path):
    """The seed's reference file with another agent (E2B sandboxes; Harbor installs the CLI there)."""
    template = load_template(path)
    assert template.proxy.context_window == 65536 and template.proxy.temperature == 0.8
    config = template.config_for(tmp_path, "t", "http://10.0.0.1:9/t/t", "key", tmp_path)
    assert config.environment.type == "e2b" and config.agent.override_timeout_sec == 5400
    assert "max_seq_len" not in config.agent.kwargs and "max_tokens" not in config.agent.kwargs
