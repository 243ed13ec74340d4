"""trial.json → one Harbor TrialConfig per trial, honouring what the recipe means by its keys.

The seed's reference trial.json passes mini-swe-agent ``kwargs.max_seq_len`` and
``kwargs.config.model.model_kwargs.temperature``; Harbor's mini-swe-agent options forbid both.
The recipe means: the trial's context window (enforced by the capture proxy) and the sampling
temperature (applied by the proxy to every request of that trial). We take them out of the
agent's kwargs and hand them to the proxy; anything else under ``config`` is refused with a
message, since we could not honour it.

The seed's variants for other agents keep those mini-swe-agent keys; each is translated into
what that agent takes (``AGENT_RULES``), or refused before the run with the key and the agent:

- ``claude-code``: ``max_tokens`` → ``env.CLAUDE_CODE_MAX_OUTPUT_TOKENS`` (Claude Code's own
  cap on the ``max_tokens`` it sends; it asks for 128k otherwise); ``config`` is Claude Code's
  settings.json, so the seed's ``config.model.model_kwargs`` is taken out of it.
- ``codex``: ``max_seq_len`` also → ``config.model_context_window`` (Codex compacts before the
  window); ``max_tokens`` is refused: Codex CLI has no such setting and sends no limit, so
  every reply is capped by the recipe's ``config.max_tokens`` at the proxy. ``config`` is
  Codex's config.toml (as JSON), so ``config.model.model_kwargs`` is taken out of it.
- ``terminus-2`` (runs on the host, calls the proxy through LiteLLM): ``max_tokens`` →
  ``llm_call_kwargs.max_tokens`` and ``model_info.max_output_tokens``; ``max_seq_len`` also →
  ``model_info.max_input_tokens`` (its summarization threshold); the temperature also →
  ``temperature``.

``{agents}`` and ``{venv}`` in any string are this machine's agent-CLI folder and Python
environment (``tbconsole.harbor.agents``), so a trial.json that runs them in the local sandbox works
from any clone; a claude-code or codex trial that uses ``{agents}`` is refused before the run
when that CLI is not installed there.

Training and ``tbconsole trial --trial-config`` read the file through the same ``load_template``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tbconsole.harbor import agents as agent_clis
from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX

PROXY_KEYS = ("proxy_url", "proxy_api_key")
LOCAL_PATH_KEYS = ("agents", "venv")  # filled when trial.json is read (tbconsole.harbor.agents)
TRAINING_LABEL = "harbor.trial_config"  # how error messages name the file (the training option)


class TrialConfigError(ValueError):
    """The trial configuration is unusable; the message says how to fix it."""


def read_trial_json(path: Path, label: str = TRAINING_LABEL) -> dict[str, Any]:
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


def substitute(value: Any, substitutions: dict[str, str], *, source: str) -> Any:
    """``{name}`` replaced by ``substitutions[name]`` in every string; a proxy placeholder with no
    value is an error, not a silent literal."""
    if isinstance(value, dict):
        return {k: substitute(v, substitutions, source=source) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, substitutions, source=source) for v in value]
    if isinstance(value, str):
        for name in PROXY_KEYS:
            token = "{" + name + "}"
            if token in value and name not in substitutions:
                raise TrialConfigError(
                    f"{source} uses {token} but no value was given for it "
                    f"(tbconsole trial: pass --{name.replace('_', '-')})."
                )
        for name, replacement in substitutions.items():
            value = value.replace("{" + name + "}", replacement)
    return value


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
    def calls_proxy(self) -> bool:
        """Whether the agent is pointed at the capture proxy (trial.json uses its placeholders):
        then a trial without a single answered model call cannot be scored."""
        text = json.dumps(self.raw)
        return any("{" + key + "}" in text for key in PROXY_KEYS)

    def trials_dir(self, default: Path) -> Path:
        return Path(self.raw.get("trials_dir") or default).expanduser()

    @property
    def agent_name(self) -> str:
        agent = self.raw.get("agent") or {}
        return agent.get("name") or agent.get("import_path") or "agent"

    def config_for(self, task_dir: Path, trial_name: str, proxy_url: str, proxy_api_key: str, default_trials_dir: Path):
        """The Harbor TrialConfig of one training trial, its agent pointed at the capture proxy."""
        return self.harbor_config(
            task_dir,
            {"proxy_url": proxy_url, "proxy_api_key": proxy_api_key},
            trial_name=trial_name,
            trials_dir=self.trials_dir(default_trials_dir),
        )

    def harbor_config(
        self,
        task_dir: Path,
        substitutions: dict[str, str] | None = None,
        *,
        trial_name: str = "",
        trials_dir: Path | None = None,
    ):
        """The Harbor TrialConfig of one trial of ``task_dir``: placeholders filled from
        ``substitutions``; ``trial_name`` and ``trials_dir`` when given, else trial.json's (or
        Harbor's defaults)."""
        from harbor.models.trial.config import TrialConfig
        from pydantic import ValidationError

        data = substitute(copy.deepcopy(self.raw), substitutions or {}, source=self.source)
        data["task"] = {"path": str(task_dir)}
        if trial_name:
            data["trial_name"] = trial_name
        if trials_dir is not None:
            data["trials_dir"] = str(trials_dir)
        try:
            return TrialConfig.model_validate(data)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise TrialConfigError(f"{self.source}: invalid trial config: {details}") from None

    def filled(self, substitutions: dict[str, str]) -> TrialTemplate:
        """This template with placeholders filled now (``tbconsole trial``: one trial, values
        from the command line). A proxy placeholder without a value is an error here."""
        return replace(self, raw=substitute(self.raw, substitutions, source=self.source))

    def with_agent(self, name: str) -> TrialTemplate:
        """This template running Harbor's agent ``name`` instead (its kwargs and env kept)."""
        agent = {k: v for k, v in (self.raw.get("agent") or {}).items() if k != "import_path"}
        return replace(self, raw={**self.raw, "agent": {**agent, "name": name}})


