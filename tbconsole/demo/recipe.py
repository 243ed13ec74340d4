"""`tbconsole demo [KEY=VALUE…]`: the recipe on the embedded default — the local engine in
process, the local sandbox and mini-swe-agent from this project's own environment (no install
step in the sandbox). Any recipe key can still be overridden.

By default the demo trains the warm-started policy (``tbconsole/qwen3-tiny-agent``, made by
``tbconsole warmup``) on generated task variants (``tbconsole.demo.variants``), and scores held-out
variants every ``config.eval_every`` batches: a run whose reward visibly rises. Pass
``config.dataset_builder.tasks_dir=…`` (for example the bundled tasks) to train on other tasks.

``tbconsole demo --multi-turn`` trains ``tbconsole/qwen3-tiny-agent-mt`` (warmed up on
two-turn demonstrations) on the two-command families instead: each trial looks up the file to
act on, then acts on it (``multi_turn_argv``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chz

from tbconsole.common.atomic import write_json
from tbconsole.demo import variants
from tbconsole.record.runfolder import EVENTS_FILE, LEASE_FILE, RunFolder
from tbconsole.runner.preflight import EMBEDDED, GENERATED_PREFIX, TASKS_KEY, value_of  # EMBEDDED: the local engine
from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX
from tbconsole.sandbox.namespace import BASE_PATH

DEMO_TRIAL_FILE = "demo-trial.json"
TRAIN_TASKS = f"{GENERATED_PREFIX}tasks"  # placeholders: generated variants in the run folder
HELDOUT_TASKS = f"{GENERATED_PREFIX}tasks-heldout"
MULTI_TURN_TASKS = f"{GENERATED_PREFIX}tasks-multi-turn"
MULTI_TURN_HELDOUT_TASKS = f"{GENERATED_PREFIX}tasks-multi-turn-heldout"
RUNS_DIR = Path("runs")  # where each demo gets its folder: runs/demo-<time>
RUN_PREFIX = "demo-"
# The demo trains on two families (each batch holds one group of each): with 8 trials a step,
# what one step can afford on 2 cores, a third family halves each family's signal per step.
DEMO_FAMILIES = ("count-lines", "sort-unique")
MULTI_TURN_FAMILIES = variants.MULTI_TURN_FAMILIES  # two of them: one group of each per batch
MULTI_TURN_MODEL = "tbconsole/qwen3-tiny-agent-mt"
MULTI_TURN_FLAG = "--multi-turn"
# What --multi-turn stands for: plain keys, so that a detached runner and a resume (which are
# started with the run's keys) run the same demo; the user's own keys come after and win.
MULTI_TURN_KEYS = {
    "config.model_name": MULTI_TURN_MODEL,
    "config.dataset_builder.tasks_dir": MULTI_TURN_TASKS,
    "harbor.eval_tasks_dir": MULTI_TURN_HELDOUT_TASKS,
}
# The placeholders a tasks folder may hold: the families generated there.
GENERATED = {
    TRAIN_TASKS: DEMO_FAMILIES,
    HELDOUT_TASKS: DEMO_FAMILIES,
    MULTI_TURN_TASKS: MULTI_TURN_FAMILIES,
    MULTI_TURN_HELDOUT_TASKS: MULTI_TURN_FAMILIES,
}
HELDOUT_VARIANTS = 4  # two per family, each scored eval_group_size times
DEMO_STEP_LIMIT = 1  # the variants are one-command tasks: one model call per trial
# The two-command families take two calls (look up, then act and submit); a third leaves room
# for a second look-up without letting a lost trial run on.
MULTI_TURN_STEP_LIMIT = 3
OTHER_TASKS_STEP_LIMIT = 4  # model calls per trial when the demo runs on other tasks
# The seed's own sampling temperature. At 1.0 the policy now and then samples a very unlikely
# token (a wrong file name, a line break inside the command); such a failed reply pushes down
# the shared ending (` && echo COMPLETE…`, the tool-call tags) in a context where it is not yet
# certain, and a few of those can break the format for every task.
DEMO_TEMPERATURE = 0.8
# A KL penalty against the starting policy is the other half of that guard: without it some
# 20-step runs lost the tool-call format for good (docs/learning.md).
DEMO_KL_PENALTY = 0.05
RUN_MODEL = "<model_name>"  # placeholder: the KL reference is the run's own starting model

DEMO_DEFAULTS = {
    "config.model_name": "tbconsole/qwen3-tiny-agent",
    "config.base_url": EMBEDDED,
    "config.learning_rate": 6e-4,
    "config.max_tokens": 128,
    "config.loss_fn": "ppo",
    "config.lora_rank": 32,
    "config.log_path": "runs/demo",  # replaced per run by demo_defaults(): runs/demo-<time>
    "config.max_steps": 20,
    "config.save_every": 10,
    "config.eval_every": 20,
    "config.num_groups_to_log": 0,
    "config.kl_penalty_coef": DEMO_KL_PENALTY,
    "config.kl_reference_config.base_model": RUN_MODEL,
    "config.dataset_builder.tasks_dir": TRAIN_TASKS,
    "config.dataset_builder.groups_per_batch": 2,
    "config.dataset_builder.group_size": 4,
    "harbor.trial_config": f"{GENERATED_PREFIX}{DEMO_TRIAL_FILE}",
    "harbor.eval_tasks_dir": HELDOUT_TASKS,
}


def demo_defaults() -> dict:
    """Each demo gets its own run folder (pass config.log_path=… to resume one)."""
    import time

    return {**DEMO_DEFAULTS, "config.log_path": str(RUNS_DIR / time.strftime(f"{RUN_PREFIX}%Y%m%d-%H%M%S"))}


def multi_turn_argv(argv: list[str]) -> list[str]:
    """``--multi-turn`` (anywhere before a ``--`` that ends the flags) as the keys it stands for."""
    if MULTI_TURN_FLAG not in argv:
        return argv
    rest = [a for a in argv if a != MULTI_TURN_FLAG]
    return [f"{key}={value}" for key, value in MULTI_TURN_KEYS.items()] + rest


def step_limit_for(families: tuple[str, ...]) -> int:
    """Model calls a trial of these generated families may take."""
    if any(variants.FAMILIES[f].lookup for f in families):
        return MULTI_TURN_STEP_LIMIT
    return DEMO_STEP_LIMIT


def demo_trial_config(max_tokens: int, step_limit: int = DEMO_STEP_LIMIT, context_window: int = 8192) -> dict:
    """mini-swe-agent run from this virtualenv inside the local sandbox, through the proxy."""
    venv = Path(sys.prefix)
    return {
        "agent": {
            "name": "mini-swe-agent",
            "model_name": "openai/policy",
            "override_timeout_sec": 300,
            "env": {
                "OPENAI_BASE_URL": "{proxy_url}/v1",
                "OPENAI_API_KEY": "{proxy_api_key}",
                "MSWEA_COST_TRACKING": "ignore_errors",
                # The sandbox has no network: without this litellm retries its cost-map download
                # for ~8 s in every trial before the agent's first call.
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PATH": f"{venv / 'bin'}:{BASE_PATH}",
            },
            "kwargs": {
                "max_tokens": max_tokens,
                "max_seq_len": context_window,
                "skip_install": True,
                "config": {
                    "agent": {"step_limit": step_limit},
                    "model": {"model_kwargs": {"temperature": DEMO_TEMPERATURE}},
                },
            },
        },
        "environment": {"import_path": LOCAL_SANDBOX, "kwargs": {"host_paths": [str(venv)]}},
    }


def check_local_model(base_url: str | None, model_name: str | None) -> None:
    """The embedded engine serves only the local models (OptionsError otherwise)."""
    from tbconsole.engine.registry import MODELS
    from tbconsole.runner.optionkeys import OptionsError

    if base_url == EMBEDDED and model_name is not None and model_name.split(":", 1)[0] not in MODELS:
        raise OptionsError(
            f"config.model_name={model_name!r} is not a local model: with config.base_url={EMBEDDED} "
            f"use one of {', '.join(MODELS)}, or name a gateway that serves it (config.base_url=http://…)"
        )


def precheck(keys: list[str], defaults: Mapping[str, Any]) -> None:
    """The demo's own usage errors that need no import of the cookbook (before the gateway)."""
    check_local_model(value_of(keys, defaults, "config.base_url"), value_of(keys, defaults, "config.model_name"))


