"""Checks that refuse a run before anything starts: each failure is one message that says what
to do (``PreflightError`` or ``OptionsError``: exit 2; an unreachable gateway, ``GatewayDown``:
exit 1, like any outage).

``check_command_line`` is every check that needs neither the cookbook nor Harbor (the keys, the
gateway's address and key, trial.json's file, the task folders, the sandbox, the disk): it runs
before their imports (seconds: the cookbook, torch), so a usage error is said at once. Then
``check_gateway`` probes the gateway the command names, still before those imports, so a dead
gateway is reported within a second or so of the command starting.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tbconsole.common.formatting import command_line

EMBEDDED = "embedded"  # the demo's placeholder for the in-process engine (runner.demo)
# The demo's placeholders for the files it writes into the run folder (runner.demo): checked when
# written, not here.
GENERATED_PREFIX = "<log_path>/"
MAX_LISTED = 5
TASKS_KEY = "config.dataset_builder.tasks_dir"
EVAL_TASKS_KEY = "harbor.eval_tasks_dir"
TRIAL_KEY = "harbor.trial_config"


class PreflightError(ValueError):
    """The run cannot start as configured; the message says what to do."""


class GatewayDown(PreflightError):
    """The gateway the command names does not answer (exit 1: an outage, not a usage error)."""


def last_value(keys: list[str], name: str) -> str | None:
    """The value of ``name=…`` among KEY=VALUE arguments (the last one wins, as in chz)."""
    value = None
    for item in keys:
        key, sep, rest = item.partition("=")
        if sep and key == name:
            value = rest
    return value


def named_base_url(keys: list[str], default_base_url: str | None = None) -> str | None:
    """The gateway the command names (``config.base_url=`` or ``TINKER_BASE_URL``), or None."""
    base_url = last_value(keys, "config.base_url") or default_base_url or os.environ.get("TINKER_BASE_URL")
    return None if not base_url or base_url in (EMBEDDED, "None") else base_url


def check_base_url(keys: list[str], default_base_url: str | None = None) -> None:
    """A gateway address the SDK cannot use is a usage error, said before anything is probed."""
    base_url = named_base_url(keys, default_base_url)
    if base_url is None:
        return
    scheme, sep, rest = base_url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise PreflightError(
            f"config.base_url={base_url} is not an http(s) URL: add http:// "
            f"(config.base_url=http://{rest if sep else base_url}) or https:// for a TLS gateway."
        )
    if not rest.strip("/"):
        raise PreflightError(f"config.base_url={base_url} names no host: e.g. config.base_url=http://127.0.0.1:8000")


def value_of(keys: list[str], defaults: Mapping[str, Any], name: str) -> str | None:
    """An option's value as given (the last ``name=``), else the command's own default; None when
    neither says (or a default that is not text, such as a class)."""
    value = last_value(keys, name)
    if value is None:
        value = defaults.get(name)
    return value if isinstance(value, str) else None


def check_command_line(
    keys: list[str],
    defaults: Mapping[str, Any] | None = None,
    own_check: Callable[[list[str], Mapping[str, Any]], None] | None = None,
) -> None:
    """Every usage error that needs neither the cookbook nor Harbor, in the order a user fixes
    them (OptionsError or PreflightError). ``defaults``: the values the command fills in itself
    (the demo's; ``<log_path>/…`` ones are files it generates, checked when written);
    ``own_check(keys, defaults)``: the command's own checks of the options' values, right after
    the keys'."""
    from tbconsole.harbor.taskset import TaskSetError, discover
    from tbconsole.runner.optionkeys import OptionsError, check_keys
    from tbconsole.runner.trials import TrialConfigError, environment_of, read_trial_json

    defaults = defaults or {}
    check_keys(keys, defaults)
    if own_check is not None:
        own_check(keys, defaults)
    default_base_url = value_of([], defaults, "config.base_url")
    check_base_url(keys, default_base_url)
    check_api_key(last_value(keys, "config.base_url") or default_base_url)
    trial_config = value_of(keys, defaults, TRIAL_KEY) or ""
    raw: dict[str, Any] = {}
    if not trial_config.startswith(GENERATED_PREFIX):  # the demo's own runs in the local sandbox
        try:
            raw = read_trial_json(Path(trial_config))
        except TrialConfigError as exc:
            raise OptionsError(str(exc)) from None
    environment = environment_of(raw)
    for key in (TASKS_KEY, EVAL_TASKS_KEY):
        tasks_dir = value_of(keys, defaults, key)
        if tasks_dir in (None, "None") or tasks_dir.startswith(GENERATED_PREFIX):
            continue
        try:
            task_dirs = discover(Path(tasks_dir).expanduser())
        except TaskSetError as exc:
            raise OptionsError(f"{key}: {exc}") from None
        check_tasks(task_dirs, environment, key)
    check_sandbox(environment)
    check_disk(Path(value_of(keys, defaults, "config.log_path") or "."))


def check_gateway(keys: list[str], defaults: Mapping[str, Any] | None = None) -> None:
    """Probe the gateway the command names (``config.base_url`` or ``TINKER_BASE_URL``): GatewayDown
    when it does not answer, PreflightError when it answers but does not serve the installed
    SDK or ``config.model_name``. Nothing when it is fine, still starting (healthz 503: the run
    waits for it, ``gateway.start_timeout``) or none was named (the run probes the SDK's default
    itself)."""
    defaults = defaults or {}
    base_url = named_base_url(keys, value_of([], defaults, "config.base_url"))
    if base_url is None:
        return
    from tbconsole.runner.health import GatewayRefusesSdk, check_sdk, probe, unreachable_message

    base_url = base_url.rstrip("/")
    answer = asyncio.run(probe(base_url))
    if answer.error is not None and not answer.starting:
        raise GatewayDown(unreachable_message(base_url, answer.error))
    try:
        asyncio.run(check_sdk(base_url))
    except GatewayRefusesSdk as exc:
        raise PreflightError(str(exc)) from None
    if answer.starting:
        return  # its models are checked by the SDK once it is ready
    model = value_of(keys, defaults, "config.model_name")
    served = asyncio.run(served_models(base_url)) if model else None
    if model and served and model.split(":", 1)[0] not in served:
        listed = ", ".join(served[:MAX_LISTED]) + (
            f" and {len(served) - MAX_LISTED} more" if len(served) > MAX_LISTED else ""
        )
        raise PreflightError(
            f"config.model_name={model} is not served by the gateway at {base_url}: it serves {listed}. "
            f"Name one of those (config.model_name={served[0]}), or start the gateway with that model "
            f"(local engine: tbconsole engine --model {model})."
        )


async def served_models(base_url: str) -> list[str] | None:
    """The base models the gateway lists (Tinker's get_server_capabilities), or None when it lists
    none it will tell (an error, another shape): the run's own start then says what is wrong."""
    import aiohttp

    from tbconsole.runner.health import PROBE_TIMEOUT_SEC

    headers = {"X-API-Key": os.environ.get("TINKER_API_KEY", "")}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SEC)) as session:
            async with session.get(f"{base_url}/api/v1/get_server_capabilities", headers=headers) as response:
                if response.status != 200:
                    return None
                body = await response.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return None
    models = body.get("supported_models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        return None
    names = [m.get("model_name") for m in models if isinstance(m, dict)]
    return [n for n in names if isinstance(n, str)] or None


def check_api_key(base_url: str | None) -> None:
    """The SDK refuses to start without ``TINKER_API_KEY``; say so before anything starts."""
    if base_url == EMBEDDED or os.environ.get("TINKER_API_KEY"):
        return
    raise PreflightError(
        "TINKER_API_KEY is not set. Export the key of your Tinker account or gateway "
        "(export TINKER_API_KEY=tml-…); the local engine (tbconsole engine) accepts any tml- key, "
        "e.g. TINKER_API_KEY=tml-local."
    )


def check_tasks(task_dirs: list[Path], environment: dict, option: str) -> None:
    """Every task must be runnable where its trials will run: the same rule ``tbconsole tasks``
    prints. The local sandbox cannot build or pull a container image; no environment can score a
    task without ``tests/test.sh``."""
    from tbconsole.harbor.taskset import TaskSetError, load
    from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX

    local = environment.get("import_path") == LOCAL_SANDBOX and not environment.get("type")
    refused: list[str] = []
    for task_dir in task_dirs:
        try:
            info = load(task_dir)
        except TaskSetError as exc:
            refused.append(str(exc))
            continue
        if not info.has_tests:
            refused.append(f"{info.path.name}: {info.local_note}")
        elif local and not info.runs_locally:
            refused.append(f"{info.path.name}: {info.local_note}, which the local sandbox cannot run")
    if not refused:
        return
    shown = "; ".join(refused[:MAX_LISTED]) + (
        f"; and {len(refused) - MAX_LISTED} more" if len(refused) > MAX_LISTED else ""
    )
    where = "the local sandbox" if local else "the configured environment"
    raise PreflightError(
        f"{option}: {len(refused)} of {len(task_dirs)} tasks cannot run in {where}: {shown}. "
        + (
            'Set an environment that runs container images in trial.json (e.g. "environment": '
            '{"type": "docker"} or e2b), or point ' + option + " at tasks that run locally. "
            if local
            else f"Fix those task folders or leave them out of {option}. "
        )
        + f"`{command_line('tasks', 'DIR')}` lists every task with what it needs."
    )


def check_sandbox(environment: dict) -> None:
    from tbconsole.sandbox import IMPORT_PATH as LOCAL_SANDBOX

    if environment.get("import_path") != LOCAL_SANDBOX or environment.get("type"):
        return
    from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

    try:
        preflight()
    except SandboxUnavailable as exc:
        raise PreflightError(str(exc)) from None


def check_disk(log_path: Path) -> None:
    """Refuse a run whose folder's disk is (nearly) full, with what is free and what is needed."""
    from tbconsole.runs.diskspace import DiskSpaceError, check_free

    try:
        check_free(log_path)
    except DiskSpaceError as exc:
        raise PreflightError(str(exc)) from None
