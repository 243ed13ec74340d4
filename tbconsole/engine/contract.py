"""Which gateway the engine behaves as: hosted Tinker (`tinker`, the default) or the Miles Tinker
gateway (`miles`, `miles-next`), so that a client can be tested against a gateway's contract on a
laptop (`tbconsole engine --contract ...`).

The Miles gateway is radixark/miles, branch `tinker-frontend`, commit 5d7c1384e (2026-08-22). Its
contract, item by item, with the Miles files that state it (paths in that repository at commit
5d7c1384e; `tinker_frontend/` is `miles/ray/tinker_frontend/`) and the engine code that holds it:

1. Readiness is not liveness: `GET /api/v1/healthz` answers 503 ("trainer is initializing ...")
   until the trainer exists; `GET /health` answers as soon as the socket is up.
   Miles @ 5d7c1384e: `docs/examples/multi-lora-operations.md` (Launch),
   `tinker_frontend/service.py` (`health`), `tinker_frontend/http_server.py` (`healthz`).
   Here: `Readiness`, `routes.ServiceRoutes.healthz` / `.health`. The engine's HTTP app starts
   only once the model is built, so without `--starting-seconds N` (any contract) it is ready at
   once; N holds healthz at 503 for N seconds after the app starts, as a gateway loading a
   large model does.
2. Exactly one SDK: `client/config` and `create_session` refuse any `sdk_version` but 0.24.1
   with 400 "unsupported tinker SDK version ...", and `client/config` answers flags that keep
   that SDK on JSON (`proto_write_fwdbwd` false, ...).
   Miles @ 5d7c1384e: `tinker_frontend/wire.py` (`TINKER_SDK_VERSION_PIN`,
   `CLIENT_CONFIG_FLAGS`), `tinker_frontend/service.py` (`_check_sdk_version`).
   Here: `sdk_version_refusal`, `client_config`, `routes.ServiceRoutes`.
3. JSON forward_backward only (0.25+ SDKs send protobuf): the 0.24.1 body
   `{forward_backward_input: {data, loss_fn, loss_fn_config}, model_id, seq_id}` with TensorData
   `{data, dtype, shape}`; forward goes to `/api/v1/forward` (`forward_input`). Its result is
   JSON: `{loss_fn_output_type, loss_fn_outputs: [{name: TensorData}], metrics}`.
   Miles @ 5d7c1384e: `docs/examples/multi-lora-operations.md` (Tinker SDK frontend),
   `tinker_frontend/wire.py` (`ForwardBackwardRequest`, `CLIENT_CONFIG_FLAGS`).
   Here: `wire.decode_json_forward_backward` (the same `ForwardBackwardIn` the protobuf path
   builds, so it trains identically), `wire.forward_backward_output_json`,
   `routes.TrainingRoutes.forward_backward`; a protobuf body is refused with 415 under `miles`.
   Sample results stay protobuf: the 0.24.1 SDK asks for them with
   `Accept: application/x-protobuf, application/json`.
4. Backpressure is 429 with `Retry-After: 1`: sampling sub-generations (a request weighs its
   `num_samples`) beyond a capacity (Miles' default 64) are refused before the request spends
   its seq_id or makes a future; a request larger than the whole capacity is a 400.
   Miles @ 5d7c1384e: `tinker_frontend/http_server.py` (error mapping, `backpressure_handler`),
   `tinker_frontend/service.py` (`SamplingAdmission`, `sample`).
   Here: `SampleAdmission`, `sampling.SamplingOps.sample`, `--max-active-samples`.
5. 410 for a future the gateway no longer holds: unknown (or from an earlier process), delivered
   and past its replay window, or completed and never retrieved within its retention (Miles
   reaps results not polled for 900 s). 422 for the same (model, seq_id) with a different
   payload; an identical retry gets the original future back. 409 is never used (the SDK
   retries it).
   Miles @ 5d7c1384e: `tinker_frontend/http_server.py` (module docstring),
   `tinker_frontend/state.py` (`FutureStore`, fingerprints), `tinker_frontend/service.py`
   (`retrieve_future`, `_existing`, `reap_once`).
   Here: `futures.FutureStore` (tombstones, `--future-replay-seconds`,
   `--future-retention-seconds`), `jobs.Jobs.retrieve`, `SeqLedger`, `routes._Part._sequenced`.
   The ledger is in memory: an engine restart forgets it.
6. Refused at the boundary, never silently ignored: `ttl_seconds` on save_weights /
   save_weights_for_sampler, `topk_prompt_logprobs` > 0, named sampler checkpoints
   (save_weights_for_sampler with a `path`), sampling sessions from a `model_path`, a LoRA
   `seed`, per-module `train_*` flags, weights-only `load_weights` (optimizer false). Those on a
   request that spent a seq_id become a terminal FAILED(user) future (the seq_id stays spent);
   the others are a 400.
   Miles @ 5d7c1384e: `docs/examples/multi-lora-operations.md` (Frontend-level v1 rejections),
   `tinker_frontend/service.py` (`create_model`, `save_weights`, `load_weights`,
   `save_weights_for_sampler`, `create_sampling_session`, `sample`).
   Here: `MilesRefusals`, `routes`.
7. Latest-only serving: each ephemeral `save_weights_for_sampler` publishes a new version of the
   model's sampler weights, and a sample on a sampling session of an earlier version fails
   (terminal, naming the newer version), also when the publish lands while it runs.
   Base-model sampling sessions are unaffected.
   Miles @ 5d7c1384e: `docs/examples/multi-lora-operations.md` (Mapping),
   `tinker_frontend/service.py` (`_run_sample`).
   Here: `sampler_sessions.SamplerSessions.publish` / `.stale_reason`, `sampling.SamplingOps`.
8. The gap timeout (`--tinker-operation-gap-timeout`, 600 s): Miles executes a model's
   operations strictly by seq_id, so one waiting on a seq_id that never arrives (the 0.24.1 SDK
   can spend one and fail before HTTP) fails after the timeout.
   Miles @ 5d7c1384e: `docs/examples/multi-lora-operations.md` (Operation contract).
   Here: nothing to hold. This engine runs a model's operations in arrival order on its
   training thread (`jobs.py`) and never waits for a missing seq_id, so the stall cannot happen:
   `--operation-gap-timeout` is accepted for parity with the gateway's flag and bounds nothing.

`miles-next` is the same contract with the SDK pin lifted and protobuf forward_backward accepted
(JSON too): the gateway Miles says it plans for tinker >= 0.26.2. It is an assumption about an
unreleased gateway, not a documented one.

In any contract, for tests of clients: `--expire-futures SHARE` (with `--fault-seed`) makes that
share of `retrieve_future` calls that would deliver a completed training result (`ExpiryFault`)
answer 410 and drop the result, as Miles' reaper does. The operation ran once; only its result
is lost. Counted in `GET /api/v1/status` under `faults`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections import OrderedDict
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tbconsole.engine.errors import BadRequest, Unprocessable

if TYPE_CHECKING:
    from tbconsole.engine.futures import Outcome
    from tbconsole.engine.wire import ForwardBackwardIn


class GatewayContract(StrEnum):
    TINKER = "tinker"  # hosted Tinker as the pinned SDK speaks it (the engine's own behaviour)
    MILES = "miles"  # the Miles gateway v1 as documented: tinker==0.24.1, JSON forward_backward
    # The same with the SDK pin lifted and protobuf forward_backward accepted: an assumption
    # about the gateway Miles plans for tinker >= 0.26.2, which is not released.
    MILES_NEXT = "miles-next"

    @property
    def is_miles(self) -> bool:
        return self is not GatewayContract.TINKER

    @classmethod
    def parse(cls, value: str | GatewayContract) -> GatewayContract:
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(c.value for c in cls)
            raise ValueError(f"unknown gateway contract {value!r} (one of: {names})") from None


MILES_SDK_VERSION = "0.24.1"
MILES_DEFAULT_MAX_ACTIVE_SAMPLES = 64
MILES_FUTURE_RETENTION_S = 900.0
MILES_GAP_TIMEOUT_S = 600.0
STARTING_MESSAGE = "trainer is initializing; the service is not ready for SDK traffic yet"


def sdk_version_refusal(contract: GatewayContract, sdk_version: Any) -> str | None:
    """Why this contract refuses a client of `sdk_version`, or None."""
    if contract is not GatewayContract.MILES or sdk_version == MILES_SDK_VERSION:
        return None
    return (
        f"unsupported tinker SDK version '{sdk_version if sdk_version is not None else ''}': this "
        f"deployment serves exactly tinker=={MILES_SDK_VERSION}. Pin tinker=={MILES_SDK_VERSION}."
    )


def client_config(contract: GatewayContract, compress_fwdbwd: bool) -> dict[str, Any]:
    """The flags `/api/v1/client/config` answers."""
    if contract is GatewayContract.TINKER:
        return {
            "pjwt_auth_enabled": False,
            "use_pyqwest_transport": False,
            # Chunks in arrival order: the training worker processes requests as they come.
            "parallel_fwdbwd_chunks": False,
            "proto_compress_fwdbwd": compress_fwdbwd,
            "sample_use_retrieve_futures": False,
            "custom_loss_server_side": False,
            "sample_join_sampling_session": False,
        }
    # Miles' flags: the 0.24.1 SDK stays on JSON (its own default), posts forward on the JSON
    # /forward route, may post forward_backward chunks concurrently (sums: order does not
    # matter here), uses plain httpx, retries samples, and keeps 64 samples in flight.
    proto = contract is GatewayContract.MILES_NEXT
    return {
        "pjwt_auth_enabled": False,
        "credential_default_source": "api_key",
        "parallel_fwdbwd_chunks": True,
        "proto_write_fwdbwd": proto,
        "proto_compress_fwdbwd": proto and compress_fwdbwd,
        "fwd_via_fwdbwd": proto,
        "use_pyqwest_transport": False,
        "create_model_via_load_weights": False,
        "sample_no_retries": False,
        "sample_max_concurrent_requests": MILES_DEFAULT_MAX_ACTIVE_SAMPLES,
    }


class MilesRefusals:
    """What the Miles gateway refuses at its boundary (item 6 of the module docstring): each
    method gives the reason, or None. Whether it is a 400 or a FAILED(user) future is the
    caller's part (`routes.py`), as Miles does it."""

    @staticmethod
    def create_model(lora_config: Any) -> str | None:
        if lora_config is None:
            return None
        if getattr(lora_config, "seed", None) is not None:
            return "lora_config.seed cannot be honored by this deployment; omit it"
        if not all(getattr(lora_config, f, True) for f in ("train_unembed", "train_mlp", "train_attn")):
            return (
                "per-module train flags cannot be honored: trained modules are deployment-wide; "
                "leave train_unembed/train_mlp/train_attn at their defaults"
            )
        return None

    @staticmethod
    def save_weights(ttl_seconds: Any) -> str | None:
        if ttl_seconds is not None:
            return "ttl_seconds is not supported (checkpoints never expire on this gateway); omit it"
        return None

    @staticmethod
    def save_weights_for_sampler(path: Any, ttl_seconds: Any) -> str | None:
        if path is not None:
            return (
                "named sampler checkpoints are not supported (latest-only serving); use "
                "save_weights_and_get_sampling_client for ephemeral sampling"
            )
        if ttl_seconds is not None:
            return "ttl_seconds is not supported for sampler publishes; omit it"
        return None

    @staticmethod
    def load_weights(optimizer: bool) -> str | None:
        if not optimizer:
            return (
                "weights-only restore is not supported (the gateway restores the full training "
                "state); use load_state_with_optimizer / create_training_client_from_state_with_optimizer"
            )
        return None

    @staticmethod
    def sampling_source(model_path: Any) -> str | None:
        if model_path:
            return (
                "sampling from saved checkpoints is not supported (latest-only serving); use "
                "save_weights_and_get_sampling_client on the training client, or a base_model session"
            )
        return None

    @staticmethod
    def sample(topk_prompt_logprobs: Any) -> str | None:
        if topk_prompt_logprobs:
            return "topk_prompt_logprobs is not supported on this gateway"
        return None


