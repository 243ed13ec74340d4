"""Training runs: a LoRA adapter plus its AdamW state on the shared frozen base model.

All methods run on the engine's single training worker thread, one request at a time, in the
order requests arrived: gradients accumulate over `forward_backward` calls until `optim_step`,
exactly as the SDK expects.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tbconsole.engine.config import ModelConfig
from tbconsole.engine.errors import BadRequest, TooLarge
from tbconsole.engine.host import to_host
from tbconsole.engine.lora import LoraAdapter
from tbconsole.engine.losses import LOSSES, check_inputs, check_request
from tbconsole.engine.model import Qwen3LM
from tbconsole.engine.weights import Weights
from tbconsole.engine.wire import DatumIn

LORA_ALPHA = 32.0


@dataclass
class LoraSettings:
    rank: int
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = True
    seed: int | None = None
    alpha: float = LORA_ALPHA

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "train_attn": self.train_attn, "train_mlp": self.train_mlp,
            "train_unembed": self.train_unembed, "seed": self.seed, "alpha": self.alpha,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoraSettings:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Limits:
    max_context: int
    max_tokens_per_request: int  # tokens in one forward/forward_backward request
    micro_batch_tokens: int  # padded tokens per internal micro-batch (bounds activation memory)


@dataclass
class TrainingRun:
    model_id: str
    base_model: str
    lora: LoraSettings
    adapter: LoraAdapter
    user_metadata: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    last_request: float = field(default_factory=time.time)
    optimizer: torch.optim.AdamW | None = None
    steps: int = 0
    pending_grad: bool = False
    # Restored after a restart that lost gradients forward_backward had accumulated: the next
    # optim_step is refused (it would apply an incomplete gradient).
    lost_grads: bool = False

    def touch(self) -> None:
        self.last_request = time.time()

    def info(self) -> dict[str, Any]:
        return {
            "base_model": self.base_model,
            "lora": self.lora.to_dict(),
            "user_metadata": self.user_metadata,
            "created": self.created,
        }


class Trainer:
    def __init__(self, model: Qwen3LM, cfg: ModelConfig, device: torch.device, limits: Limits):
        self.model = model
        self.cfg = cfg
        self.device = device
        self.limits = limits

    # ------------------------------------------------------------------ creation
    def new_adapter(self, lora: LoraSettings) -> LoraAdapter:
        if not (1 <= lora.rank <= 1024):
            raise BadRequest(f"LoRA rank must be in [1, 1024], got {lora.rank}")
        if not (lora.train_attn or lora.train_mlp or lora.train_unembed):
            raise BadRequest("at least one of train_attn, train_mlp, train_unembed must be true")
        targets = self.cfg.lora_targets(attn=lora.train_attn, mlp=lora.train_mlp, unembed=lora.train_unembed)
        adapter = LoraAdapter.create(self.model, targets, rank=lora.rank, alpha=lora.alpha, seed=lora.seed)
        return adapter.requires_grad_(True)

    # ------------------------------------------------------------------ validation
    def validate(self, data: list[DatumIn], loss_fn: str, config: dict[str, float]) -> None:
        """Everything that can be refused before any compute (runs on the HTTP thread)."""
        check_request(loss_fn, config)
        if not data:
            raise BadRequest("no data")
        total = 0
        for i, d in enumerate(data):
            n = len(d.tokens)
            if n == 0:
                raise BadRequest(f"datum {i}: empty model_input")
            if n > self.limits.max_context:
                raise TooLarge(f"datum {i}: {n} tokens exceed the model's context of {self.limits.max_context}")
            check_inputs(loss_fn, set(d.inputs), i)
            for name, arr in d.inputs.items():
                if arr.shape != (n,):
                    raise BadRequest(
                        f"datum {i}: loss_fn_inputs[{name!r}] has {arr.size} values, model_input has {n} tokens"
                    )
                if name != "target_tokens" and not np.isfinite(arr).all():
                    raise BadRequest(f"datum {i}: loss_fn_inputs[{name!r}] has non-finite values")
            for name, arr in (("model_input", d.tokens), ("target_tokens", d.inputs["target_tokens"])):
                if arr.min() < 0 or arr.max() >= self.cfg.vocab_size:
                    raise BadRequest(f"datum {i}: {name} has token ids outside [0, {self.cfg.vocab_size})")
            total += n
        if total > self.limits.max_tokens_per_request:
            raise TooLarge(
                f"request has {total} tokens; the engine's per-request budget is "
                f"{self.limits.max_tokens_per_request} (split it into several forward_backward calls)"
            )

    # ------------------------------------------------------------------ compute
    def _micro_batches(self, data: list[DatumIn]) -> list[list[int]]:
        """Indices grouped so that rows x longest row <= micro_batch_tokens (longest first)."""
        order = sorted(range(len(data)), key=lambda i: -len(data[i].tokens))
        batches: list[list[int]] = []
        cur: list[int] = []
        for i in order:
            longest = len(data[cur[0]].tokens) if cur else len(data[i].tokens)
            if cur and longest * (len(cur) + 1) > self.limits.micro_batch_tokens:
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
        return batches

    def forward_backward(
        self,
        run: TrainingRun,
        data: list[DatumIn],
        loss_fn: str,
        config: dict[str, float],
        forward_only: bool,
    ) -> tuple[list[dict[str, np.ndarray]], dict[str, float]]:
        loss = LOSSES[loss_fn]
        # Per micro-batch: (datum indices, their lengths, logprobs, elementwise loss, loss sum),
        # all still on the device. They are copied to the host once, after every backward is
        # queued: a copy per datum would make the host wait for the device each time, and the
        # device would idle while the host queues the next kernels.
        pending: list[tuple[list[int], list[int], torch.Tensor, torch.Tensor, torch.Tensor]] = []
        try:
            for idx in self._micro_batches(data):
                with torch.set_grad_enabled(not forward_only):
                    lengths = [len(data[i].tokens) for i in idx]
                    tokens = torch.zeros(len(idx), max(lengths), dtype=torch.long)
                    for row, i in enumerate(idx):
                        tokens[row, : lengths[row]] = torch.from_numpy(data[i].tokens)
                    tokens = tokens.to(self.device)
                    w = Weights.training(self.model, run.adapter)
                    hidden = self.model.hidden_states(tokens, w)
                    flat = torch.cat([hidden[row, :n] for row, n in enumerate(lengths)])
                    targets = torch.cat([torch.from_numpy(data[i].inputs["target_tokens"]) for i in idx]).to(
                        self.device
                    )
                    lp_all = self.model.token_logprobs(flat, targets, w)
                    total = lp_all.new_zeros(())
                    start = 0
                    losses = []
                    for row, i in enumerate(idx):
                        n = lengths[row]
                        lp = lp_all[start : start + n]
                        start += n
                        inputs = {
                            k: torch.from_numpy(v).to(self.device)
                            for k, v in data[i].inputs.items()
                            if k != "target_tokens"
                        }
                        elementwise = loss(lp, inputs, config)
                        total = total + elementwise.sum()
                        losses.append(elementwise.detach())
                    if not forward_only:
                        total.backward()
                        run.pending_grad = True
                    pending.append((idx, lengths, lp_all.detach(), torch.cat(losses), total.detach()))
            outputs, loss_sum = self._outputs_to_host(pending, len(data))
        except Exception:
            if not forward_only:
                # A half-applied request must not leak partial gradients into the next step.
                self.zero_grad(run)
            raise
        if not math.isfinite(loss_sum):
            if not forward_only:
                self.zero_grad(run)
            raise BadRequest(f"loss is not finite ({loss_sum}); gradients were discarded")
        return outputs, {"loss:sum": loss_sum}

    @staticmethod
    def _outputs_to_host(
        pending: list[tuple[list[int], list[int], torch.Tensor, torch.Tensor, torch.Tensor]], n_data: int
    ) -> tuple[list[dict[str, np.ndarray]], float]:
        """Every datum's logprobs and elementwise loss as numpy, in datum order, and the summed
        loss (a sum of per-micro-batch sums, in micro-batch order), from one host copy."""
        parts = [t.float().reshape(-1) for _, _, lp, el, total in pending for t in (lp, el, total)]
        host = to_host({"all": torch.cat(parts)})["all"].numpy()
        outputs: list[dict[str, np.ndarray] | None] = [None] * n_data
        loss_sum = 0.0
        at = 0
        for idx, lengths, lp, _, _ in pending:
            count = lp.numel()
            lp_host, el_host = host[at : at + count], host[at + count : at + 2 * count]
            loss_sum += float(host[at + 2 * count])
            at += 2 * count + 1
            start = 0
            for i, n in zip(idx, lengths, strict=True):
                outputs[i] = {"logprobs": lp_host[start : start + n], "elementwise_loss": el_host[start : start + n]}
                start += n
        return [o for o in outputs if o is not None], loss_sum

    @staticmethod
    def zero_grad(run: TrainingRun) -> None:
        for p in run.adapter.parameters():
            p.grad = None
        run.pending_grad = False

    def optim_step(self, run: TrainingRun, params: Any) -> dict[str, float]:
        lr = float(params.learning_rate)
        betas = (float(params.beta1), float(params.beta2))
        if not (lr >= 0 and 0 <= betas[0] < 1 and 0 <= betas[1] < 1 and params.eps >= 0):
            raise BadRequest(f"invalid AdamParams {params}")
        plist = run.adapter.parameters()
        if run.optimizer is None:
            run.optimizer = torch.optim.AdamW(plist, lr=lr, betas=betas, eps=params.eps)
        for group in run.optimizer.param_groups:
            group.update(lr=lr, betas=betas, eps=float(params.eps))
            group["weight_decay"] = float(params.weight_decay)
        grads = [p.grad for p in plist if p.grad is not None]
        # The norm stays on the device until the step is queued (reading it waits for the
        # device); on the device it is one fused kernel for all the adapter's gradients.
        norm = torch.nn.utils.get_total_norm(grads) if grads else None
        if params.grad_clip_norm and params.grad_clip_norm > 0 and norm is not None:
            torch.nn.utils.clip_grads_with_norm_(plist, float(params.grad_clip_norm), norm)
        if grads:
            run.optimizer.step()
        grad_norm = float(norm) if norm is not None else 0.0
        self.zero_grad(run)
        run.steps += 1
        return {"grad_norm:mean": grad_norm, "learning_rate:mean": lr}

    # ------------------------------------------------------------------ state
    def optimizer_state(self, run: TrainingRun) -> dict[str, Any]:
        return {
            "optimizer": run.optimizer.state_dict() if run.optimizer is not None else None,
            "steps": run.steps,
        }

    def load_optimizer_state(self, run: TrainingRun, state: dict[str, Any]) -> None:
        run.steps = int(state.get("steps", 0))
        if state.get("optimizer") is not None:
            run.optimizer = torch.optim.AdamW(run.adapter.parameters())
            run.optimizer.load_state_dict(state["optimizer"])
            # load_state_dict keeps the saved tensors' device; move to ours.
            for st in run.optimizer.state.values():
                for k, v in st.items():
                    if isinstance(v, torch.Tensor) and k != "step":
                        st[k] = v.to(self.device)
