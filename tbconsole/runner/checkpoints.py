"""The run's checkpoints: the cookbook's checkpoint manager, publishing every save, and fitted to a
gateway that serves only its latest weights.

Every save is a ``CheckpointSaved`` event (periodic saves happen inside the cookbook's loop, so
the manager is the one place to see them).

A gateway that serves only its latest weights (``gateway.latest_weights_only``; the Miles
gateway) refuses what the cookbook's checkpoints ask for: a *named* sampler checkpoint
(``save_weights_for_sampler(name)``), a sampling client created from one
(``create_sampling_client(path)``), and any ``ttl_seconds`` (the cookbook's default is 7 days).
There a checkpoint is the training state only, kept without expiry, and the weights the next
batch samples are published without a name (``save_weights_and_get_sampling_client``): the
sampling client is handed to the loop under a placeholder path that names no checkpoint
(``LatestWeightsClient.create_sampling_client``). Resuming needs only the training state
(``create_training_client_from_state_with_optimizer``), which such a gateway serves.
"""

from __future__ import annotations

import logging
from typing import Any

from tinker_cookbook import checkpoint_utils

from tbconsole.record.events import CheckpointSaved

LATEST_PREFIX = "latest-weights:"  # a sampler "path" that names the weights published last, not a checkpoint


class LatestWeightsClient:
    """The training client, whose ``create_sampling_client`` of a ``LATEST_PREFIX`` path hands back
    the sampling client of the weights published last (what the cookbook then samples from)."""

    def __init__(self, client: Any):
        self._client = client
        self.latest: dict[str, Any] = {}  # placeholder path -> its sampling client

    async def publish_latest(self, name: str) -> str:
        """Publish the current weights for sampling, without a name; their placeholder path."""
        sampling_client = await self._client.save_weights_and_get_sampling_client_async()
        path = f"{LATEST_PREFIX}{name}"
        self.latest = {path: sampling_client}  # older ones are no longer served
        return path

    async def save_state_async(self, name: str, ttl_seconds: int | None = None) -> Any:
        """The training state, without expiry (such a gateway refuses any TTL)."""
        return await self._client.save_state_async(name)

    async def save_weights_for_sampler_async(self, name: str, ttl_seconds: int | None = None) -> Any:
        """A named sampler checkpoint (the off-policy loop's first one) becomes the latest weights,
        published without a name, under their placeholder path."""
        return _Saved(await self.publish_latest(name))

    def create_sampling_client(self, model_path: str, *args: Any, **kwargs: Any) -> Any:
        if model_path.startswith(LATEST_PREFIX):
            if model_path not in self.latest:
                raise ValueError(f"{model_path} are no longer the latest weights; the gateway serves only those")
            return self.latest[model_path]
        return self._client.create_sampling_client(model_path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _Saved:
    """A finished save's future, as the SDK's: ``await result_async()`` gives ``.path``."""

    def __init__(self, path: str):
        self.path = path

    async def result_async(self, *args: Any, **kwargs: Any) -> _Saved:
        return self


class PublishingCheckpointManager(checkpoint_utils.CheckpointManager):
    """The cookbook's checkpoint manager, publishing a ``CheckpointSaved`` for every save it makes;
    with ``latest`` (a ``LatestWeightsClient``: the gateway serves only its latest weights) each
    save is the training state only, without expiry, and the sampler is the latest weights."""

    def __init__(self, *args: Any, publish, latest: LatestWeightsClient | None = None, **kwargs: Any):
        if latest is not None:  # such a gateway expires nothing: no TTL may be asked for
            kwargs.update(ttl_seconds=None, rolling_ttl_seconds=None)
        super().__init__(*args, **kwargs)
        self._publish_event = publish
        self._latest = latest

    def _saved(self, step: int, name: str, paths: dict[str, str] | None) -> None:
        paths = paths or {}
        sampler_path = paths.get("sampler_path")
        self._publish_event(
            CheckpointSaved(
                step=step,
                name=name,
                state_path=paths.get("state_path"),
                sampler_path=None if sampler_path and sampler_path.startswith(LATEST_PREFIX) else sampler_path,
            )
        )

    async def _state_and_latest(self, name: str, loop_state: dict[str, Any]) -> dict[str, str]:
        assert self._latest is not None
        paths = await checkpoint_utils.save_checkpoint_async(
            training_client=self._training_client,
            name=name,
            log_path=self._log_path,
            loop_state=loop_state,
            kind="state",
            ttl_seconds=None,
            store=self._store,
        )
        return {**paths, "sampler_path": await self._latest.publish_latest(name)}

    async def save_periodic_async(self, step: int, loop_state: dict[str, Any]) -> dict[str, str]:
        name = f"{step:06d}"
        if self._latest is not None:
            paths = await self._state_and_latest(name, loop_state)
        else:
            paths = await super().save_periodic_async(step, loop_state)
        self._saved(step, name, paths)
        return paths

    async def save_final_async(self, loop_state: dict[str, Any]) -> dict[str, str]:
        if self._latest is not None:
            await self._resolve_pending_periodic_async()
            paths = await self._state_and_latest("final", loop_state)
            await self.finalize_async()
        else:
            paths = await super().save_final_async(loop_state)
        step = int(loop_state.get("batch", -1))
        self._saved(step, "final", paths)
        return paths

    def sampling_client_of(self, sampler_path: str) -> Any | None:
        """The sampling client of the latest weights behind a placeholder path, if it is one."""
        if self._latest is not None and sampler_path.startswith(LATEST_PREFIX):
            return self._latest.create_sampling_client(sampler_path)
        return None


async def serves_older_weights(training_client: Any) -> bool | None:
    """Whether the gateway still samples from weights published before its newest (hosted Tinker
    does; the Miles gateway refuses): weights are published twice, without a name (nothing is
    trained or saved), and one token is sampled from the first. True or False as the gateway
    answers; None when the probe itself failed another way (the configured behaviour stands)."""
    import inspect

    import tinker

    try:
        first = await training_client.save_weights_and_get_sampling_client_async()
        await training_client.save_weights_and_get_sampling_client_async()
    except Exception:  # noqa: BLE001 - the probe decides nothing on its own failure
        return None
    prompt = tinker.ModelInput.from_ints([1, 2])
    params = tinker.SamplingParams(max_tokens=1)
    # The refusal is the answer asked for: the SDK would log it as an ERROR on the run's console.
    sdk_log = logging.getLogger(SDK_RETRY_LOGGER)
    sdk_log.addFilter(_refusal_expected)
    try:
        pending = first.sample(prompt=prompt, num_samples=1, sampling_params=params)
        await (pending if inspect.isawaitable(pending) else pending.result_async())
    except (tinker.RequestFailedError, tinker.BadRequestError, tinker.ConflictError, tinker.NotFoundError):
        return False  # the gateway's own refusal of an older sampler
    except Exception:  # noqa: BLE001 - a timeout, a connection error: not an answer
        return None
    finally:
        sdk_log.removeFilter(_refusal_expected)
    return True


SDK_RETRY_LOGGER = "tinker.lib.retry_handler"


def _refusal_expected(record: logging.LogRecord) -> bool:
    """Drops the SDK's report of a non-retryable refusal (the probe's expected answer)."""
    return "non-retryable" not in record.getMessage()
