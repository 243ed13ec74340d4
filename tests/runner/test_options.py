"""The recipe's command line: every seed key, the seed's rules, one clear error each."""

import io
import json
import logging
import os
import subprocess
import sys

import pytest

from tbconsole.common.formatting import command_line
from tbconsole.entry import run as entry_run
from tbconsole.entry.train import choose_console, run_train
from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR
from tbconsole.runner.optionkeys import OptionsError
from tbconsole.runner.options import parse, resolve_renderer_name

from tests_support.healthz import healthz_server

SEED_ARGS = [
    "config.base_url=http://127.0.0.1:10613",
    "config.model_name=Qwen/Qwen3.6-35B-A3B",
    "config.renderer_name=qwen3_5",
    "config.lora_rank=16",
    "config.learning_rate=1e-6",
    "config.max_tokens=8192",
    "config.loss_fn=ppo",
    "config.ttl_seconds=None",
    "config.log_path=/tmp/harbor-tinker",
    "config.dataset_builder.tasks_dir=/data/tasks",
    "config.dataset_builder.groups_per_batch=4",
    "config.dataset_builder.group_size=8",
    "harbor.trial_config=trial.json",
    "harbor.listen_host=0.0.0.0",
    "harbor.advertised_host=10.0.0.5",
]


def test_the_seed_command_parses_with_native_names_and_defaults():
    parsed = parse(SEED_ARGS + ["config.max_steps=1"])
    config, harbor = parsed.args.config, parsed.args.harbor
    assert config.lora_rank == 16 and config.learning_rate == 1e-6 and config.loss_fn == "ppo"
    assert config.ttl_seconds is None and config.max_steps == 1
    assert config.dataset_builder.group_size == 8 and config.dataset_builder.epochs == 1
    assert harbor.listen_host == "0.0.0.0" and harbor.advertised_host == "10.0.0.5"
    assert harbor.reward_key == "reward" and harbor.max_parallel_trials_per_group == 4
    # cookbook defaults are untouched
    assert config.save_every == 20 and config.kl_penalty_coef == 0.0 and config.temperature == 1.0
    assert "config.lora_rank" in parsed.explicit


@pytest.mark.parametrize(
    "extra, message",
    [
        (["config.rollout_error_tolerance=True"], "set by the recipe"),
        (["config.temperature=0.8"], "must stay 1.0"),
        (["config.max_tokens=0"], "positive"),
        (["config.dataset_builder.group_size=0"], "at least 1"),
        (["harbor.max_parallel_trials_per_group=0"], "at least 1"),
        (["config.lernrate=1"], "does not exist"),
        (["config.learning_rate=fast"], "config.learning_rate"),
        (["learning_rate"], "not KEY=VALUE"),
        (["config.kl_penalty_coef=0.1"], "kl_reference_config.base_model"),
        (["harbor.eval_group_size=0"], "at least 1"),
        (["gateway.outage_limit=-1"], "gateway.outage_limit must be 0 or more"),
        (
            ["config.async_config.max_steps_off_policy=1", "config.async_config.groups_per_batch=3"],
            "must equal config.dataset_builder.groups_per_batch",
        ),  # fmt: skip
        (
            ["config.async_config.max_steps_off_policy=-1", "config.async_config.groups_per_batch=4"],
            "0 or more updates",
        ),  # fmt: skip
        (
            [
                "config.async_config.max_steps_off_policy=1",
                "config.async_config.groups_per_batch=4",
                "config.stream_minibatch_config.groups_per_batch=4",
                "config.stream_minibatch_config.num_minibatches=1",
            ],
            "not both",
        ),  # fmt: skip
        (
            ["config.stream_minibatch_config.groups_per_batch=3", "config.stream_minibatch_config.num_minibatches=1"],
            "must equal config.dataset_builder.groups_per_batch",
        ),  # fmt: skip
        (
            ["config.stream_minibatch_config.groups_per_batch=4", "config.stream_minibatch_config.num_minibatches=3"],
            "split evenly",
        ),  # fmt: skip
    ],
)
def test_rule_violations_are_one_readable_error(extra, message):
    with pytest.raises(OptionsError, match=message):
        parse(SEED_ARGS + extra)


