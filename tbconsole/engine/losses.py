"""Token-wise losses as the Tinker docs define them, summed over tokens (no mean).

Each takes the model's log-probabilities of the target tokens (`target_logprobs`, [T], with
autograd) and the datum's `loss_fn_inputs` as float tensors, and returns the per-token loss
[T]; the request's loss is the sum. PPO/CISPO clip the ratio p/q to
[clip_low_threshold, clip_high_threshold] (defaults 0.8 and 1.2, i.e. epsilon 0.2), taken from
`loss_fn_config` or, per token, from same-named loss inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from tbconsole.engine.errors import BadRequest

DEFAULT_CLIP_LOW = 0.8
DEFAULT_CLIP_HIGH = 1.2

LossFn = Callable[[torch.Tensor, Mapping[str, torch.Tensor], Mapping[str, float]], torch.Tensor]


def cross_entropy(lp: torch.Tensor, inputs: Mapping[str, torch.Tensor], cfg) -> torch.Tensor:
    weights = inputs.get("weights")
    return -lp if weights is None else -lp * weights


def importance_sampling(lp, inputs, cfg) -> torch.Tensor:
    ratio = torch.exp(lp - inputs["logprobs"])
    return -(ratio * inputs["advantages"])


def _clip_bounds(inputs, cfg, ratio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token bounds from the inputs, else the config's, else the defaults (as tensors)."""
    low = inputs.get("clip_low_threshold", cfg.get("clip_low_threshold", DEFAULT_CLIP_LOW))
    high = inputs.get("clip_high_threshold", cfg.get("clip_high_threshold", DEFAULT_CLIP_HIGH))
    return (torch.as_tensor(low, dtype=ratio.dtype, device=ratio.device),
            torch.as_tensor(high, dtype=ratio.dtype, device=ratio.device))  # fmt: skip


def ppo(lp, inputs, cfg) -> torch.Tensor:
    adv = inputs["advantages"]
    ratio = torch.exp(lp - inputs["logprobs"])
    low, high = _clip_bounds(inputs, cfg, ratio)
    clipped = torch.clamp(ratio, low, high)
    return -torch.minimum(ratio * adv, clipped * adv)


def cispo(lp, inputs, cfg) -> torch.Tensor:
    ratio = torch.exp(lp - inputs["logprobs"])
    low, high = _clip_bounds(inputs, cfg, ratio)
    return -(torch.clamp(ratio, low, high).detach() * lp * inputs["advantages"])


LOSSES: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
}

REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens",),
    "importance_sampling": ("target_tokens", "logprobs", "advantages"),
    "ppo": ("target_tokens", "logprobs", "advantages"),
    "cispo": ("target_tokens", "logprobs", "advantages"),
}
KNOWN_INPUTS = {
    "target_tokens", "weights", "logprobs", "advantages", "clip_low_threshold",
    "clip_high_threshold", "mask",
}  # fmt: skip
CONFIG_KEYS = {"clip_low_threshold", "clip_high_threshold"}


def check_request(loss_fn: str, config: Mapping[str, float]) -> None:
    if loss_fn not in LOSSES:
        raise BadRequest(f"unsupported loss_fn {loss_fn!r}; supported: {sorted(LOSSES)}")
    unknown = set(config) - CONFIG_KEYS
    if unknown:
        raise BadRequest(f"unsupported loss_fn_config keys {sorted(unknown)} for {loss_fn}")
    low = config.get("clip_low_threshold", DEFAULT_CLIP_LOW)
    high = config.get("clip_high_threshold", DEFAULT_CLIP_HIGH)
    if not (0 <= low <= 1 <= high):
        raise BadRequest(f"clip thresholds must satisfy 0 <= low <= 1 <= high, got {low}, {high}")


def check_inputs(loss_fn: str, names: set[str], index: int) -> None:
    missing = [k for k in REQUIRED_INPUTS[loss_fn] if k not in names]
    if missing:
        raise BadRequest(f"datum {index}: loss_fn {loss_fn} needs loss_fn_inputs {missing}")
    unknown = names - KNOWN_INPUTS
    if unknown:
        raise BadRequest(f"datum {index}: unknown loss_fn_inputs {sorted(unknown)}")
