"""The option keys checked before the cookbook is imported: the same keys and required ones as chz
finds on the real cookbook Config, and the same verdicts as the full parse."""

import chz
import pytest

from tbconsole.runner import optionkeys
from tbconsole.runner.optionkeys import OptionsError, check_keys
from tbconsole.runner.options import TrainArgs, blueprint, parse

GOOD = [
    "config.model_name=m",
    "config.learning_rate=1e-5",
    "config.max_tokens=64",
    "config.log_path=/nonexistent/run",
    "config.dataset_builder.tasks_dir=/nonexistent",
    "harbor.trial_config=trial.json",
]


def _chz_view():
    """What chz itself finds on TrainArgs with the recipe's defaults: every key, and the missing ones."""
    made = blueprint()._make_lazy()
    return made.all_params, made.missing_params


def test_the_light_schema_is_the_real_cookbook_config():
    params, missing = _chz_view()
    real = [key.removeprefix("config.") for key in params if key.startswith("config.")]
    literal = "COOKBOOK_KEYS = (\n" + "".join(f'    "{key}",\n' for key in real) + ")"
    assert list(optionkeys.COOKBOOK_KEYS) == real, f"the cookbook's Config changed; in optionkeys.py:\n{literal}"
    required = tuple(key.removeprefix("config.") for key in missing if key.startswith("config."))
    assert optionkeys.COOKBOOK_REQUIRED == required


def test_every_section_is_read_from_the_class_chz_reads():
    params, missing = _chz_view()
    sections = {key for key in params if key and "." not in key}
    assert sections == {"config", *optionkeys.SECTIONS} == set(chz.chz_fields(TrainArgs))
    light: dict[str, bool] = {}
    for section in sections:
        light.update(optionkeys.section_keys(section))
    real = {key for key in params if "." in key}
    assert set(light) == real
    assert {key for key, required in light.items() if required} == set(missing)


@pytest.mark.parametrize(
    "extra, says",
    [
        (["config.lernrate=1"], "config.lernrate does not exist; did you mean config.learning_rate?"),
        (["conifg.model_name=x"], "did you mean config.model_name?"),
        (["config.group_size=4"], "did you mean config.dataset_builder.group_size?"),
        (["harbor.trial_conifg=t.json"], "did you mean harbor.trial_config?"),
        (["advise.kl_maxx=1"], "did you mean advise.kl_max?"),
        (["ledger.skip_afer=1"], "did you mean ledger.skip_after?"),
        (["nope=1"], "nope does not exist"),
        (["config.rollout_error_tolerance=True"], "set by the recipe"),
        (["learning_rate"], "not KEY=VALUE"),
    ],
)
def test_a_bad_key_is_refused_before_the_imports_as_the_parse_refuses_it(extra, says):
    with pytest.raises(OptionsError) as light:
        check_keys(GOOD + extra)
    assert says in str(light.value) and "\n" not in str(light.value)
    with pytest.raises(OptionsError):
        parse(GOOD + extra)


def test_missing_required_keys_are_named_and_the_commands_own_defaults_count():
    with pytest.raises(OptionsError, match=r"parameter\(s\): config.learning_rate, harbor.trial_config \("):
        check_keys([a for a in GOOD if not a.startswith(("config.learning_rate", "harbor.trial_config"))])
    check_keys(GOOD[1:], {"config.model_name": "m"})  # the demo fills some in


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["config.kl_reference_config.base_model=m", "config.termination.zero_reward_on_limit=true"],
        ["advise.kl_max=0.1", "ledger.skip_after=2", "harbor.notify=true"],
        ["config.loss_fn_config.clip=0.2"],  # below an option that is not a class: chz decides
        ["...max_steps=3"],  # a chz wildcard: chz decides
    ],
)
def test_what_chz_may_accept_is_never_refused_here(extra):
    assert check_keys(GOOD + extra) == {a.split("=", 1)[0] for a in GOOD + extra}
