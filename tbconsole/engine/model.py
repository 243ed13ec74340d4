"""A small causal LM of the Qwen3 architecture and its per-row KV cache (LoRA adapters: `lora.py`;
the matrices a pass multiplies by, base plus adapter: `weights.py`).

Written directly in torch instead of wrapping `transformers.Qwen3ForCausalLM` because the engine
needs what the HF module makes awkward or slow on 2 CPU cores:

* one frozen base model shared by every training run and sampler snapshot, with the LoRA
  adapter passed per call as a `Weights` (training: base + LoRA on the side, inside autograd;
  sampling: LoRA merged into a private copy once per snapshot, so decode pays nothing for it);
* a decode step that batches the linear layers over many sequences while each sequence keeps
  its own exactly-sized KV cache (no padding masks, so batched and unbatched decoding see the
  same attention numerics), and prefix reuse (`extend_hidden`);
* few ops per step (fused q|k|v and gate|up matmuls): a 256-token sample is 256 sequential
  steps, each bound by memory traffic and per-op overhead.

Parameter names and maths match `transformers.Qwen3ForCausalLM` (q/k RMSNorm per head, rotary
embeddings with rotate-half, grouped-query attention, SwiGLU MLP), so `state_dict()` loads into
the HF class unchanged; tests/engine check the logits against it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from tbconsole.engine.config import ModelConfig

if TYPE_CHECKING:
    from tbconsole.engine.weights import Weights


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.n_heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.n_kv * d, bias=False)
        self.v_proj = nn.Linear(h, self.n_kv * d, bias=False)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class RowCache:
    """KV cache of one sequence: [layers, 2, kv_heads, capacity, head_dim], filled to `length`."""

    def __init__(self, cfg: ModelConfig, capacity: int, device: torch.device, dtype: torch.dtype):
        self.kv = torch.empty(
            cfg.num_hidden_layers, 2, cfg.num_key_value_heads, capacity, cfg.head_dim,
            device=device, dtype=dtype,
        )  # fmt: skip
        self.length = 0

    @classmethod
    def like(cls, other: RowCache, capacity: int) -> RowCache:
        cache = cls.__new__(cls)
        layers, two, nkv, _, d = other.kv.shape
        cache.kv = other.kv.new_empty(layers, two, nkv, capacity, d)
        cache.length = 0
        return cache

    @property
    def capacity(self) -> int:
        return self.kv.shape[3]

    def copy_prefix_from(self, other: RowCache, n: int | None = None) -> None:
        n = other.length if n is None else min(n, other.length)
        self.kv[:, :, :, :n].copy_(other.kv[:, :, :, :n])
        self.length = n


class Qwen3LM(nn.Module):
    inv_freq: torch.Tensor  # buffers (register_buffer)
    rot_t: torch.Tensor

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        d = cfg.head_dim
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # rotate_half(x) == x @ rot: one small matmul instead of chunk/neg/cat (exact in fp32).
        rot = torch.zeros(d, d)
        half = d // 2
        rot[half:, :half] = -torch.eye(half)
        rot[:half, half:] = torch.eye(half)
        self.register_buffer("rot_t", rot.t().contiguous(), persistent=False)
        self._base_layers: list[dict[str, torch.Tensor]] | None = None

    # ----------------------------------------------------------------------------- setup
    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Seeded random init (HF's `_init_weights` for Qwen3: N(0, 0.02), norms at 1)."""
        gen = torch.Generator(device="cpu")
        gen.manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * self.cfg.init_std)
        self._base_layers = None

    def named_linears(self) -> Iterable[tuple[str, nn.Linear]]:
        for name, mod in self.named_modules():
            if isinstance(mod, nn.Linear):
                yield name, mod

    def base_layers(self) -> list[dict[str, torch.Tensor]]:
        """Fused base matrices (q|k|v, gate|up: see `Weights`), built once: the base is frozen."""
        if self._base_layers is None:
            with torch.no_grad():
                self._base_layers = [self._fused_layer(self._decoder(i)) for i in range(self.cfg.num_hidden_layers)]
        return self._base_layers

    def _decoder(self, i: int) -> DecoderLayer:
        return cast(DecoderLayer, self.model.layers[i])

    def _fused_layer(self, layer: DecoderLayer) -> dict[str, torch.Tensor]:
        at, mlp = layer.self_attn, layer.mlp
        return {
            "qkv": torch.cat([at.q_proj.weight, at.k_proj.weight, at.v_proj.weight]),
            "o": at.o_proj.weight,
            "gate_up": torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
            "down": mlp.down_proj.weight,
            "qk_norm": torch.cat(
                [
                    at.q_norm.weight.expand(self.cfg.num_attention_heads, -1),
                    at.k_norm.weight.expand(self.cfg.num_key_value_heads, -1),
                ]
            ),
        }

    def load_base_state_dict(self, sd: dict[str, torch.Tensor]) -> None:
        self.load_state_dict(sd)
        self.base_weights_changed()

    def base_weights_changed(self) -> None:
        """Drop the fused copies built from the old base weights."""
        self._base_layers = None

    # ----------------------------------------------------------------------------- pieces
    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin for positions [B, T] -> [B, T, 1, d] (broadcast over heads)."""
        freqs = positions.to(torch.float32)[..., None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, :, None]
        return emb.cos(), emb.sin()

    @staticmethod
    def _mm(x: torch.Tensor, w: torch.Tensor, ab, scale: float) -> torch.Tensor:
        y = F.linear(x, w)
        if ab is not None:
            y = y + F.linear(F.linear(x, ab[0]), ab[1]) * scale
        return y

    def _layer(self, i: int, x, rope, w: Weights, attend):
        """One decoder layer. `attend(q, k, v)` gets q [B, nh, T, d], k/v [B, nkv, T, d]
        (normed, rotated) and returns the attention output [B, nh, T, d]."""
        cfg = self.cfg
        layer = self._decoder(i)
        lw = w.layers[i]
        lora = w.lora[i] if w.lora else {}
        b, t, _ = x.shape
        nh, nkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim

        h = layer.input_layernorm(x)
        qkv = self._mm(h, lw["qkv"], lora.get("qkv"), w.scale).view(b, t, nh + 2 * nkv, d)
        qk, v = qkv[:, :, : nh + nkv], qkv[:, :, nh + nkv :]
        qk = F.rms_norm(qk, (d,), None, cfg.rms_norm_eps) * lw["qk_norm"]
        cos, sin = rope
        # F.linear, not torch.matmul: matmul of a 4-D view by a matrix takes a path that is
        # ~100x slower on CPU for these shapes.
        qk = (qk * cos + F.linear(qk, self.rot_t) * sin).transpose(1, 2)
        out = attend(qk[:, :nh], qk[:, nh:], v.transpose(1, 2))
        out = out.transpose(1, 2).reshape(b, t, nh * d)
        x = x + self._mm(out, lw["o"], lora.get("o"), w.scale)

        h = layer.post_attention_layernorm(x)
        gate, up = self._mm(h, lw["gate_up"], lora.get("gate_up"), w.scale).chunk(2, dim=-1)
        return x + self._mm(F.silu(gate) * up, lw["down"], lora.get("down"), w.scale)

    # ----------------------------------------------------------------------------- passes
    def hidden_states(
        self, tokens: torch.Tensor, w: Weights, *, cache_out: list[RowCache] | None = None
    ) -> torch.Tensor:
        """Full causal pass over right-padded rows `tokens` [B, T] -> final-norm hidden [B, T, H].

        Right padding needs no mask: a causal row never attends to the pads after it. With
        `cache_out`, row i's keys/values for all T positions are written into cache_out[i].
        """
        b, t = tokens.shape
        rope = self._rope(torch.arange(t, device=tokens.device).expand(b, t))
        gqa = self.cfg.num_attention_heads != self.cfg.num_key_value_heads
        x = self.model.embed_tokens(tokens)
        for i in range(self.cfg.num_hidden_layers):

            def attend(q, k, v, i=i):
                if cache_out is not None:
                    for row, cache in enumerate(cache_out):
                        cache.kv[i, 0, :, :t].copy_(k[row])
                        cache.kv[i, 1, :, :t].copy_(v[row])
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

            x = self._layer(i, x, rope, w, attend)
        if cache_out is not None:
            for cache in cache_out:
                cache.length = t
        return self.model.norm(x)

    def decode_hidden(self, tokens: torch.Tensor, caches: list[RowCache], w: Weights):
        """One token per row `tokens` [B] at each row's cache length -> hidden [B, H].

        Linear layers run batched; attention runs per row over that row's own cache, so a row's
        result does not depend on what else is in the batch (and needs no padding mask).
        """
        lengths = [c.length for c in caches]
        rope = self._rope(torch.tensor(lengths, device=tokens.device)[:, None])
        gqa = self.cfg.num_attention_heads != self.cfg.num_key_value_heads
        x = self.model.embed_tokens(tokens[:, None])  # [B, 1, H]
        for i in range(self.cfg.num_hidden_layers):

            def attend(q, k, v, i=i):
                kv_new = torch.stack((k[:, :, 0], v[:, :, 0]), dim=1)  # [B, 2, nkv, d]
                outs = []
                for row, cache in enumerate(caches):
                    n = lengths[row]
                    cache.kv[i, :, :, n].copy_(kv_new[row])
                    kv = cache.kv[i, :, :, : n + 1]
                    outs.append(
                        F.scaled_dot_product_attention(q[row : row + 1], kv[0][None], kv[1][None], enable_gqa=gqa)
                    )
                return torch.cat(outs, dim=0) if len(outs) > 1 else outs[0]

            x = self._layer(i, x, rope, w, attend)
        for cache in caches:
            cache.length += 1
        return self.model.norm(x)[:, 0]

    def extend_hidden(self, tokens: torch.Tensor, cache: RowCache, w: Weights) -> torch.Tensor:
        """Append a chunk `tokens` [T] to one row's cache (prefix reuse) -> hidden [T, H]."""
        t = tokens.shape[0]
        start = cache.length
        rope = self._rope(torch.arange(start, start + t, device=tokens.device)[None])
        gqa = self.cfg.num_attention_heads != self.cfg.num_key_value_heads
        # Query j (absolute start+j) sees keys 0..start+j: a bottom-right-aligned causal mask.
        mask = torch.ones(t, start + t, dtype=torch.bool, device=tokens.device).tril(start)
        x = self.model.embed_tokens(tokens[None])
        for i in range(self.cfg.num_hidden_layers):

            def attend(q, k, v, i=i):
                cache.kv[i, 0, :, start : start + t].copy_(k[0])
                cache.kv[i, 1, :, start : start + t].copy_(v[0])
                kv = cache.kv[i, :, :, : start + t]
                return F.scaled_dot_product_attention(q, kv[0][None], kv[1][None], attn_mask=mask, enable_gqa=gqa)

            x = self._layer(i, x, rope, w, attend)
        cache.length = start + t
        return self.model.norm(x)[0]

    def logits(self, hidden: torch.Tensor, w: Weights) -> torch.Tensor:
        return self._mm(hidden, w.head, w.head_lora, w.scale)

    def token_logprobs(
        self, hidden: torch.Tensor, targets: torch.Tensor, w: Weights, *, chunk: int = 2048
    ) -> torch.Tensor:
        """log p(targets) for hidden [N, H], targets [N] -> [N], never holding N x vocab logits.

        Under autograd each chunk is recomputed in backward (checkpoint), so memory stays at one
        chunk of logits however long the batch is.
        """

        def piece(h: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            lg = self.logits(h, w).float()
            return lg.gather(-1, tgt[:, None])[:, 0] - torch.logsumexp(lg, dim=-1)

        outs = []
        grad = torch.is_grad_enabled()
        for s in range(0, hidden.shape[0], chunk):
            h, tgt = hidden[s : s + chunk], targets[s : s + chunk]
            outs.append(checkpoint(piece, h, tgt, use_reentrant=False) if grad else piece(h, tgt))
        return torch.cat(outs) if outs else hidden.new_zeros(0)


def build_model(cfg: ModelConfig, *, seed: int, device: torch.device) -> Qwen3LM:
    model = Qwen3LM(cfg)
    model.init_weights(seed)
    model.requires_grad_(False)
    model.eval()
    return model.to(device)
