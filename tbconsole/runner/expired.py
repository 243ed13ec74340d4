"""A training result the gateway expired (HTTP 410) is never asked for again by re-sending the call.

The SDK polls each training call's future (``/api/v1/retrieve_future``); a gateway answers 410
when it no longer holds the result: delivered and past its replay window, or never read within
its retention (the Miles gateway reaps unread results after 900 s). The SDK then raises
``RetryableException("Promise expired/broken …")`` to the caller, and the cookbook's training
step (``train_step``) fails the run. Re-sending the call would be wrong: the operation ran,
exactly once, in order (a gateway executes one model's calls by their ``seq_id``), so a second
``forward_backward`` would add its gradient again and a second ``optim_step`` would apply
another update — one the run never records.

So the training client the loop gets is wrapped here, and what a lost result means is decided
per call, without ever sending a call that changes the weights twice:

- ``forward_backward``: its gradient is in; only its output is lost (the trainer's log-probs,
  which the cookbook uses for ``optim/kl_sample_train_*`` and the recipe keeps beside the
  captures). The step goes on with those log-probs marked missing (NaN): that step's KL
  figures read NaN, never a made-up number.
- ``optim_step``: the update is applied; its figures (the optimizer's metrics) are missing.
- ``save_weights_for_sampler``/``save_state`` (sampler weights, checkpoints) and creating the
  sampling client: they change no weights, so they are sent again.

A 410 for a call of an earlier gateway process (a restart that lost the model's state) is not
this case: the model's next call fails on its own (404), and the run stops with that reason,
to be resumed from its last checkpoint. Each lost result is a warning line in the run's events.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
import tinker
from tinker.lib.retryable_exception import RetryableException

from tbconsole.record.enums import LogLevel
from tbconsole.record.events import Event, LogLine

logger = logging.getLogger(__name__)
RESENDS = 3  # times a call that changes no weights is sent again after its result expired


class _Tolerant:
    """A future whose expired result is replaced by ``on_expired()``."""

    def __init__(self, future: Any, on_expired: Callable[[], Awaitable[Any]]):
        self._future, self._on_expired = future, on_expired

    async def result_async(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self._future.result_async(*args, **kwargs)
        except RetryableException:
            return await self._on_expired()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)


def missing_logprobs(data: Sequence[tinker.Datum]) -> tinker.ForwardBackwardOutput:
    """A forward_backward output for ``data`` whose log-probs are all missing (NaN), one per
    target token as the real one has."""
    outputs = []
    for datum in data:
        length = len(datum.loss_fn_inputs["target_tokens"].data)
        outputs.append({"logprobs": tinker.TensorData.from_numpy(np.full(length, np.nan, dtype=np.float32))})
    return tinker.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord", loss_fn_outputs=outputs, metrics={})


class ExpiryTolerantTrainingClient:
    """The training client, with each expired result handled as the module says; everything
    else goes straight to the client. ``expired`` counts the results lost, by call."""

    def __init__(self, client: Any, publish: Callable[[Event], None]):
        self._client, self._publish = client, publish
        self.expired: dict[str, int] = {}

    def _lost(self, call: str, what: str) -> None:
        self.expired[call] = self.expired.get(call, 0) + 1
        warn(self._publish)(call, what)

    async def forward_backward_async(self, data, loss_fn, loss_fn_config=None):
        data = list(data)
        future = await self._client.forward_backward_async(data, loss_fn=loss_fn, loss_fn_config=loss_fn_config)

        async def lost() -> tinker.ForwardBackwardOutput:
            self._lost(
                "forward_backward",
                f"its gradient ({len(data)} datums) is in and it is not sent again; the trainer's "
                "log-probs of those datums are missing, so this step's optim/kl_sample_train figures read NaN",
            )
            return missing_logprobs(data)

        return _Tolerant(future, lost)

    async def optim_step_async(self, adam_params):
        future = await self._client.optim_step_async(adam_params)

        async def lost() -> tinker.OptimStepResponse:
            self._lost("optim_step", "the update is applied and it is not sent again; its figures are missing")
            return tinker.OptimStepResponse(metrics=None)

        return _Tolerant(future, lost)

    async def save_weights_and_get_sampling_client_async(self, *args: Any, **kwargs: Any) -> Any:
        return await self.resend("save_weights_and_get_sampling_client", lambda: self._client.
                                  save_weights_and_get_sampling_client_async(*args, **kwargs))  # fmt: skip

    async def save_state_async(self, *args: Any, **kwargs: Any) -> Any:
        return await self._resent_future("save_state", lambda: self._client.save_state_async(*args, **kwargs))

    async def save_weights_for_sampler_async(self, *args: Any, **kwargs: Any) -> Any:
        return await self._resent_future(
            "save_weights_for_sampler", lambda: self._client.save_weights_for_sampler_async(*args, **kwargs)
        )

    async def resend(self, call: str, send: Callable[[], Awaitable[Any]]) -> Any:
        return await resend(call, send, self._lost)

    async def _resent_future(self, call: str, submit: Callable[[], Awaitable[Any]]) -> Any:
        """The future of ``submit()``, whose expired result is got by submitting it again."""
        future = await submit()

        async def again() -> Any:
            self._lost(call, "it changes no weights, so it is sent again")
            return await self.resend(call, lambda: _result_of(submit))

        return _Tolerant(future, again)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


async def resend(call: str, send: Callable[[], Awaitable[Any]], lost: Callable[[str, str], None]) -> Any:
    """``send()``, sent again when its result expired (``lost`` told each time): only for calls
    that change no weights."""
    for attempt in range(RESENDS + 1):
        try:
            return await send()
        except RetryableException:
            if attempt == RESENDS:
                raise
            lost(call, "it changes no weights, so it is sent again")
    raise AssertionError("unreachable")


def warn(publish: Callable[[Event], None]) -> Callable[[str, str], None]:
    """A ``lost`` for ``resend`` that only says so in the run's events."""

    def lost(call: str, what: str) -> None:
        message = f"the gateway expired the result of {call} (HTTP 410): {what}"
        logger.warning(message)
        publish(LogLine(level=LogLevel.WARNING, message=message))

    return lost


async def _result_of(submit: Callable[[], Awaitable[Any]]) -> Any:
    return await (await submit()).result_async()
