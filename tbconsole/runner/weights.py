"""Which weights sampled what: every sampling client the loop makes carries the update its weights
come from, and the run always knows the latest.

Updates are counted where they happen, on the training client the cookbook's loops drive: an
update is ``config.num_substeps`` optimizer steps, so the weights published after ``n`` of them
are update ``start + n // num_substeps`` (``start``: the update a resumed run starts at). Every
sampler the loop creates (``save_weights_and_get_sampling_client``, ``create_sampling_client``)
is handed back as a ``VersionedSampler``; the capture proxy records its ``weights_version`` on
every turn and request, so a trial's turns say which weights sampled them.

``PolicyWeights.latest`` is the sampler of the newest weights: on a gateway that serves only its
latest weights, the off-policy mode samples every turn from it (in-flight updates), since the
sampler a group started with stops answering once newer weights are published.

The update boundary is also where a clean stop of the off-policy mode happens: once a stop is
asked for, the trainer is let finish the update it is in, and the next one never starts
(``hold_updates``): its first forward-backward waits until the run cancels the loop, so no
weights change after the checkpoint the stop saves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tbconsole.record.events import Event, TrainingStarted


class VersionedSampler:
    """A sampling client and the update its weights come from (0: the initial weights)."""

    def __init__(self, client: Any, version: int):
        self._client = client
        self.weights_version = version

    @property
    def inner(self) -> Any:
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class PolicyWeights:
    """The update the trainer has reached, the sampler of the latest weights, and the boundary
    between updates."""

    def __init__(self, start: int, num_substeps: int, publish: Callable[[Event], None]):
        self.start = start
        self.num_substeps = max(1, num_substeps)
        self.optimizer_steps = 0
        self.latest: VersionedSampler | None = None
        self._publish = publish
        self._in_update = False
        self._between_updates = asyncio.Event()
        self._between_updates.set()
        self._holding = False
        self.changed = asyncio.Event()  # set each time newer weights are published

    @property
    def update(self) -> int:
        """The update being trained or filled next (the number of updates applied, counting a
        resumed run's earlier ones)."""
        return self.start + self.optimizer_steps // self.num_substeps

    def published(self, client: Any) -> VersionedSampler:
        sampler = client if isinstance(client, VersionedSampler) else VersionedSampler(client, self.update)
        if self.latest is None or sampler.weights_version >= self.latest.weights_version:
            self.latest = sampler
            self.changed.set()
            self.changed = asyncio.Event()
        return sampler

    def current(self) -> VersionedSampler:
        """The latest weights' sampler (what the proxy samples each turn from, on a gateway that
        serves only those)."""
        assert self.latest is not None, "no weights have been published yet"
        return self.latest

    # -- the boundary between updates ----------------------------------------------------------

    async def begin_update(self) -> None:
        """Called at each forward-backward: the first of an update marks it begun (or, once
        updates are held, waits for the run to cancel the loop)."""
        if self._in_update:
            return
        if self._holding:
            await asyncio.Future()  # cancelled with the loop: this update never reaches the trainer
        self._in_update = True
        self._between_updates.clear()
        self._publish(TrainingStarted(update=self.update))

    def end_update(self) -> None:
        """The update's metrics were logged: it is whole (weights published, checkpoint saved)."""
        self._in_update = False
        self._between_updates.set()

    async def hold_updates(self) -> int:
        """No update starts from now on; returns once none is in progress, with the number of
        updates applied (the batch a resumed run starts at)."""
        self._holding = True
        await self._between_updates.wait()
        return self.update


class VersioningTrainingClient:
    """The training client the loop drives: counts optimizer steps, tags every sampler it
    creates with its update, and marks where updates begin."""

    def __init__(self, client: Any, weights: PolicyWeights):
        self._client = client
        self.weights = weights

    async def forward_backward_async(self, *args: Any, **kwargs: Any) -> Any:
        await self.weights.begin_update()
        return await self._client.forward_backward_async(*args, **kwargs)

    async def optim_step_async(self, *args: Any, **kwargs: Any) -> Any:
        future = await self._client.optim_step_async(*args, **kwargs)
        self.weights.optimizer_steps += 1
        return future

    async def save_weights_and_get_sampling_client_async(self, *args: Any, **kwargs: Any) -> Any:
        client = await self._client.save_weights_and_get_sampling_client_async(*args, **kwargs)
        return self.weights.published(client)

    def create_sampling_client(self, *args: Any, **kwargs: Any) -> Any:
        return self.weights.published(self._client.create_sampling_client(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
