"""trial.json → one Harbor TrialConfig per trial, honouring what the recipe means by its keys.

The seed's reference trial.json passes mini-swe-agent ``kwargs.max_seq_len`` and
``kwargs.config.model.model_kwargs.temperature``; Harbor's mini-swe-agent options forbid both.
The recipe means: the trial's context window (enforced by the capture proxy) and the sampling
temperature (applied by the proxy to every request of that trial). We take them out of the
agent's kwargs and hand them to the proxy; anything else under ``config`` is refused with a
message, since we could not honour it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX
from tbconsole.trial import TrialConfigError, read_trial_json, substitute

PROXY_KEYS = ("proxy_url", "proxy_api_key")


@dataclass(frozen=True)
class ProxySettings:
    context_window: int | None = None
    temperature: float | None = None


@dataclass
class TrialTemplate:
    raw: dict[str, Any]  # trial.json with the recipe's keys taken out
    proxy: ProxySettings
    source: str

    @property
    def agent_name(self) -> str:
        agent = self.raw.get("agent") or {}
        return agent.get("name") or agent.get("import_path") or "agent"

    def config_for(self, task_dir: Path, trial_name: str, proxy_url: str, proxy_api_key: str,
                   default_trials_dir: Path):
        """The Harbor TrialConfig of one trial."""
        from harbor.models.trial.config import TrialConfig
        from pydantic import ValidationError

        data = substitute(copy.deepcopy(self.raw),
                          {"proxy_url": proxy_url, "proxy_api_key": proxy_api_key}, source=self.source)
        data["task"] = {"path": str(task_dir)}
        data["trial_name"] = trial_name
        data.setdefault("trials_dir", str(default_trials_dir))
        try:
            return TrialConfig.model_validate(data)
        except ValidationError as exc:
            details = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}"
                                for e in exc.errors(include_url=False))
            raise TrialConfigError(f"{self.source}: invalid trial config: {details}") from None


def load_template(path: Path) -> TrialTemplate:
    """Read and check a trial.json before anything starts (errors: TrialConfigError)."""
    path = Path(path)
    raw = read_trial_json(path, "harbor.trial_config")
    raw, proxy = translate(raw, str(path))
    environment = dict(raw.get("environment") or {})
    if not environment.get("type") and not environment.get("import_path"):
        environment["import_path"] = LOCAL_SANDBOX
    raw["environment"] = environment
    template = TrialTemplate(raw=raw, proxy=proxy, source=str(path))
    # Validate once with stand-in values, so a bad key fails now and not in the first group.
    config = template.config_for(Path("/nonexistent-task"), "check", "http://127.0.0.1:1/t/check",
                                 "check", Path("/tmp"))
    _check_options(config, str(path))
    return template


def _check_options(config, source: str) -> None:
    """Agent and environment kwargs, as Harbor will check them when the first trial starts."""
    from harbor.agents.factory import AgentFactory
    from harbor.environments.factory import EnvironmentFactory

    try:
        agent_class = AgentFactory.get_agent_class_from_config(config.agent)
        agent_class.parse_options(config.agent.kwargs, env=config.agent.env)
        EnvironmentFactory.validate_options(config.environment)
    except (ValueError, ImportError) as exc:
        raise TrialConfigError(f"{source}: {exc}") from None


def translate(raw: dict[str, Any], source: str) -> tuple[dict[str, Any], ProxySettings]:
    raw = copy.deepcopy(raw)
    agent = raw.get("agent")
    if not isinstance(agent, dict):
        raise TrialConfigError(f"{source}: 'agent' must be an object with at least a 'name'.")
    kwargs = agent.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise TrialConfigError(f"{source}: agent.kwargs must be an object.")
    context_window = kwargs.pop("max_seq_len", None)
    if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int)
                                       or context_window <= 0):
        raise TrialConfigError(f"{source}: agent.kwargs.max_seq_len must be a positive integer.")
    temperature = None
    config = kwargs.get("config")
    if config is not None:
        temperature = _temperature(config, source)
        if not _agent_accepts(agent, "config"):
            _only_temperature(config, source)
            kwargs.pop("config")
    agent["kwargs"] = kwargs
    return raw, ProxySettings(context_window=context_window, temperature=temperature)


def _agent_accepts(agent: dict[str, Any], option: str) -> bool:
    """Whether this Harbor version's agent takes ``option`` itself (then it passes through)."""
    from harbor.agents.factory import AgentFactory
    from harbor.models.trial.config import AgentConfig

    try:
        agent_class = AgentFactory.get_agent_class_from_config(AgentConfig.model_validate(
            {k: v for k, v in agent.items() if k in ("name", "import_path")}))
        agent_class.parse_options({option: {}})
    except Exception:
        return False
    return True


def _temperature(config: Any, source: str) -> float | None:
    where = "agent.kwargs.config.model.model_kwargs.temperature"
    if not isinstance(config, dict):
        raise TrialConfigError(f"{source}: agent.kwargs.config must be an object.")
    model_kwargs = (config.get("model") or {}).get("model_kwargs") or {}
    temperature = model_kwargs.get("temperature") if isinstance(model_kwargs, dict) else None
    if temperature is None:
        return None
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise TrialConfigError(f"{source}: {where} must be a number >= 0.")
    return float(temperature)


def _only_temperature(config: dict[str, Any], source: str) -> None:
    model = config.get("model") or {}
    leftovers = {k for k in config if k != "model"}
    if isinstance(model, dict):
        leftovers |= {f"model.{k}" for k in model if k != "model_kwargs"}
        model_kwargs = model.get("model_kwargs") or {}
        if isinstance(model_kwargs, dict):
            leftovers |= {f"model.model_kwargs.{k}" for k in model_kwargs if k != "temperature"}
    if leftovers:
        raise TrialConfigError(
            f"{source}: this agent takes no 'config' option, so agent.kwargs.config may only set "
            "model.model_kwargs.temperature (the recipe applies it at the capture proxy); it also "
            f"sets {', '.join(sorted(leftovers))}. Remove them or move them to agent.kwargs."
        )