def load_template(path: Path, label: str = TRAINING_LABEL) -> TrialTemplate:
    """Read and check a trial.json before anything starts (errors: TrialConfigError). ``label``
    names the file in error messages."""
    path = Path(path)
    return make_template(read_trial_json(path, label), str(path))


def make_template(raw: dict[str, Any], source: str) -> TrialTemplate:
    """A trial.json's content, translated and checked as ``load_template`` does."""
    uses_agents_dir = "{agents}" in json.dumps(raw)
    raw = _fill_local_paths(raw, agent_clis.placeholders())
    raw, proxy = translate(raw, source)
    raw["environment"] = environment_of(raw)
    template = TrialTemplate(raw=raw, proxy=proxy, source=source)
    # Validate once with stand-in values, so a bad key fails now and not in the first group.
    config = template.config_for(
        Path("/nonexistent-task"), "check", "http://127.0.0.1:1/t/check", "check", Path("/tmp")
    )
    _check_options(config, source)
    if uses_agents_dir:
        problem = agent_clis.problem(config.agent.name or "")
        if problem:
            raise TrialConfigError(f"{source}: agent {config.agent.name!r} runs from {{agents}}, but {problem}")
    return template


def environment_of(raw: dict[str, Any]) -> dict[str, Any]:
    """Where a trial.json's trials run: its ``environment``, the local sandbox when it names none."""
    environment = dict(raw.get("environment") or {})
    if not environment.get("type") and not environment.get("import_path"):
        environment["import_path"] = LOCAL_SANDBOX
    return environment


