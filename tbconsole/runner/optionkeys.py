"""The recipe's command-line keys, known without importing the cookbook: a misspelt, missing or
forbidden key is a usage error said in a fraction of a second, before the cookbook and torch load
(seconds) and before the gateway is probed.

``config.*`` is the cookbook's ``rl.train.Config`` (with the recipe's dataset builder): its keys
are written out here (``COOKBOOK_KEYS``, ``COOKBOOK_REQUIRED``), and a unit test checks them
against what chz finds on the real Config, so they cannot drift. The recipe's own sections
(``harbor.*``, ``advise.*``, ``ledger.*``, ``gateway.*``) are read from their classes.

A key is refused here only when chz would refuse it too; what this cannot tell (a value's type,
a key under an option given a class of its own, chz wildcards) is left to chz
(``tbconsole.runner.options.parse``, after the imports).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import chz

HELP_HINT = "--help lists every option"
WILDCARD = "..."
FORBIDDEN_KEY = "config.rollout_error_tolerance"


class OptionsError(ValueError):
    """A bad key or value on the command line. The message says what to do."""


@chz.chz
class HarborOptions:
    trial_config: str  # path to trial.json: a Harbor TrialConfig without `task`
    reward_key: str = "reward"  # key in the verifier's rewards used as the trial reward
    listen_host: str = "127.0.0.1"  # address the proxy binds to (0.0.0.0 for remote sandboxes)
    advertised_host: str = "127.0.0.1"  # address placed in {proxy_url}; sandboxes must reach it
    max_parallel_trials_per_group: int = 4
    # Not in the upstream recipe: a folder of held-out Harbor tasks scored with the current
    # policy every config.eval_every batches and after the last (metrics eval/heldout/*).
    eval_tasks_dir: str | None = None
    eval_group_size: int = 2  # trials per held-out task
    # Not in the upstream recipe: keep each turn's sampled tokens, as sampled, in the trial's later
    # prompts (tbconsole.proxy.continuity), so that a multi-turn trial trains as one datum instead of
    # one datum per turn. false: prompts are the renderer's own rendering of the agent's messages.
    token_continuity: bool = True
    # Not in the upstream recipe: a shell command run with a short JSON on stdin when the run needs
    # a decision, ends, or raises an error advisory (tbconsole.record.notify); `--notify CMD` sets it too.
    notify: str | None = None


# The keys chz finds under ``config`` (tinker_cookbook.rl.train.Config, config.dataset_builder
# being the recipe's HarborDatasetBuilder), in its order; checked by tests/runner/test_optionkeys.py.
COOKBOOK_KEYS = (
    "learning_rate",
    "dataset_builder",
    "dataset_builder.tasks_dir",
    "dataset_builder.groups_per_batch",
    "dataset_builder.group_size",
    "dataset_builder.epochs",
    "model_name",
    "recipe_name",
    "max_tokens",
    "log_path",
    "eval_every",
    "save_every",
    "evaluator_builders",
    "load_checkpoint_path",
    "renderer_name",
    "wandb_project",
    "wandb_name",
    "session_name",
    "kl_penalty_coef",
    "kl_discount_factor",
    "kl_reference_config",
    "kl_reference_config.base_model",
    "kl_reference_config.load_checkpoint_path",
    "loss_fn",
    "loss_fn_config",
    "num_substeps",
    "lora_rank",
    "temperature",
    "compute_post_kl",
    "remove_constant_reward_groups",
    "rollout_error_tolerance",
    "termination",
    "termination.zero_reward_on_limit",
    "termination.limit_stop_reasons",
    "termination.skip_grading_on_timeout",
    "termination.grader_timeout_seconds",
    "termination.pass_all_messages_to_grader",
    "enable_trace",
    "span_chart_every",
    "async_config",
    "async_config.max_steps_off_policy",
    "async_config.groups_per_batch",
    "stream_minibatch_config",
    "stream_minibatch_config.groups_per_batch",
    "stream_minibatch_config.num_minibatches",
    "base_url",
    "ttl_seconds",
    "rolling_save_every",
    "rolling_ttl_seconds",
    "num_groups_to_log",
    "rollout_json_export",
    "max_steps",
)
# Those without a default (given nothing else), in chz's order.
COOKBOOK_REQUIRED = ("learning_rate", "dataset_builder.tasks_dir", "model_name", "max_tokens", "log_path")


def _thresholds() -> type:
    from tbconsole.advisories import Thresholds

    return Thresholds


def _ledger() -> type:
    from tbconsole.runner.admission import LedgerOptions

    return LedgerOptions


def _gateway() -> type:
    from tbconsole.runner.health import GatewayOptions

    return GatewayOptions


# TrainArgs' sections besides ``config``, each read from its class (imported only when asked about).
SECTIONS: dict[str, Callable[[], type]] = {
    "harbor": lambda: HarborOptions,
    "advise": _thresholds,
    "ledger": _ledger,
    "gateway": _gateway,
}


def fields_of(cls: type) -> dict[str, bool]:
    """A chz class's (or dataclass's) options: name → required (no default)."""
    parameters = inspect.signature(cls).parameters.values()
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {p.name: p.default is inspect.Parameter.empty for p in parameters if p.kind in named}


def section_keys(section: str) -> dict[str, bool]:
    """The keys of one of TrainArgs' sections (``config``, ``harbor``, …): full key → required."""
    if section == "config":
        return {f"config.{key}": key in COOKBOOK_REQUIRED for key in COOKBOOK_KEYS}
    return {f"{section}.{name}": required for name, required in fields_of(SECTIONS[section]()).items()}


