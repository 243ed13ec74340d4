"""Run one Harbor trial and describe what happened — the smoke test before a training run.

Used by ``tbconsole trial``. Defaults: the local sandbox and the oracle agent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX

PhaseCallback = Callable[[str], Awaitable[None]]


class TrialConfigError(ValueError):
    """The trial configuration is unusable; the message says how to fix it."""


def read_trial_json(path: Path, label: str = "Trial config") -> dict[str, Any]:
    """A trial.json as a dict: a Harbor TrialConfig without ``task`` (errors: TrialConfigError)."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise TrialConfigError(f"{label} {path} does not exist.") from None
    except (OSError, ValueError) as exc:
        raise TrialConfigError(f"{label} {path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise TrialConfigError(f"{label} {path} must be a JSON object (a Harbor TrialConfig without 'task').")
    if "task" in raw:
        raise TrialConfigError(f"{label} {path} sets 'task'; leave it out — the task is given separately.")
    return raw


def load_trial_config(path: Path, substitutions: dict[str, str] | None = None) -> dict[str, Any]:
    """Read a trial.json, substituting placeholders.

    ``{proxy_url}`` / ``{proxy_api_key}`` and any other ``{name}`` in ``substitutions`` are
    replaced in every string value; a placeholder with no value is an error, not a silent
    literal.
    """
    return substitute(read_trial_json(path), substitutions or {}, source=str(path))


def substitute(value: Any, substitutions: dict[str, str], *, source: str) -> Any:
    if isinstance(value, dict):
        return {k: substitute(v, substitutions, source=source) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, substitutions, source=source) for v in value]
    if isinstance(value, str):
        for name in ("proxy_url", "proxy_api_key"):
            token = "{" + name + "}"
            if token in value and name not in substitutions:
                raise TrialConfigError(
                    f"{source} uses {token} but no value was given for it "
                    f"(tbconsole trial: pass --{name.replace('_', '-')})."
                )
        for name, replacement in substitutions.items():
            value = value.replace("{" + name + "}", replacement)
    return value


def build_trial_config(
    task_dir: Path,
    *,
    agent: str | None = None,
    trial_config: dict[str, Any] | None = None,
    trials_dir: Path | None = None,
):
    """A harbor TrialConfig for one task. Environment defaults to the local sandbox."""
    from harbor.models.trial.config import TrialConfig
    from pydantic import ValidationError

    data = dict(trial_config or {})
    environment = dict(data.get("environment") or {})
    if not environment.get("type") and not environment.get("import_path"):
        environment["import_path"] = LOCAL_SANDBOX
    data["environment"] = environment
    agent_section = dict(data.get("agent") or {})
    if agent is not None:
        agent_section["name"] = agent
        agent_section.pop("import_path", None)
    if "import_path" not in agent_section:
        agent_section.setdefault("name", "oracle")
    data["agent"] = agent_section
    if trials_dir is not None:
        data["trials_dir"] = str(trials_dir)
    data["task"] = {"path": str(task_dir)}
    try:
        return TrialConfig.model_validate(data)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise TrialConfigError(f"Invalid trial config: {details}") from None


@dataclass
class TrialSummary:
    task: str
    trial_name: str
    trial_dir: Path
    outcome: str
    reward: float | None
    rewards: dict[str, float]
    exception: str | None
    timings: dict[str, float]

    @property
    def ok(self) -> bool:
        return self.exception is None and self.reward is not None

    def lines(self) -> list[str]:
        reward = "—" if self.reward is None else f"{self.reward:g}"
        out = [
            f"task      {self.task}",
            f"outcome   {self.outcome}",
            f"reward    {reward}",
        ]
        if self.exception:
            out.append(f"error     {self.exception}")
        timing = "  ".join(f"{name} {secs:.1f}s" for name, secs in self.timings.items())
        out += [f"timings   {timing}", f"trial dir {self.trial_dir}"]
        return out


def _seconds(timing) -> float | None:
    if timing is None or timing.started_at is None or timing.finished_at is None:
        return None
    return (timing.finished_at - timing.started_at).total_seconds()


def summarize(result, reward_key: str = "reward") -> TrialSummary:
    rewards = dict((result.verifier_result.rewards or {}) if result.verifier_result else {})
    reward = rewards.get(reward_key)
    if reward is not None and not math.isfinite(float(reward)):
        reward = None
    exc = result.exception_info
    if exc is not None:
        outcome = exc.exception_type
    elif reward is None:
        outcome = "NoReward"
    else:
        outcome = "Completed"
    timings = {
        name: secs
        for name, secs in (
            ("environment", _seconds(result.environment_setup)),
            ("agent_setup", _seconds(result.agent_setup)),
            ("agent", _seconds(result.agent_execution)),
            ("verifier", _seconds(result.verifier)),
        )
        if secs is not None
    }
    if result.started_at and result.finished_at:
        timings["total"] = (result.finished_at - result.started_at).total_seconds()
    trial_dir = Path(result.config.trials_dir) / result.trial_name
    return TrialSummary(
        task=result.task_name,
        trial_name=result.trial_name,
        trial_dir=trial_dir,
        outcome=outcome,
        reward=None if reward is None else float(reward),
        rewards={k: float(v) for k, v in rewards.items()},
        exception=None if exc is None else f"{exc.exception_type}: {exc.exception_message}".strip(),
        timings=timings,
    )


async def run_trial(config, on_phase: PhaseCallback | None = None, reward_key: str = "reward") -> TrialSummary:
    """Run a harbor TrialConfig to the end and summarize it."""
    from harbor.trial.hooks import TrialEvent
    from harbor.trial.trial import Trial

    trial = await Trial.create(config)
    if on_phase is not None:
        for event in TrialEvent:
            async def hook(_event, name=event.value):
                await on_phase(name)

            trial.add_hook(event, hook)
    result = await trial.run()
    return summarize(result, reward_key)


def now() -> str:
    return datetime.now().strftime("%H:%M:%S")
