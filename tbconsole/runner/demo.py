"""`tbconsole demo [KEY=VALUE…]`: the recipe on the embedded default — the local engine in
process, the bundled tasks, the local sandbox and mini-swe-agent from this project's own
environment (no install step in the sandbox). Any recipe key can still be overridden.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import chz

from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX
from tbconsole.sandbox.namespace import BASE_PATH
from tbconsole.taskset import BUNDLED_TASKS_DIR

EMBEDDED = "embedded"  # config.base_url placeholder: replaced by the local engine's URL
DEMO_TRIAL_FILE = "demo-trial.json"

DEMO_DEFAULTS = {
    "config.model_name": "tbconsole/qwen3-tiny",
    "config.base_url": EMBEDDED,
    "config.learning_rate": 1e-4,
    "config.max_tokens": 256,
    "config.loss_fn": "ppo",
    "config.lora_rank": 8,
    "config.log_path": "runs/demo",  # replaced per run by demo_defaults(): runs/demo-<time>
    "config.max_steps": 2,
    "config.save_every": 1,
    "config.eval_every": 0,
    "config.num_groups_to_log": 0,
    "config.dataset_builder.tasks_dir": str(BUNDLED_TASKS_DIR),
    "config.dataset_builder.groups_per_batch": 2,
    "config.dataset_builder.group_size": 4,
    "harbor.trial_config": f"<log_path>/{DEMO_TRIAL_FILE}",
}


def demo_defaults() -> dict:
    """Each demo gets its own run folder (pass config.log_path=… to resume one)."""
    import time

    return {**DEMO_DEFAULTS, "config.log_path": time.strftime("runs/demo-%Y%m%d-%H%M%S")}


def demo_trial_config(max_tokens: int, step_limit: int = 4, context_window: int = 8192) -> dict:
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
                "PATH": f"{venv / 'bin'}:{BASE_PATH}",
            },
            "kwargs": {
                "max_tokens": max_tokens,
                "max_seq_len": context_window,
                "skip_install": True,
                "config": {"agent": {"step_limit": step_limit},
                           "model": {"model_kwargs": {"temperature": 1.0}}},
            },
        },
        "environment": {"import_path": LOCAL_SANDBOX, "kwargs": {"host_paths": [str(venv)]}},
    }


def materialize(parsed):
    """Write the demo's trial.json into the run folder (unless the user gave their own)."""
    args = parsed.args
    if args.harbor.trial_config != DEMO_DEFAULTS["harbor.trial_config"]:
        return parsed
    path = Path(args.config.log_path) / DEMO_TRIAL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(demo_trial_config(args.config.max_tokens), indent=2) + "\n")
    tmp.replace(path)
    parsed.args = chz.replace(args, harbor=chz.replace(args.harbor, trial_config=str(path)))
    return parsed


@contextlib.asynccontextmanager
async def embedded_engine(parsed):
    """Start the local engine for the run when config.base_url is left at 'embedded'."""
    args = parsed.args
    if args.config.base_url != EMBEDDED:
        yield parsed
        return
    from tbconsole.engine.embedded import EmbeddedEngine

    engine = EmbeddedEngine(data_dir=str(Path(args.config.log_path) / "engine"))
    engine.start()
    try:
        import os

        os.environ.setdefault("TINKER_API_KEY", engine.api_key)
        parsed.args = chz.replace(args, config=chz.replace(args.config, base_url=engine.base_url))
        yield parsed
    finally:
        engine.stop()
