"""advise.<name>=<value>: parsed with the recipe's other options, checked (exit 2 with a message
that names the option), documented in the docs (docs/advisories.md) with the defaults the code has."""

import dataclasses
import os
import subprocess
import sys

import pytest

from tbconsole.advisories import DOCS, RULES, Thresholds, problems
from tbconsole.runner.optionkeys import OptionsError
from tbconsole.runner.options import parse

from tests_support.paths import REPO

THRESHOLDS_PAGE = REPO / "docs" / "advisories.md"  # the docs' table of the thresholds
BASE = [
    "config.log_path=/nonexistent/run",
    "harbor.trial_config=trial.json",
    "config.model_name=m",
    "config.dataset_builder.tasks_dir=/nonexistent",
    "config.learning_rate=1e-5",
    "config.max_tokens=100",
]


def test_thresholds_are_options_with_their_defaults():
    assert parse(BASE).args.advise == Thresholds()
    args = parse([*BASE, "advise.kl_max=0.002", "advise.no_signal_steps=8", "advise.off=disk,sdk-retries"]).args
    assert (args.advise.kl_max, args.advise.no_signal_steps) == (0.002, 8)
    assert args.advise.disabled() == {"disk", "sdk-retries"}


@pytest.mark.parametrize(
    ("arg", "says"),
    [
        ("advise.kl_max=0", "advise.kl_max must be more than 0"),
        ("advise.no_signal_share=1.5", "advise.no_signal_share is a share"),
        ("advise.entropy_drop=1", "advise.entropy_drop is a fraction"),
        ("advise.no_signal_p=0", "advise.no_signal_p is a fraction"),
        ("advise.entropy_p=1", "advise.entropy_p is a fraction"),
        ("advise.kl_base_steps=0", "advise.kl_base_steps must be at least 1"),
        ("advise.stall_factor=0.5", "advise.stall_factor is a factor: at least 1"),
        ("advise.off=disk,nope", "advise.off names unknown rules nope"),
        ("advise.disk_error_mib=4096", "advise.disk_error_mib must not be above advise.disk_warn_mib"),
        ("advise.kl_maxx=1", "advise.kl_maxx does not exist; did you mean advise.kl_max?"),
        ("advise.hack_steps=two", "Could not interpret argument 'two' provided for param 'advise.hack_steps'"),
    ],
)
def test_bad_values_are_refused_with_what_is_wrong(arg, says):
    with pytest.raises(OptionsError) as caught:
        parse([*BASE, arg])
    assert says in str(caught.value)


def test_every_default_is_valid_and_every_rule_can_be_turned_off():
    assert problems(Thresholds()) == []
    assert problems(Thresholds(off=",".join(RULES))) == []


@pytest.mark.e2e
def test_a_bad_threshold_exits_2_before_anything_starts(tmp_path):
    log = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "tbconsole", "demo", "--headless", f"config.log_path={log}", "advise.kl_max=-1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "advise.kl_max must be more than 0" in done.stderr and "Traceback" not in done.stderr
    assert not log.exists()


def test_the_docs_list_every_threshold_with_its_default():
    text = THRESHOLDS_PAGE.read_text()
    for field in dataclasses.fields(Thresholds):
        default = repr(field.default) if isinstance(field.default, str) else f"{field.default:g}"
        row = f"| `advise.{field.name}` | `{default}` | {DOCS[field.name]} |"
        assert row in text, row
    for rule in RULES:
        assert f"| `{rule}` |" in text, rule
