"""LoRA adapters: low-rank deltas kept outside the frozen base model, in PEFT's naming.

One base model serves many adapters (each training run, each sampler snapshot); `Weights`
(weights.py) applies an adapter to a forward pass, `merge_adapter_into_base` folds a saved one
into the base weights for good (a warm-start policy).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tbconsole.engine.host import to_host

if TYPE_CHECKING:
    from tbconsole.engine.model import Qwen3LM


class LoraAdapter:
    """Low-rank deltas `W + (alpha/r) * B @ A` for a set of named linear layers.

    Kept outside the model so that one base model serves many adapters (each training run,
    each saved sampler snapshot). B starts at zero, so a fresh adapter reproduces the base model.
    """

    def __init__(
        self,
        weights: dict[str, tuple[torch.Tensor, torch.Tensor]],
        *,
        rank: int,
        alpha: float,
    ):
        self.weights = weights
        self.rank = rank
        self.alpha = alpha
        self.scale = alpha / rank

    @classmethod
    def create(
        cls,
        model: Qwen3LM,
        targets: Iterable[str],
        *,
        rank: int,
        alpha: float,
        seed: int | None,
    ) -> LoraAdapter:
        gen = torch.Generator(device="cpu")
        gen.manual_seed(0 if seed is None else seed)
        linears = dict(model.named_linears())
        weights: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for name in targets:
            out_f, in_f = linears[name].weight.shape
            # Same init as PEFT: A ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)).
            bound = 1.0 / math.sqrt(in_f)
            a = (torch.rand(rank, in_f, generator=gen) * 2 - 1) * bound
            b = torch.zeros(out_f, rank)
            device = linears[name].weight.device
            weights[name] = (a.to(device), b.to(device))
        return cls(weights, rank=rank, alpha=alpha)

    def parameters(self) -> list[torch.Tensor]:
        return [t for pair in self.weights.values() for t in pair]

    def requires_grad_(self, flag: bool = True) -> LoraAdapter:
        for t in self.parameters():
            t.requires_grad_(flag)
        return self

    def snapshot(self) -> LoraAdapter:
        """A detached copy, for a sampler that must not change when training continues."""
        return LoraAdapter(
            {k: (a.detach().clone(), b.detach().clone()) for k, (a, b) in self.weights.items()},
            rank=self.rank,
            alpha=self.alpha,
        )

    @torch.no_grad()
    def copy_(self, other: LoraAdapter) -> None:
        """Take `other`'s values (same layers and rank) in place: these tensors stay the ones a
        training run's optimizer and autograd know."""
        for name, (a, b) in self.weights.items():
            a.copy_(other.weights[name][0])
            b.copy_(other.weights[name][1])

    def tensors(self) -> dict[str, torch.Tensor]:
        """The live tensors (on the adapter's device) under their PEFT names."""
        out = {}
        for name, (a, b) in self.weights.items():
            out[f"base_model.model.{name}.lora_A.weight"] = a
            out[f"base_model.model.{name}.lora_B.weight"] = b
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """PEFT naming, so an adapter can later be exported for HF/PEFT tooling; on the CPU."""
        return to_host(self.tensors())

    @classmethod
    def from_state_dict(
        cls, sd: dict[str, torch.Tensor], *, rank: int, alpha: float, device: torch.device
    ) -> LoraAdapter:
        weights = {}
        prefix = "base_model.model."
        for key, a in sd.items():
            if not key.endswith(".lora_A.weight"):
                continue
            name = key[len(prefix) : -len(".lora_A.weight")]
            b = sd[f"{prefix}{name}.lora_B.weight"]
            weights[name] = (a.to(device).contiguous(), b.to(device).contiguous())
        return cls(weights, rank=rank, alpha=alpha)


def merge_adapter_into_base(model: Qwen3LM, folder: Path) -> None:
    """Fold a saved LoRA adapter (PEFT folder) into the base weights: W += (alpha/r)·B·A."""
    from safetensors.torch import load_file

    config_path, weights_path = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    if not (config_path.is_file() and weights_path.is_file()):
        raise FileNotFoundError(f"{folder}: no adapter (run `tbconsole warmup --out {folder}` to make it)")
    config = json.loads(config_path.read_text())
    adapter = LoraAdapter.from_state_dict(
        load_file(str(weights_path)),
        rank=int(config["r"]),
        alpha=float(config["lora_alpha"]),
        device=torch.device("cpu"),
    )
    linears = dict(model.named_linears())
    with torch.no_grad():
        for name, (a, b) in adapter.weights.items():
            weight = linears[name].weight
            weight += ((b @ a) * adapter.scale).to(weight.device, weight.dtype)
    model.base_weights_changed()
