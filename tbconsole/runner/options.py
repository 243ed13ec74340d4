"""The recipe's command line: ``config.*`` (the cookbook's ``rl.train.Config``, native names and
defaults) and ``harbor.*`` — the same ``KEY=VALUE`` arguments as ``python -m tinker_agent.train`` —
plus tbconsole's own ``advise.*`` (the advisories' thresholds, ``tbconsole.advisories.thresholds``).

Parsed with chz, exactly as the cookbook's own entrypoints are, so every ``config.*`` field and
its ``--help`` listing come from the cookbook itself. The recipe's own rules are enforced here
with one readable message each (``OptionsError`` → exit 2, nothing started); the rules about the
keys alone live in ``tbconsole.runner.optionkeys``, which needs no cookbook and runs first.
"""

from __future__ import annotations

from dataclasses import dataclass

import chz
from tinker_cookbook.rl import train as rl_train

from tbconsole.advisories import Thresholds
from tbconsole.advisories import problems as threshold_problems
from tbconsole.runner.admission import LedgerOptions, options_problems
from tbconsole.runner.dataset import HarborDatasetBuilder
from tbconsole.runner.health import GatewayOptions
from tbconsole.runner.health import options_problems as gateway_problems
from tbconsole.runner.optionkeys import HarborOptions, OptionsError, check_keys  # the light sections and rules

RECIPE_NAME = "tbconsole_terminal_bench"
BLUEPRINT_ERRORS = (
    chz.blueprint.ExtraneousBlueprintArg,
    chz.blueprint.InvalidBlueprintArg,
    chz.blueprint.MissingBlueprintArg,
    chz.blueprint.ConstructionException,
)


@chz.chz
class TrainArgs:
    config: rl_train.Config
    harbor: HarborOptions
    # Not in the upstream recipe: the advisories' thresholds (advise.kl_max=0.02, advise.off=disk).
    advise: Thresholds = chz.field(default_factory=Thresholds)
    # Not in the upstream recipe: the difficulty ledger's family rule and skip policy
    # (ledger.skip_after=3 ledger.skip_steps=10; runner.admission).
    ledger: LedgerOptions = chz.field(default_factory=LedgerOptions)
    # Not in the upstream recipe: how long a starting gateway is waited for and how long an
    # outage is ridden out (gateway.start_timeout=1800 gateway.outage_limit=600; runner.health).
    gateway: GatewayOptions = chz.field(default_factory=GatewayOptions)


DEFAULTS = {
    "config.dataset_builder": HarborDatasetBuilder,
    "config.recipe_name": RECIPE_NAME,
}


@dataclass
class ParsedArgs:
    args: TrainArgs
    explicit: set[str]  # keys the user gave


def blueprint(extra_defaults: dict | None = None) -> chz.Blueprint:
    return chz.Blueprint(TrainArgs).apply({**DEFAULTS, **(extra_defaults or {})}, layer_name="tbconsole defaults")


def help_text(extra_defaults: dict | None = None) -> str:
    try:
        blueprint(extra_defaults).make_from_argv(["--help"])
    except chz.blueprint.EntrypointHelpException as exc:
        return str(exc).split("\n", 2)[-1] if str(exc).startswith("WARNING") else str(exc)
    return ""


def parse(argv: list[str], extra_defaults: dict | None = None) -> ParsedArgs:
    """KEY=VALUE arguments → TrainArgs with the recipe's rules applied."""
    explicit = check_keys(argv, extra_defaults)  # the keys' own rules, shared with the check before the imports
    try:
        args = blueprint(extra_defaults).make_from_argv(argv)
    except BLUEPRINT_ERRORS as exc:
        raise OptionsError(_first_paragraph(str(exc))) from None
    except (TypeError, ValueError) as exc:
        raise OptionsError(str(exc)) from None
    check(args)
    return ParsedArgs(args=args, explicit=explicit)


def _first_paragraph(message: str) -> str:
    lines = [line for line in message.strip().splitlines() if line.strip()]
    text = "\n".join(lines[:6])
    if "--help" not in text:
        text += "\nRun with --help to list every option."
    return text


