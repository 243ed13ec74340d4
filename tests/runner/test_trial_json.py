"""trial.json: the seed's reference config works unchanged; what cannot be honoured is refused."""

import json

import pytest

from tbconsole.runner.trials import TrialConfigError, load_template

SEED_TRIAL = {
    "trials_dir": "/tmp/harbor-trials",
    "environment": {"type": "e2b"},
    "agent": {
        "name": "mini-swe-agent",
        "model_name": "openai/policy",
        "override_timeout_sec": 5400,
        "env": {
            "OPENAI_BASE_URL": "{proxy_url}/v1",
            "OPENAI_API_KEY": "{proxy_api_key}",
            "MSWEA_COST_TRACKING": "ignore_errors",
        },
        "kwargs": {
            "max_tokens": 8192,
            "max_seq_len": 65536,
            "config": {"model": {"model_kwargs": {"temperature": 0.8}}},
        },
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
    body = {
        "agent": {
            "name": "claude-code",
            "model_name": "anthropic/policy",
            "env": {"ANTHROPIC_BASE_URL": "{proxy_url}", "ANTHROPIC_API_KEY": "{proxy_api_key}"},
        }
    }
    template = load_template(_write(tmp_path, body))
    config = template.config_for(tmp_path, "t", "http://h:1/t/t", "k", tmp_path)
    assert config.agent.env["ANTHROPIC_BASE_URL"] == "http://h:1/t/t"
    assert config.environment.import_path == "tbconsole.sandbox:LocalSandbox"  # default


@pytest.mark.parametrize(
    "body, message",
    [
        ({"task": {"path": "x"}, "agent": {"name": "nop"}}, "leave it out"),
        ({"agent": {"name": "mini-swe-agent", "kwargs": {"max_seq_len": "big"}}}, "positive integer"),
        ({"agent": {"name": "mini-swe-agent", "kwargs": {"bogus": 1}}}, "Unknown option 'bogus'"),
        (
            {
                "agent": {
                    "name": "mini-swe-agent",
                    "kwargs": {"config": {"model": {"model_kwargs": {"temperature": -1}}}},
                }
            },
            ">= 0",
        ),
        ({"agent": "mini-swe-agent"}, "'agent' must be an object"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_trial_configs_are_refused_with_a_message(tmp_path, body, message):
    with pytest.raises(TrialConfigError, match=message):
        load_template(_write(tmp_path, body))


def test_not_json(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{")
    with pytest.raises(TrialConfigError, match="not valid JSON"):
        load_template(path)


def _seed_variant(name: str, model_name: str, env: dict) -> dict:
    """The seed's reference trial.json with another agent: only name, model and env change."""
    body = json.loads(json.dumps(SEED_TRIAL))
    body["agent"].update(name=name, model_name=model_name, env=env)
    return body


CLAUDE_ENV = {"ANTHROPIC_BASE_URL": "{proxy_url}", "ANTHROPIC_API_KEY": "{proxy_api_key}"}
OPENAI_ENV = {"OPENAI_BASE_URL": "{proxy_url}/v1", "OPENAI_API_KEY": "{proxy_api_key}"}


def test_seed_claude_code_variant_loads_and_validates(tmp_path):
    """The seed: for claude-code set ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, all else as the
    mini-swe-agent reference (max_tokens, max_seq_len, config.model.model_kwargs.temperature)."""
    template = load_template(_write(tmp_path, _seed_variant("claude-code", "anthropic/policy", CLAUDE_ENV)))
    assert template.proxy.context_window == 65536 and template.proxy.temperature == 0.8
    agent = template.raw["agent"]
    assert agent["kwargs"] == {}  # no mini-swe-agent key reaches Harbor's claude-code options
    assert agent["env"]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8192"  # Claude Code's own cap (it asks for 128k)
    config = template.config_for(tmp_path, "t1", "http://127.0.0.1:5/t/t1", "secret", tmp_path / "trials")
    assert config.agent.name == "claude-code" and config.agent.override_timeout_sec == 5400
    assert config.agent.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5/t/t1"
    assert config.agent.env["ANTHROPIC_API_KEY"] == "secret"
    assert config.environment.type == "e2b" and str(config.trials_dir) == "/tmp/harbor-trials"


def test_claude_code_keeps_its_own_settings_and_refuses_what_it_cannot_honour(tmp_path):
    body = _seed_variant("claude-code", "anthropic/policy", CLAUDE_ENV)
    body["agent"]["kwargs"]["config"]["permissions"] = {"allow": ["Bash"]}  # Claude Code's settings.json
    template = load_template(_write(tmp_path, body))
    assert template.raw["agent"]["kwargs"] == {"config": {"permissions": {"allow": ["Bash"]}}}

    body["agent"]["kwargs"]["config"]["model"]["model_kwargs"]["top_p"] = 0.9
    with pytest.raises(TrialConfigError, match=r"'claude-code'.*config\.model\.model_kwargs\.top_p"):
        load_template(_write(tmp_path, body))

    body = _seed_variant("claude-code", "anthropic/policy", {**CLAUDE_ENV, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512"})
    with pytest.raises(TrialConfigError, match=r"'claude-code'.*max_tokens=8192.*CLAUDE_CODE_MAX_OUTPUT_TOKENS"):
        load_template(_write(tmp_path, body))


def test_seed_codex_variant_translates_the_window_and_refuses_max_tokens(tmp_path):
    body = _seed_variant("codex", "openai/policy", OPENAI_ENV)
    with pytest.raises(TrialConfigError, match=r"agent 'codex' has no setting for agent\.kwargs\.max_tokens"):
        load_template(_write(tmp_path, body))
    del body["agent"]["kwargs"]["max_tokens"]
    template = load_template(_write(tmp_path, body))
    assert template.proxy.context_window == 65536 and template.proxy.temperature == 0.8
    # Codex's config.toml (as JSON): it compacts before the window the proxy enforces
    assert template.raw["agent"]["kwargs"] == {"config": {"model_context_window": 65536}}
    config = template.config_for(tmp_path, "t1", "http://127.0.0.1:5/t/t1", "k", tmp_path)
    assert config.agent.env["OPENAI_BASE_URL"] == "http://127.0.0.1:5/t/t1/v1"


def test_seed_terminus_2_variant_translates_every_key(tmp_path):
    template = load_template(_write(tmp_path, _seed_variant("terminus-2", "openai/policy", OPENAI_ENV)))
    assert template.proxy.context_window == 65536 and template.proxy.temperature == 0.8
    assert template.raw["agent"]["kwargs"] == {
        "temperature": 0.8,
        "llm_call_kwargs": {"max_tokens": 8192},
        "model_info": {
            "max_input_tokens": 65536,
            "max_output_tokens": 8192,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
        },
    }
    body = _seed_variant("terminus-2", "openai/policy", OPENAI_ENV)
    body["agent"]["kwargs"]["config"]["agent"] = {"step_limit": 3}  # mini-swe-agent's, not terminus-2's
    with pytest.raises(TrialConfigError, match=r"'terminus-2' takes no 'config' option.*agent"):
        load_template(_write(tmp_path, body))


def test_local_paths_are_filled_and_a_missing_cli_is_named(tmp_path, monkeypatch):
    import sys

    body = {
        "agent": {
            "name": "mini-swe-agent",
            "model_name": "openai/policy",
            "env": {"PATH": "{venv}/bin:/usr/bin"},
            "kwargs": {"skip_install": True},
        },
        "environment": {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"host_paths": ["{venv}"]}},
    }
    template = load_template(_write(tmp_path, body))
    assert template.raw["agent"]["env"]["PATH"] == f"{sys.prefix}/bin:/usr/bin"
    assert template.raw["environment"]["kwargs"]["host_paths"] == [sys.prefix]

    monkeypatch.setenv("TBCONSOLE_AGENTS_DIR", str(tmp_path / "no-agents"))
    body = {
        "agent": {
            "name": "claude-code",
            "model_name": "anthropic/policy",
            "env": {**CLAUDE_ENV, "PATH": "{agents}/node_modules/.bin:/usr/bin"},
            "kwargs": {"skip_install": True},
        },
        "environment": {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"host_paths": ["{agents}"]}},
    }
    with pytest.raises(
        TrialConfigError,
        match=r"Claude Code \(@anthropic-ai/claude-code@[\d.]+\) is not installed in "
        r".*no-agents: run scripts/agents\.sh",
    ):
        load_template(_write(tmp_path, body))


def test_tbconsole_trial_reads_trial_json_as_training_does(tmp_path):
    """``tbconsole trial --trial-config`` goes through the same loader: the seed's keys are
    translated (Harbor's mini-swe-agent would refuse max_seq_len), placeholders are filled."""
    from tbconsole.runner.single_trial import build_trial_config, load_trial_config

    path = _write(tmp_path, SEED_TRIAL)
    template = load_trial_config(path, {"proxy_url": "http://gateway:1", "proxy_api_key": "k"})
    assert template.proxy.context_window == 65536
    config = build_trial_config(tmp_path, trial_config=template, trials_dir=tmp_path / "t")
    assert "max_seq_len" not in config.agent.kwargs and config.agent.name == "mini-swe-agent"
    assert config.agent.env["OPENAI_BASE_URL"] == "http://gateway:1/v1"
    assert config.trials_dir == tmp_path / "t"
    with pytest.raises(TrialConfigError, match="--proxy-url"):
        load_trial_config(path)
    with pytest.raises(TrialConfigError, match="does not exist"):
        load_trial_config(tmp_path / "missing.json")