def test_a_stream_that_fits_the_batch_parses():
    parsed = parse(SEED_ARGS + ["config.stream_minibatch_config.groups_per_batch=4",
                                "config.stream_minibatch_config.num_minibatches=2"])  # fmt: skip
    assert parsed.args.config.stream_minibatch_config.num_minibatches == 2


def test_missing_required_keys_are_named():
    with pytest.raises(OptionsError, match="harbor.trial_config"):
        parse([a for a in SEED_ARGS if not a.startswith("harbor.trial_config")])


def test_renderer_defaults_to_the_cookbook_recommendation():
    parsed = parse([a for a in SEED_ARGS if "renderer_name" not in a])
    assert parsed.args.config.renderer_name is None
    assert resolve_renderer_name(parsed.args.config) == "qwen3_5"


def _train(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "tbconsole", "train", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


@pytest.mark.e2e
def test_cli_help_lists_every_option(tmp_path):
    proc = _train("--help", cwd=tmp_path)
    assert proc.returncode == 0
    for key in (
        "config.learning_rate",
        "config.dataset_builder.group_size",
        "harbor.advertised_host",
        "config.loss_fn",
        "config.ttl_seconds",
    ):
        assert key in proc.stdout


@pytest.mark.e2e
def test_cli_bad_input_exits_2_and_starts_nothing(tmp_path):
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"agent": {"name": "nop"}}))
    base = [
        a
        for a in SEED_ARGS
        if not a.startswith(("config.log_path", "harbor.trial_config", "config.dataset_builder.tasks_dir"))
    ]
    log = tmp_path / "run"
    cases = [
        (["config.rollout_error_tolerance=False"], "set by the recipe"),
        ([f"harbor.trial_config={tmp_path / 'missing.json'}"], "does not exist"),
        (["config.dataset_builder.tasks_dir=/no/such/dir"], "does not exist"),
    ]
    env = {**os.environ, "TINKER_API_KEY": "tml-test"}
    with healthz_server() as base_url:  # the gateway probe comes first: let it pass
        for extra, message in cases:
            args = (
                [a for a in base if not a.startswith("config.base_url")]
                + [
                    f"config.base_url={base_url}",
                    f"config.log_path={log}",
                    f"harbor.trial_config={trial}",
                    f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}",
                ]
                + extra
            )
            proc = _train(*args, cwd=tmp_path, env=env)
            assert proc.returncode == 2, proc.stderr
            assert message in proc.stderr and "Traceback" not in proc.stderr
            assert not log.exists(), "nothing may start on a usage error"


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_console_opens_only_on_a_terminal_and_a_fallback_says_so(tmp_path):
    tty, pipe = _Stream(True), _Stream(False)
    log_path = tmp_path / "run"
    assert choose_console("tbconsole demo", log_path, headless=False, stdin=tty, stdout=tty) == (True, None)
    assert choose_console("tbconsole demo", log_path, headless=True, stdin=tty, stdout=pipe) == (False, None)
    console, notice = choose_console("tbconsole demo", log_path, headless=False, stdin=tty, stdout=pipe)
    assert not console and notice.startswith("tbconsole demo: stdout is not a terminal") and "\n" not in notice
    assert f"{command_line('attach', log_path)}`" in notice  # spelled as a new shell runs it


def test_a_run_with_stdout_piped_goes_headless_with_a_notice(tmp_path, monkeypatch, capsys):
    """Under pytest stdout is captured, as in `tbconsole demo | tee out.log`."""
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"agent": {"name": "nop"}}))
    started = []
    monkeypatch.setattr(entry_run, "headless", lambda parsed, prepare, **_: started.append(parsed) or 0)
    monkeypatch.setattr(entry_run, "detached", lambda *args, **_: pytest.fail("the console needs a terminal"))
    monkeypatch.setattr(logging, "raiseExceptions", logging.raiseExceptions)  # run_train turns it off
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    log = tmp_path / "run"
    base = [
        a
        for a in SEED_ARGS
        if not a.startswith(
            ("config.base_url", "config.log_path", "harbor.trial_config", "config.dataset_builder.tasks_dir")
        )
    ]
    with healthz_server() as base_url:
        code = run_train(
            [
                *base,
                f"config.base_url={base_url}",
                f"config.log_path={log}",
                f"harbor.trial_config={trial}",
                f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}",
            ]
        )
    assert code == 0 and len(started) == 1
    err = capsys.readouterr().err
    assert "stdout is not a terminal" in err and f"tbconsole attach {log}" in err