# ---------------------------------------------------------------------- request identity
def fingerprint_json(body: Any, drop: tuple[str, ...] = ()) -> str:
    """Digest of a JSON request body (keys sorted), without the fields in `drop`."""
    if isinstance(body, dict) and drop:
        body = {k: v for k, v in body.items() if k not in drop}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint_forward_backward(req: ForwardBackwardIn) -> str:
    """Digest of a decoded forward_backward request: equal for the same content however it was
    encoded (protobuf map order, zstd, JSON)."""
    h = hashlib.sha256()
    head = [req.model_id, req.seq_id, req.loss_fn, sorted(req.loss_fn_config.items()), req.forward_only]
    h.update(json.dumps(head).encode())
    for d in req.data:
        h.update(b"|datum|")
        h.update(d.tokens.tobytes())
        for name in sorted(d.inputs):
            h.update(name.encode() + b"=")
            h.update(d.inputs[name].tobytes())
    return h.hexdigest()


class SeqLedger:
    """Every (scope, seq_id) a client spent, with the fingerprint of the request that spent it
    and the promise it got: an identical retry gets that promise back, a different payload is a
    422. A scope is a model id, or a sampling session id for samples. The oldest entries go past
    `max_entries`."""

    def __init__(self, max_entries: int = 200_000):
        self.max_entries = max_entries
        self._spent: OrderedDict[tuple[str, int], tuple[str, dict[str, Any]]] = OrderedDict()
        # Check, submit and record are one step: two identical requests racing never both run.
        self.lock = asyncio.Lock()

    def prior(self, scope: str, seq_id: int, fingerprint: str) -> dict[str, Any] | None:
        """The promise of an identical earlier request, None if the seq_id is unspent; 422 if
        it was spent by a different request."""
        got = self._spent.get((scope, seq_id))
        if got is None:
            return None
        if got[0] != fingerprint:
            raise Unprocessable(
                f"seq_id {seq_id} of {scope!r} was already used by a different request; a retry must be identical"
            )
        return got[1]

    def spend(self, scope: str, seq_id: int, fingerprint: str, promise: dict[str, Any]) -> None:
        self._spent[(scope, seq_id)] = (fingerprint, promise)
        while len(self._spent) > self.max_entries:
            self._spent.popitem(last=False)


