"""Run one Harbor trial and describe what happened — the smoke test before a training run.

Used by ``tbconsole trial``. Defaults: the local sandbox and the oracle agent. The trial.json is
read and translated as training reads it (``runner.trials``), the trial runs through the
runner's Harbor driver (``runner.harbor_trial``) and its outcome is the training rule's
(``runner.outcomes.judge``), so a trial that passes here is scored the same way in a run. No
capture proxy runs here: what only the proxy can enforce (``max_seq_len``, the temperature) is
not applied, and the outcome rests on Harbor's result and the verifier's reward alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbconsole.common.formatting import format_seconds
from tbconsole.runner.harbor_trial import PhaseCallback, run_harbor_trial
from tbconsole.runner.outcomes import Outcome, judge
from tbconsole.runner.trials import TrialConfigError, TrialTemplate, load_template, make_template

__all__ = ["TrialConfigError", "TrialSummary", "build_trial_config", "load_trial_config", "run_trial"]

DEFAULT_AGENT = "oracle"
LABEL = "Trial config"  # how error messages name the --trial-config file


def load_trial_config(path: Path, substitutions: dict[str, str] | None = None) -> TrialTemplate:
    """Read a trial.json as training does (``runner.trials.load_template``) and fill its
    placeholders: ``{proxy_url}`` / ``{proxy_api_key}`` and any other ``{name}`` in
    ``substitutions``; a proxy placeholder with no value is an error, not a silent literal."""
    return load_template(path, LABEL).filled(substitutions or {})


def build_trial_config(
    task_dir: Path,
    *,
    agent: str | None = None,
    trial_config: TrialTemplate | dict[str, Any] | None = None,
    trials_dir: Path | None = None,
):
    """A Harbor TrialConfig for one trial of ``task_dir``. ``trial_config``: a loaded trial.json
    (``load_trial_config``) or its content as a dict; the environment defaults to the local
    sandbox, the agent to the oracle; ``agent`` replaces the trial config's."""
    if isinstance(trial_config, TrialTemplate):
        template = trial_config.with_agent(agent) if agent is not None else trial_config
    else:
        raw = dict(trial_config or {})
        section = {k: v for k, v in (raw.get("agent") or {}).items() if agent is None or k != "import_path"}
        if agent is not None:
            section["name"] = agent
        if "import_path" not in section:
            section.setdefault("name", DEFAULT_AGENT)
        template = make_template({**raw, "agent": section}, "the trial config")
    return template.harbor_config(task_dir, trials_dir=trials_dir)


@dataclass
class TrialSummary:
    task: str
    trial_dir: Path
    outcome: Outcome  # as training would judge it
    timings: dict[str, float]

    @property
    def ok(self) -> bool:
        """Scored, as training would score it."""
        return self.outcome.scored

    @property
    def reward(self) -> float | None:
        return self.outcome.reward

    @property
    def exception(self) -> str | None:
        """What went wrong, for a trial that would not be scored."""
        if self.outcome.scored:
            return None
        return f"{self.outcome.exception_type}: {self.outcome.message or ''}".strip()

    def lines(self) -> list[str]:
        reward = "—" if self.reward is None else f"{self.reward:g}"
        out = [
            f"task      {self.task}",
            f"outcome   {self.outcome.status}",
            f"reward    {reward}",
        ]
        if self.exception:
            out.append(f"error     {self.exception}")
        timing = "  ".join(f"{name} {format_seconds(secs)}" for name, secs in self.timings.items())
        out += [f"timings   {timing}", f"trial dir {self.trial_dir}"]
        return out


def _seconds(timing) -> float | None:
    if timing is None or timing.started_at is None or timing.finished_at is None:
        return None
    return (timing.finished_at - timing.started_at).total_seconds()


def summarize(result, reward_key: str = "reward") -> TrialSummary:
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
    return TrialSummary(
        task=result.task_name,
        trial_dir=Path(result.config.trials_dir) / result.trial_name,
        outcome=judge(result, reward_key),
        timings=timings,
    )


async def run_trial(config, on_phase: PhaseCallback | None = None, reward_key: str = "reward") -> TrialSummary:
    """Run a Harbor TrialConfig to the end and summarize it (errors before the trial starts:
    ``runner.harbor_trial.TrialNotCreated``, a RuntimeError with Harbor's message)."""
    return summarize(await run_harbor_trial(config, on_phase), reward_key)
