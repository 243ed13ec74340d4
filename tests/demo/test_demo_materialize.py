"""What `tbconsole demo` fills in before a run: the KL reference follows the run's own model."""

import pytest

from tbconsole.demo import recipe as demo
from tbconsole.engine.registry import register_with_cookbook
from tbconsole.runner.optionkeys import OptionsError
from tbconsole.runner.options import parse


def _materialized(tmp_path, *argv):
    register_with_cookbook()
    return demo.materialize(
        parse([f"config.log_path={tmp_path / 'run'}", "config.max_steps=1", *argv], demo.demo_defaults())
    ).args.config


def test_the_kl_reference_is_the_starting_model(tmp_path):
    config = _materialized(tmp_path)
    assert config.kl_penalty_coef == demo.DEMO_KL_PENALTY > 0
    assert config.kl_reference_config.base_model == config.model_name == "tbconsole/qwen3-tiny-agent"


def test_the_kl_reference_follows_another_model_and_an_explicit_one_stays(tmp_path):
    config = _materialized(tmp_path, "config.model_name=tbconsole/qwen3-tiny")
    assert config.kl_reference_config.base_model == "tbconsole/qwen3-tiny"
    config = _materialized(
        tmp_path,
        "config.model_name=tbconsole/qwen3-tiny",
        "config.kl_reference_config.base_model=tbconsole/qwen3-tiny-agent",
    )
    assert config.kl_reference_config.base_model == "tbconsole/qwen3-tiny-agent"


def test_kl_off_needs_no_reference(tmp_path):
    config = _materialized(tmp_path, "config.kl_penalty_coef=0")
    assert config.kl_penalty_coef == 0


def test_a_hosted_model_name_on_the_embedded_engine_is_refused(tmp_path):
    with pytest.raises(OptionsError, match="not a local model"):
        _materialized(tmp_path, "config.model_name=Qwen/Qwen3-8B")