# ---------------------------------------------------------------------- backpressure
class SampleAdmission:
    """Sampling sub-generations in flight, bounded by `capacity` (Miles contracts). Acquired on
    the server's loop, released from the decode thread."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.in_use = 0
        self.rejected = 0
        self._lock = threading.Lock()

    def check_size(self, num_samples: int) -> None:
        if num_samples > self.capacity:
            raise BadRequest(
                f"num_samples={num_samples} exceeds this deployment's sampling capacity of "
                f"{self.capacity} concurrent sub-generations; split the request into smaller waves"
            )

    def try_acquire(self, weight: int) -> bool:
        with self._lock:
            if self.in_use + weight > self.capacity:
                self.rejected += 1
                return False
            self.in_use += weight
            return True

    def release(self, weight: int) -> None:
        with self._lock:
            self.in_use -= weight

    def stats(self) -> dict[str, int]:
        return {"active": self.in_use, "capacity": self.capacity, "rejected": self.rejected}


# ---------------------------------------------------------------------- start-up and faults
class Readiness:
    """Ready `hold_s` seconds after `start()` (the HTTP app's start-up)."""

    def __init__(self, hold_s: float, clock: Any = time.monotonic):
        self.hold_s = hold_s
        self._clock = clock
        self._started: float | None = None

    def start(self) -> None:
        if self._started is None:
            self._started = self._clock()

    def remaining(self) -> float:
        """Seconds until ready (0 once ready)."""
        if self._started is None:
            return self.hold_s
        return max(0.0, self.hold_s - (self._clock() - self._started))


class ExpiryFault:
    """`--expire-futures SHARE`: that share of the `retrieve_future` calls that would deliver a
    completed training result lose it instead (410), drawn from a generator seeded with
    `--fault-seed`. Futures still running, failed ones, and those of other kinds (create/unload,
    loads, samples) are never touched."""

    KINDS = frozenset({"forward_backward", "forward", "optim_step", "save_weights", "save_weights_for_sampler"})

    def __init__(self, share: float, seed: int):
        self.share = share
        self._rng = random.Random(seed)
        self.expired = 0

    def hits(self, kind: str, outcome: Outcome | None) -> bool:
        if self.share <= 0 or outcome is None or outcome.error is not None or kind not in self.KINDS:
            return False
        if self._rng.random() >= self.share:
            return False
        self.expired += 1
        return True

    def stats(self) -> dict[str, int]:
        return {"expired_futures": self.expired}
