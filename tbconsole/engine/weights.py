"""The matrices a forward pass multiplies by: the frozen base in the fused layout the model uses,
with a LoRA adapter applied on the side (training) or merged in (sampling)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tbconsole.engine.config import UNEMBED_TARGET
from tbconsole.engine.lora import LoraAdapter

if TYPE_CHECKING:
    from tbconsole.engine.model import Qwen3LM


class Weights:
    """The matrices one forward pass multiplies by, in the fused layout the model uses.

    Per layer q|k|v and gate|up are concatenated: decoding a few tokens is bound by per-op
    overhead (CPU) or launch overhead (GPU), so fewer, larger matmuls make a step fast.

    * `Weights.training(model, adapter)`: base matrices plus the LoRA deltas applied on the
      side, built inside the autograd graph (A matrices stacked, B block-diagonal).
    * `Weights.merged(model, adapter)`: W + scale * B @ A folded in once, for sampling. A merged
      copy of a small model costs a few MB and removes all adapter work from every decode step.
    """

    def __init__(self, layers: list[dict], head: torch.Tensor, head_lora, lora: list[dict], scale):
        self.layers = layers
        self.head = head
        self.head_lora = head_lora
        self.lora = lora
        self.scale = scale

    @staticmethod
    def _lora_layers(model: Qwen3LM, adapter: LoraAdapter) -> list[dict]:
        cfg = model.cfg
        h, nh, nkv, d, inter = (
            cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
            cfg.intermediate_size,
        )  # fmt: skip
        groups = {
            "qkv": (["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
                    [(nh * d, h), (nkv * d, h), (nkv * d, h)]),
            "o": (["self_attn.o_proj"], [(h, nh * d)]),
            "gate_up": (["mlp.gate_proj", "mlp.up_proj"], [(inter, h), (inter, h)]),
            "down": (["mlp.down_proj"], [(h, inter)]),
        }  # fmt: skip
        out = []
        for i in range(cfg.num_hidden_layers):
            layer: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
            for key, (names, dims) in groups.items():
                pairs = [adapter.weights.get(f"model.layers.{i}.{n}") for n in names]
                present = [p for p in pairs if p is not None]
                if not present:
                    continue
                ref = present[0][0]
                filled = [
                    p if p is not None
                    else (ref.new_zeros(adapter.rank, d_in), ref.new_zeros(d_out, adapter.rank))
                    for p, (d_out, d_in) in zip(pairs, dims, strict=True)
                ]  # fmt: skip
                if len(filled) == 1:
                    layer[key] = filled[0]
                else:
                    layer[key] = (
                        torch.cat([a for a, _ in filled]),
                        torch.block_diag(*[b for _, b in filled]),
                    )
            out.append(layer)
        return out

    @classmethod
    def base(cls, model: Qwen3LM) -> Weights:
        return cls(model.base_layers(), model.lm_head.weight, None, [], 1.0)

    @classmethod
    def training(cls, model: Qwen3LM, adapter: LoraAdapter | None) -> Weights:
        if adapter is None:
            return cls.base(model)
        return cls(
            model.base_layers(),
            model.lm_head.weight,
            adapter.weights.get(UNEMBED_TARGET),
            cls._lora_layers(model, adapter),
            adapter.scale,
        )

    @classmethod
    @torch.no_grad()
    def merged(cls, model: Qwen3LM, adapter: LoraAdapter | None) -> Weights:
        if adapter is None:
            return cls.base(model)
        lora = cls._lora_layers(model, adapter)
        layers = []
        for base, deltas in zip(model.base_layers(), lora, strict=True):
            merged = dict(base)
            for key, (a, b) in deltas.items():
                merged[key] = base[key] + (b @ a) * adapter.scale
            layers.append(merged)
        head = model.lm_head.weight
        head_ab = adapter.weights.get(UNEMBED_TARGET)
        if head_ab is not None:
            head = head + (head_ab[1] @ head_ab[0]) * adapter.scale
        return cls(layers, head, None, [], 1.0)
