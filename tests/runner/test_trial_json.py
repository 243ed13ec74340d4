"""trial.json: the seed's reference config works unchanged; what cannot be honoured is refused."""

import json

import pytest

from tbconsole.runner.trials import load_template
from tbconsole.trial import TrialConfigError

SEED_TRIAL = {
    "trials_dir": "/tmp/harbor-trials", "environment": {"type": "e2b"},
    "agent": {
        "name": "mini-swe-agent", "model_name": "openai/policy", "override_timeout_sec": 5400,
        "env": {"OPENAI_BASE_URL": "{proxy_url}/v1", "OPENAI_API_KEY": "{proxy_api_key}",
                "MSWEA_COST_TRACKING": "ignore_errors"},
        "kwargs": {"max_tokens": 8192, "max_seq_len": 65536,
                   "config": {"model": {"model_kwargs": {"temperature": 0.8}}}},
    },
}


def _write(tmp_path, body, name="trial.json"):
    path = tmp_path / name
    path.write_text(json.dumps(body))
    return path


def test_seed_trial_json_works_unchanged(tmp_path):
    template = load_template(_write(tmp_path, SEED_TRIAL))
    assert template.proxy.context_window == 65536 and template.proxy.temperature == 0.8
    assert "max_seq_len" not in template.raw["agent"]["kwargs"]
    config = template.config_for(tmp_path, "t1", "http://127.0.0.1:5/t/t1", "secret-token", tmp_path / "trials")
    assert config.agent.env["OPENAI_BASE_URL"] == "http://127.0.0.1:5/t/t1/v1"
    assert config.agent.env["OPENAI_API_KEY"] == "secret-token"
    assert config.environment.type == "e2b"  # the user's environment is kept
    assert config.trial_name == "t1" and str(config.trials_dir) == "/tmp/harbor-trials"


def test_claude_code_variant(tmp_path):
    body = {"agent": {"name": "claude-code", "model_name": "anthropic/policy",
                      "env": {"ANTHROPIC_BASE_URL": "{proxy_url}", "ANTHROPIC_API_KEY": "{proxy_api_key}"}}}
    template = load_template(_write(tmp_path, body))
    config = template.config_for(tmp_path, "t", "http://h:1/t/t", "k", tmp_path)
    assert config.agent.env["ANTHROPIC_BASE_URL"] == "http://h:1/t/t"
    assert config.environment.import_path == "tbconsole.sandbox:LocalSandbox"  # default


@pytest.mark.parametrize("body, message", [
    ({"task": {"path": "x"}, "agent": {"name": "nop"}}, "leave it out"),
    ({"agent": {"name": "mini-swe-agent", "kwargs": {"max_seq_len": "big"}}}, "positive integer"),
    ({"agent": {"name": "mini-swe-agent", "kwargs": {"bogus": 1}}}, "Unknown option 'bogus'"),
    ({"agent": {"name": "mini-swe-agent", "kwargs": {"config": {"model": {"model_kwargs": {"temperature": -1}}}}}},
     ">= 0"),
    ({"agent": "mini-swe-agent"}, "'agent' must be an object"),
    ([1, 2], "JSON object"),
])
def test_bad_trial_configs_are_refused_with_a_message(tmp_path, body, message):
    with pytest.raises(TrialConfigError, match=message):
        load_template(_write(tmp_path, body))


def test_not_json(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{")
    with pytest.raises(TrialConfigError, match="not valid JSON"):
        load_template(path)
