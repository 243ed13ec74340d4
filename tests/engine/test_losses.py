"""PPO, importance-sampling and CISPO against references written here, independently of the
engine: loss values and per-token losses from `forward`, and gradients by comparing an
optimizer step on the engine's loss with one on `forward_backward_custom` (the SDK computes the
reference loss's gradient client-side and sends it as cross-entropy weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tinker import types

pytestmark = pytest.mark.e2e

LOW, HIGH = 0.8, 1.2


def _ref_is(p: list[float], q: list[float], adv: list[float]) -> list[float]:
    return [-math.exp(pi - qi) * ai for pi, qi, ai in zip(p, q, adv, strict=True)]


def _ref_ppo(p, q, adv, low=LOW, high=HIGH) -> list[float]:
    out = []
    for pi, qi, ai in zip(p, q, adv, strict=True):
        r = math.exp(pi - qi)
        rc = min(max(r, low), high)
        out.append(-min(r * ai, rc * ai))
    return out


def _ref_cispo(p, q, adv, low=LOW, high=HIGH) -> list[float]:
    return [-min(max(math.exp(pi - qi), low), high) * pi * ai for pi, qi, ai in zip(p, q, adv, strict=True)]


def _torch_ref(kind: str):
    """The same losses in torch for forward_backward_custom: (data, logprobs) -> (loss, metrics)."""

    def fn(data, logprobs_list):
        total = torch.zeros(())
        for d, lp in zip(data, logprobs_list, strict=True):
            q = d.loss_fn_inputs["logprobs"].to_torch()
            a = d.loss_fn_inputs["advantages"].to_torch()
            ratio = torch.exp(lp - q)
            if kind == "importance_sampling":
                total = total - (ratio * a).sum()
            else:
                total = total - torch.minimum(ratio * a, ratio.clamp(LOW, HIGH) * a).sum()
        return total, {}

    return fn


@pytest.fixture(scope="module")
def datum(tokenizer) -> types.Datum:
    ids = tokenizer.encode("find . -name '*.py' | xargs wc -l | sort -n\n", add_special_tokens=False)
    return types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={"target_tokens": ids[1:]})


def _with(datum: types.Datum, p: np.ndarray, seed: int) -> tuple[types.Datum, list, list]:
    """Sampling logprobs q around the current logprobs p (ratios on both sides of the clip
    range) and mixed-sign advantages."""
    rng = np.random.default_rng(seed)
    q = (p + rng.choice([-0.6, -0.1, 0.05, 0.5], size=p.shape)).astype(np.float32)
    adv = rng.normal(0, 1, p.shape).astype(np.float32)
    d = types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={**datum.loss_fn_inputs, "logprobs": q, "advantages": adv},
    )
    return d, q.tolist(), adv.tolist()


def test_loss_values_match_reference(service_client, base_model, datum):
    tc = service_client.create_lora_training_client(base_model=base_model, rank=4, seed=1).result()
    p = tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    d, q, adv = _with(datum, p, seed=0)
    r = np.exp(p - np.array(q))
    assert (r < LOW).any() and (r > HIGH).any()  # the clip matters in this case

    cases = [
        ("importance_sampling", None, _ref_is(p.tolist(), q, adv)),
        ("ppo", None, _ref_ppo(p.tolist(), q, adv)),
        ("ppo", {"clip_low_threshold": 0.9, "clip_high_threshold": 1.05},
         _ref_ppo(p.tolist(), q, adv, 0.9, 1.05)),
        ("cispo", None, _ref_cispo(p.tolist(), q, adv)),
    ]  # fmt: skip
    for loss_fn, cfg, ref in cases:
        out = tc.forward([d], loss_fn, cfg).result()
        elementwise = out.loss_fn_outputs[0]["elementwise_loss"].to_numpy()
        np.testing.assert_allclose(elementwise, ref, rtol=1e-5, atol=1e-6, err_msg=loss_fn)
        assert out.metrics["loss:sum"] == pytest.approx(sum(ref), rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo"])
def test_gradients_match_reference(service_client, base_model, datum, loss_fn):
    engine_side = service_client.create_lora_training_client(base_model=base_model, rank=4, seed=2).result()
    reference = service_client.create_lora_training_client(base_model=base_model, rank=4, seed=2).result()
    p = engine_side.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    d, _, _ = _with(datum, p, seed=1)
    adam = types.AdamParams(learning_rate=1e-3)
    norms = []
    for step in range(2):  # two steps: the second also depends on the first's Adam moments
        engine_side.forward_backward([d], loss_fn).result()
        reference.forward_backward_custom([d], _torch_ref(loss_fn)).result()
        a = engine_side.optim_step(adam).result().metrics["grad_norm:mean"]
        b = reference.optim_step(adam).result().metrics["grad_norm:mean"]
        assert a > 0
        assert a == pytest.approx(b, rel=1e-4), (step, a, b)
        norms.append(a)
    after_a = engine_side.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    after_b = reference.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    np.testing.assert_allclose(after_a, after_b, atol=1e-5)
    assert np.abs(after_a - p).max() > 1e-4  # the steps did change the model
