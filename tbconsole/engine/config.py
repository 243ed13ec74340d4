"""Model architecture settings and the local model presets (no torch import: cheap to load).

Why the default is this size (`tbconsole/qwen3-tiny`: 4 layers, hidden 256, 8k vocabulary):
the engine must sample 256 tokens after a 2,000-token prompt in <= 2 s on 2 shared CPU cores,
and train a 4 x 2k-token batch in seconds. Decoding one token is a chain of ~100 small ops
whose cost is weight-memory traffic plus per-op overhead, so both layers and vocabulary are
kept small: with the real Qwen3.5 vocabulary (248k ids) the unembedding alone would read ~60 MB
per token and a 4 x 2k training batch would need 8k x 248k logits. The shipped byte-level BPE
(8,192 ids, Qwen3.5's special tokens) keeps the chat format identical (the cookbook's `qwen3_5`
renderer runs on it unchanged) at a 30x smaller unembedding. Measured on this machine (2 cores):
prefill 2k ~0.25 s, ~4-5 ms per decoded token, 4 x 2k LoRA train step ~5-8 s. The `small` preset
is for GPUs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

ATTN_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
UNEMBED_TARGET = "lm_head"


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    init_std: float = 0.02

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def hf_config_dict(self) -> dict:
        """The matching `transformers.Qwen3Config` fields (config.json of an HF export)."""
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "hidden_act": "silu",
            "attention_bias": False,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
        }

    def lora_targets(self, *, attn: bool, mlp: bool, unembed: bool) -> list[str]:
        """Fully qualified names of the linear layers that get adapters."""
        names: list[str] = []
        for i in range(self.num_hidden_layers):
            if attn:
                names += [f"model.layers.{i}.self_attn.{t}" for t in ATTN_TARGETS]
            if mlp:
                names += [f"model.layers.{i}.mlp.{t}" for t in MLP_TARGETS]
        if unembed:
            names.append(UNEMBED_TARGET)
        return names


TINY = ModelConfig(
    vocab_size=8192,
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
)

SMALL = ModelConfig(
    vocab_size=8192,
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
)