def generated_trial_config(args) -> dict | None:
    """The trial.json the demo writes into the run folder, or None when harbor.trial_config names
    the user's own."""
    if args.harbor.trial_config != DEMO_DEFAULTS["harbor.trial_config"]:
        return None
    own = GENERATED.get(args.config.dataset_builder.tasks_dir)
    return demo_trial_config(args.config.max_tokens, step_limit_for(own) if own else OTHER_TASKS_STEP_LIMIT)


def check(parsed) -> None:
    """The demo's generated trial.json, checked as Harbor will check it, before anything is
    written (OptionsError: e.g. the agent is not installed in this environment)."""
    from tbconsole.runner.optionkeys import OptionsError
    from tbconsole.runner.trials import TrialConfigError, make_template

    raw = generated_trial_config(parsed.args)
    if raw is None:
        return
    try:
        make_template(raw, f"the demo's {DEMO_TRIAL_FILE}")
    except TrialConfigError as exc:
        raise OptionsError(str(exc)) from None


def materialize(parsed):
    """Write what the demo's defaults point at into the run folder: the trial.json and the
    generated task variants (train and held-out). Options the user set are left alone."""
    args = parsed.args
    check_local_model(args.config.base_url, args.config.model_name)
    reference = args.config.kl_reference_config
    if reference is not None and reference.base_model == RUN_MODEL:
        args = chz.replace(
            args,
            config=chz.replace(
                args.config, kl_reference_config=chz.replace(reference, base_model=args.config.model_name)
            ),
        )
    log_path = Path(args.config.log_path)
    harbor, builder = args.harbor, args.config.dataset_builder
    trial_config = generated_trial_config(args)
    if trial_config is not None:
        path = log_path / DEMO_TRIAL_FILE
        write_json(path, trial_config)
        harbor = chz.replace(harbor, trial_config=str(path))
    if builder.tasks_dir in (TRAIN_TASKS, MULTI_TURN_TASKS):
        groups = (args.config.max_steps or 20) * builder.groups_per_batch
        dest = log_path / builder.tasks_dir.removeprefix(GENERATED_PREFIX)
        families = GENERATED[builder.tasks_dir]
        for order, variant in enumerate(variants.sample_variants("train", max(groups, 2), seed=0, families=families)):
            # Folders load in sorted order: the prefix keeps the families interleaved.
            variants.write_task(variant, dest, folder=f"{order:03d}-{variant.name}")
        builder = chz.replace(builder, tasks_dir=str(dest))
    if harbor.eval_tasks_dir in (HELDOUT_TASKS, MULTI_TURN_HELDOUT_TASKS):
        families = GENERATED[harbor.eval_tasks_dir]
        dest = log_path / harbor.eval_tasks_dir.removeprefix(GENERATED_PREFIX)
        variants.write_taskset(dest, variants.sample_variants("heldout", HELDOUT_VARIANTS, seed=0, families=families))
        harbor = chz.replace(harbor, eval_tasks_dir=str(dest))
    parsed.args = chz.replace(args, harbor=harbor, config=chz.replace(args.config, dataset_builder=builder))
    return parsed