def explicit_keys(argv: Iterable[str]) -> set[str]:
    """The keys of KEY=VALUE arguments; one that is not KEY=VALUE: OptionsError."""
    keys = set()
    for item in argv:
        if "=" not in item or item.startswith("="):
            raise OptionsError(
                f"'{item}' is not KEY=VALUE. Arguments look like config.learning_rate=1e-5 "
                f"or harbor.trial_config=trial.json ({HELP_HINT})."
            )
        keys.add(item.split("=", 1)[0])
    return keys


def check_keys(argv: Iterable[str], defaults: Mapping[str, Any] | None = None) -> set[str]:
    """Every rule about the keys themselves (``OptionsError``, the message says what to do);
    returns the keys given. ``defaults``: the keys the command fills in itself (the demo's)."""
    given = explicit_keys(argv)
    if any(key == FORBIDDEN_KEY or key.startswith(FORBIDDEN_KEY + ".") for key in given):
        raise OptionsError(
            f"{FORBIDDEN_KEY} is set by the recipe (Harbor trial outcomes decide "
            "what is scored and what stops the run); remove it from the command line."
        )
    plain = sorted(key for key in given if WILDCARD not in key)
    # advise.* and ledger.* are read from their modules only when the command line uses them.
    sections = {"config", "harbor"} | {key.split(".", 1)[0] for key in plain if key.split(".", 1)[0] in SECTIONS}
    known: dict[str, bool] = {}
    for section in sorted(sections):
        known.update(section_keys(section))
    # Where every key below is known: the root, the sections, and options with keys of their own.
    containers = {"", "config", *SECTIONS} | {key.rsplit(".", 1)[0] for key in known if "." in key}
    for key in plain:
        if key in known or key in containers or any(_under(key, other) for other in given if other != key):
            continue  # an option given a class of its own (config.dataset_builder=…) takes its own keys
        parent = _longest_prefix(key, known.keys() | containers)
        if parent not in containers:
            continue  # a key below a plain option: chz says what is wrong with it
        hint = _did_you_mean(key, parent, [k for k in known if k not in containers], sorted(sections))
        raise OptionsError(f"{key} does not exist{hint} ({HELP_HINT})")
    if len(plain) < len(given):
        return given  # a wildcard (...learning_rate=…) may fill any of them: chz decides
    filled = given | set(defaults or ())
    missing = [
        key
        for key, required in known.items()
        if required and key not in filled and not any(_under(key, other) for other in given)
    ]
    if missing:
        raise OptionsError(f"Missing required arguments for parameter(s): {', '.join(missing)} ({HELP_HINT})")
    return given


def _did_you_mean(key: str, parent: str, options: list[str], sections: list[str]) -> str:
    """A hint: a key of the same name elsewhere (config.group_size), a sibling whose name is close
    to the unknown part (config.lernrate), or a key close as a whole (conifg.model_name)."""
    tail = (key[len(parent) + 1 :] if parent else key).split(".", 1)[0]
    elsewhere = [k for k in options if (k.rsplit(".", 1)[0] if "." in k else "") != parent]
    close = [k for k in elsewhere if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]][:1]
    if not close and parent:
        siblings = sorted({k[len(parent) + 1 :].split(".", 1)[0] for k in options if _under(k, parent)})
        close = [f"{parent}.{name}" for name in difflib.get_close_matches(tail, siblings, n=1)]
    close = close or difflib.get_close_matches(key, elsewhere, n=1, cutoff=0.8)
    close = close or ([] if parent else difflib.get_close_matches(tail, sections, n=1))
    return f"; did you mean {close[0]}?" if close else ""


def _under(key: str, prefix: str) -> bool:
    """Whether ``key`` lies below ``prefix`` (``config.a.b`` below ``config.a``)."""
    return key.startswith(prefix + ".")


def _longest_prefix(key: str, names: set[str]) -> str:
    """The longest of ``names`` that ``key`` lies below (``""``: none, the root)."""
    parts = key.split(".")
    for end in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in names:
            return prefix
    return ""