def _fill_local_paths(value: Any, paths: dict[str, str]) -> Any:
    """``{agents}`` and ``{venv}`` in every string (the proxy's placeholders wait for each trial)."""
    if isinstance(value, dict):
        return {k: _fill_local_paths(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_local_paths(v, paths) for v in value]
    if isinstance(value, str):
        for name in LOCAL_PATH_KEYS:
            value = value.replace("{" + name + "}", paths[name])
    return value


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
    if context_window is not None and (
        isinstance(context_window, bool) or not isinstance(context_window, int) or context_window <= 0
    ):
        raise TrialConfigError(f"{source}: agent.kwargs.max_seq_len must be a positive integer.")
    temperature = None
    config = kwargs.get("config")
    name = str(agent.get("name") or "")
    rule = AGENT_RULES.get(name) if not agent.get("import_path") else None
    if config is not None:
        temperature = _temperature(config, source)
        if rule is not None:
            native = _without_seed_model(config, name, source)
            if native:
                kwargs["config"] = native
            else:
                kwargs.pop("config")
        elif not _agent_accepts(agent, "config"):
            _only_temperature(config, source)
            kwargs.pop("config")
    if rule is not None:
        rule(agent, kwargs, context_window, temperature, source)
    agent["kwargs"] = kwargs
    return raw, ProxySettings(context_window=context_window, temperature=temperature)


def _max_tokens(kwargs: dict[str, Any], agent: str, source: str) -> int | None:
    value = kwargs.pop("max_tokens", None)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise TrialConfigError(f"{source}: agent.kwargs.max_tokens must be a positive integer (agent {agent!r}).")
    return value


def _claude_code(
    agent: dict[str, Any], kwargs: dict[str, Any], context_window: int | None, temperature: float | None, source: str
) -> None:
    max_tokens = _max_tokens(kwargs, "claude-code", source)
    if max_tokens is None:
        return
    env = agent.setdefault("env", {})
    if not isinstance(env, dict):
        raise TrialConfigError(f"{source}: agent.env must be an object.")
    own = env.get(CLAUDE_MAX_OUTPUT)
    if own is not None and str(own) != str(max_tokens):
        raise TrialConfigError(
            f"{source}: agent 'claude-code': agent.kwargs.max_tokens={max_tokens} becomes "
            f"agent.env.{CLAUDE_MAX_OUTPUT}, which already says {own!r}; keep one of them."
        )
    env[CLAUDE_MAX_OUTPUT] = str(max_tokens)


def _codex(
    agent: dict[str, Any], kwargs: dict[str, Any], context_window: int | None, temperature: float | None, source: str
) -> None:
    if kwargs.get("max_tokens") is not None:
        raise TrialConfigError(
            f"{source}: agent 'codex' has no setting for agent.kwargs.max_tokens (mini-swe-agent's "
            "option): Codex CLI sends no output limit, so the capture proxy caps every reply at the "
            "recipe's config.max_tokens. Remove agent.kwargs.max_tokens (set config.max_tokens instead)."
        )
    if context_window is not None:
        config = kwargs.setdefault("config", {})
        if not isinstance(config, dict):
            raise TrialConfigError(
                f"{source}: agent 'codex': agent.kwargs.config must be an object "
                "(Codex's config.toml as JSON) to carry max_seq_len."
            )
        config.setdefault("model_context_window", context_window)


def _terminus_2(
    agent: dict[str, Any], kwargs: dict[str, Any], context_window: int | None, temperature: float | None, source: str
) -> None:
    max_tokens = _max_tokens(kwargs, "terminus-2", source)
    if temperature is not None:
        own = kwargs.get("temperature")
        if own is not None and own != temperature:
            raise TrialConfigError(
                f"{source}: agent 'terminus-2': agent.kwargs.temperature={own} and "
                f"agent.kwargs.config.model.model_kwargs.temperature={temperature} disagree; keep one."
            )
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        call = kwargs.setdefault("llm_call_kwargs", {})
        if not isinstance(call, dict):
            raise TrialConfigError(f"{source}: agent 'terminus-2': agent.kwargs.llm_call_kwargs must be an object.")
        call.setdefault("max_tokens", max_tokens)
    if max_tokens is not None or context_window is not None:
        info = kwargs.setdefault("model_info", {})
        if not isinstance(info, dict):
            raise TrialConfigError(f"{source}: agent 'terminus-2': agent.kwargs.model_info must be an object.")
        if context_window is not None:
            info.setdefault("max_input_tokens", context_window)
        if max_tokens is not None:
            info.setdefault("max_output_tokens", max_tokens)
        # LiteLLM does not know the policy's name: without costs it logs a lookup error per call.
        info.setdefault("input_cost_per_token", 0.0)
        info.setdefault("output_cost_per_token", 0.0)


CLAUDE_MAX_OUTPUT = "CLAUDE_CODE_MAX_OUTPUT_TOKENS"
# Agents whose options differ from mini-swe-agent's: how the seed's keys become theirs.
AGENT_RULES = {"claude-code": _claude_code, "codex": _codex, "terminus-2": _terminus_2}
NATIVE_CONFIG = {"claude-code": "its settings.json", "codex": "its config.toml (as JSON)"}


def _without_seed_model(config: Any, agent: str, source: str) -> dict[str, Any]:
    """``config`` minus the seed's mini-swe-agent section ``model.model_kwargs.temperature``
    (already taken for the proxy): what is left is the agent's native config, if it has one."""
    if not isinstance(config, dict):
        raise TrialConfigError(f"{source}: agent.kwargs.config must be an object.")
    native = copy.deepcopy(config)
    model = native.get("model")
    if isinstance(model, dict):  # mini-swe-agent's shape (a native config names a model as a string)
        leftovers = _seed_model_leftovers(model)
        if leftovers:
            raise TrialConfigError(
                f"{source}: agent {agent!r} does not take mini-swe-agent's config; of "
                "agent.kwargs.config.model only model_kwargs.temperature is honoured (at the capture "
                f"proxy), and it also sets {', '.join(sorted('config.' + k for k in leftovers))}. Remove them."
            )
        native.pop("model")
    if native and agent not in NATIVE_CONFIG:
        raise TrialConfigError(
            f"{source}: agent {agent!r} takes no 'config' option, so agent.kwargs.config may only set "
            "model.model_kwargs.temperature (the recipe applies it at the capture proxy); it also sets "
            f"{', '.join(sorted(native))}. Remove them or move them to agent.kwargs."
        )
    return native


def _agent_accepts(agent: dict[str, Any], option: str) -> bool:
    """Whether this Harbor version's agent takes ``option`` itself (then it passes through)."""
    from harbor.agents.factory import AgentFactory
    from harbor.models.trial.config import AgentConfig

    try:
        agent_class = AgentFactory.get_agent_class_from_config(
            AgentConfig.model_validate({k: v for k, v in agent.items() if k in ("name", "import_path")})
        )
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


def _seed_model_leftovers(model: dict[str, Any]) -> set[str]:
    """What the seed's ``config.model`` section sets beyond ``model_kwargs.temperature``."""
    leftovers = {f"model.{k}" for k in model if k != "model_kwargs"}
    model_kwargs = model.get("model_kwargs") or {}
    if isinstance(model_kwargs, dict):
        leftovers |= {f"model.model_kwargs.{k}" for k in model_kwargs if k != "temperature"}
    return leftovers


def _only_temperature(config: dict[str, Any], source: str) -> None:
    model = config.get("model") or {}
    leftovers = {k for k in config if k != "model"}
    if isinstance(model, dict):
        leftovers |= _seed_model_leftovers(model)
    if leftovers:
        raise TrialConfigError(
            f"{source}: this agent takes no 'config' option, so agent.kwargs.config may only set "
            "model.model_kwargs.temperature (the recipe applies it at the capture proxy); it also "
            f"sets {', '.join(sorted(leftovers))}. Remove them or move them to agent.kwargs."
        )