# -- rerunning `tbconsole demo` goes on with the demo it stopped ------------------------------------


@dataclass(frozen=True)
class Resumable:
    path: Path
    step: int  # the step it goes on at: its last checkpoint's (0: none yet)


def kind_of(keys: list[str] | tuple[str, ...]) -> str:
    """Which demo a command line runs: the tasks it trains on (the one-command variants, the
    two-command ones of --multi-turn, or the user's own folder)."""
    return value_of(list(keys), DEMO_DEFAULTS, TASKS_KEY) or ""


def resumable_run(runs_dir: Path, kind: str) -> Resumable | None:
    """The run a plain rerun of `tbconsole demo` goes on with: the newest demo folder under
    ``runs_dir`` of this kind (by its last event), when it ended before its last step (stopped,
    aborted, failed, or its runner died) and nobody runs it. None: start a new one (the newest
    finished, or there is none)."""
    from tbconsole.record.enums import RunnerState, RunStatus
    from tbconsole.record.lease import read_lease
    from tbconsole.runs.runlist import read_run, steps_trained

    newest = None
    for folder in runs_dir.glob(f"{RUN_PREFIX}*"):
        lease = read_lease(folder)
        command = lease.command
        if len(command) < 2 or command[1] != "demo" or kind_of(command[2:]) != kind:
            continue  # not a demo this command started (no lease: not a run at all)
        seen = max((folder / name).stat().st_mtime for name in (EVENTS_FILE, LEASE_FILE) if (folder / name).exists())
        if newest is None or seen > newest[0]:
            newest = (seen, folder, lease)
    if newest is None:
        return None
    _, folder, lease = newest
    if lease.state is RunnerState.LIVE:
        return None
    if (folder / EVENTS_FILE).exists():
        state = read_run(folder).state
        if state.end_status == RunStatus.DONE or (state.total_steps and steps_trained(state) >= state.total_steps):
            return None
    return Resumable(folder, last_checkpoint_step(folder))


def last_checkpoint_step(folder: Path) -> int:
    """The batch the cookbook resumes ``folder`` at: its last full checkpoint's (0: none)."""
    step = 0
    with contextlib.suppress(OSError):
        for line in (folder / "checkpoints.jsonl").read_text().splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if isinstance(row, dict) and row.get("state_path") and isinstance(row.get("batch"), int):
                    step = row["batch"]
    return step


@contextlib.asynccontextmanager
async def embedded_engine(parsed):
    """Start the local engine for the run when config.base_url is left at 'embedded'."""
    args = parsed.args
    if args.config.base_url != EMBEDDED:
        yield parsed
        return
    from tbconsole.engine.embedded import EmbeddedEngine

    model = args.config.model_name.split(":", 1)[0]  # checked by materialize()
    engine = EmbeddedEngine(data_dir=str(RunFolder(args.config.log_path).engine), model=model)
    engine.start()
    try:
        os.environ.setdefault("TINKER_API_KEY", engine.api_key)
        parsed.args = chz.replace(args, config=chz.replace(args.config, base_url=engine.base_url))
        yield parsed
    finally:
        engine.stop()