def check(args: TrainArgs) -> None:
    config = args.config
    if config.temperature != 1.0:
        raise OptionsError(
            f"config.temperature must stay 1.0 (got {config.temperature}). The agent issues its "
            "own sampling requests, so set the sampling temperature in trial.json "
            "(agent.kwargs.config.model.model_kwargs.temperature)."
        )
    if config.max_tokens <= 0:
        raise OptionsError("config.max_tokens must be a positive number of tokens.")
    if config.learning_rate < 0:
        raise OptionsError("config.learning_rate must not be negative.")
    builder = config.dataset_builder
    if not isinstance(builder, HarborDatasetBuilder):
        raise OptionsError(
            "config.dataset_builder is the recipe's Harbor task dataset; set its "
            "fields (config.dataset_builder.tasks_dir=…) rather than replacing it."
        )
    for name in ("groups_per_batch", "group_size", "epochs"):
        if getattr(builder, name) < 1:
            raise OptionsError(f"config.dataset_builder.{name} must be at least 1.")
    if args.harbor.max_parallel_trials_per_group < 1:
        raise OptionsError("harbor.max_parallel_trials_per_group must be at least 1.")
    if args.harbor.eval_group_size < 1:
        raise OptionsError("harbor.eval_group_size must be at least 1.")
    if args.config.kl_penalty_coef > 0 and args.config.kl_reference_config is None:
        raise OptionsError(
            "config.kl_penalty_coef > 0 needs a reference model: set "
            "config.kl_reference_config.base_model (for example the same model as "
            "config.model_name)."
        )
    bad_thresholds = threshold_problems(args.advise)
    if bad_thresholds:
        raise OptionsError("; ".join(bad_thresholds) + " (see docs/advisories.md, Options).")
    bad_gateway = gateway_problems(args.gateway)
    if bad_gateway:
        raise OptionsError("; ".join(bad_gateway) + " (see docs/gateways.md).")
    bad_ledger = options_problems(args.ledger)
    if bad_ledger:
        raise OptionsError("; ".join(bad_ledger) + " (see docs/ledger.md).")
    stream = config.stream_minibatch_config
    if config.async_config is not None:
        bad = async_problems(config.async_config, stream is not None, builder.groups_per_batch)
        if bad:
            raise OptionsError(bad)
    if stream is not None:
        batch_groups = getattr(config.dataset_builder, "groups_per_batch", stream.groups_per_batch)
        bad = stream_problems(stream.groups_per_batch, stream.num_minibatches, config.num_substeps, batch_groups)
        if bad:
            raise OptionsError(bad)


def async_problems(async_config, streaming: bool, batch_groups: int) -> str | None:
    """What is wrong with config.async_config, said before anything starts."""
    key = "config.async_config"
    if streaming:
        return (f"Choose one way to overlap sampling and training: {key} (off-policy) or "
                "config.stream_minibatch_config (on-policy), not both.")  # fmt: skip
    if async_config.max_steps_off_policy < 0:
        return f"{key}.max_steps_off_policy must be 0 or more updates (got {async_config.max_steps_off_policy})."
    if async_config.groups_per_batch != batch_groups:
        return (f"{key}.groups_per_batch={async_config.groups_per_batch} must equal "
                f"config.dataset_builder.groups_per_batch={batch_groups}: an update trains as many groups "
                "as a batch draws, so every drawn group trains once (or is dropped, and said so).")  # fmt: skip
    return None


def stream_problems(groups: int, minibatches: int, substeps: int, batch_groups: int) -> str | None:
    """What is wrong with config.stream_minibatch_config, said before anything starts (the
    cookbook would assert mid-run, or wait for groups a batch never has)."""
    key = "config.stream_minibatch_config"
    if groups != batch_groups:
        return (f"{key}.groups_per_batch={groups} must equal config.dataset_builder.groups_per_batch="
                f"{batch_groups}: the stream trains on the batch's groups.")  # fmt: skip
    if minibatches < 1 or substeps < 1 or groups % substeps or (groups // substeps) % minibatches:
        return (f"{key}: groups_per_batch={groups} must split evenly into config.num_substeps={substeps} "
                f"substeps of {key}.num_minibatches={minibatches} minibatches each.")  # fmt: skip
    return None


def resolve_renderer_name(config: rl_train.Config) -> str:
    """config.renderer_name, or the cookbook's recommendation for config.model_name."""
    if config.renderer_name:
        return config.renderer_name
    from tinker_cookbook import model_info

    try:
        return model_info.get_recommended_renderer_name(config.model_name)
    except Exception:  # the cookbook raises different types for unknown models
        raise OptionsError(
            f"No recommended renderer is known for model {config.model_name!r}; "
            "set config.renderer_name (e.g. qwen3_5)."
        ) from None
