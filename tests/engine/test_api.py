"""The engine through the real tinker SDK on loopback: training, sampling, checkpoints."""

from __future__ import annotations

import concurrent.futures
from itertools import pairwise

import numpy as np
import pytest
import tinker
from tinker import types

pytestmark = pytest.mark.e2e


def _datum(tokens: list[int], **inputs) -> types.Datum:
    """Next-token datum over `tokens` (model input tokens[:-1], targets tokens[1:])."""
    n = len(tokens) - 1
    loss_inputs = {"target_tokens": tokens[1:], **{k: (v if len(v) == n else v[:n]) for k, v in inputs.items()}}
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=loss_inputs)


def _ce_batch(tokenizer) -> list[types.Datum]:
    texts = [
        "ls -la /var/log && tail -n 20 syslog\n",
        "def add(a, b):\n    return a + b\n",
        '{"name": "tbconsole", "steps": [1, 2, 3]}',
        "git commit -m 'fix: handle empty input'\n",
    ]
    out = []
    for t in texts:
        ids = tokenizer.encode(t, add_special_tokens=False)
        out.append(_datum(ids, weights=[1.0] * (len(ids) - 1)))
    return out


def _ce_loss(tc, batch) -> float:
    return tc.forward(batch, "cross_entropy").result().metrics["loss:sum"]


@pytest.fixture(scope="module")
def trained(service_client, base_model, tokenizer):
    """A LoRA client after a few cross-entropy steps (its adapter is no longer zero)."""
    tc = service_client.create_lora_training_client(base_model=base_model, rank=8, seed=0).result()
    batch = _ce_batch(tokenizer)
    losses = [_ce_loss(tc, batch)]
    for _ in range(5):
        fb = tc.forward_backward(batch, "cross_entropy")
        opt = tc.optim_step(types.AdamParams(learning_rate=5e-3))
        fb.result()
        opt.result()
        losses.append(_ce_loss(tc, batch))
    return tc, batch, losses


def test_info_and_tokenizer_offline(trained, base_model):
    tc, _, _ = trained
    info = tc.get_info()
    assert info.model_data.model_name == base_model and info.lora_rank == 8
    tok = tc.get_tokenizer()  # AutoTokenizer on the tokenizer id from get_info, no network
    assert tok.decode(tok.encode("echo ok", add_special_tokens=False)) == "echo ok"


def test_optim_step_lowers_cross_entropy(trained):
    _, _, losses = trained
    assert losses[-1] < 0.7 * losses[0], losses
    assert all(b < a for a, b in pairwise(losses)), losses


def test_forward_backward_each_loss(trained, tokenizer):
    tc, batch, _ = trained
    ids = tokenizer.encode("cat /etc/hostname\n", add_special_tokens=False)
    n = len(ids) - 1
    rng = np.random.default_rng(0)
    rl = dict(logprobs=list(rng.normal(-3, 0.5, n)), advantages=list(rng.normal(0, 1, n)))
    cases = {
        "cross_entropy": _datum(ids, weights=[1.0] * n),
        "importance_sampling": _datum(ids, **rl),
        "ppo": _datum(ids, **rl),
        "cispo": _datum(ids, **rl),
    }
    for loss_fn, datum in cases.items():
        out = tc.forward_backward([datum], loss_fn).result()
        assert np.isfinite(out.metrics["loss:sum"]), loss_fn
        lp = out.loss_fn_outputs[0]["logprobs"].to_numpy()
        assert lp.shape == (n,) and (lp < 0).all(), loss_fn
    # Discard the accumulated gradients: a zero learning rate step leaves weights unchanged.
    tc.optim_step(types.AdamParams(learning_rate=0.0)).result()


def test_sample_logprobs_agree_with_forward(trained, tokenizer):
    """Concurrent requests (batched decode) return logprobs equal to forward's within 1e-4."""
    tc, _, _ = trained
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompts = [tokenizer.encode(f"step {i}: " + "run the tests, report " * (i + 1), add_special_tokens=False)
               for i in range(8)]  # rows of different lengths decode in one batch  # fmt: skip
    params = types.SamplingParams(max_tokens=24, temperature=1.0, seed=None)
    futures = [sampler.sample(types.ModelInput.from_ints(p), 2, params) for p in prompts]
    checked = 0
    for prompt, fut in zip(prompts, futures, strict=True):
        res = fut.result()
        assert len(res.sequences) == 2
        for seq in res.sequences:
            assert seq.stop_reason in ("stop", "length")
            assert len(seq.tokens) == len(seq.logprobs) >= 1
            full = prompt + list(seq.tokens)
            fwd = tc.forward([_datum(full)], "cross_entropy").result()
            lp = fwd.loss_fn_outputs[0]["logprobs"].to_numpy()[-len(seq.tokens) :]
            np.testing.assert_allclose(seq.logprobs, lp, atol=1e-4, rtol=0)
            checked += 1
    assert checked == 16


def test_sampling_params(trained, tokenizer):
    tc, _, _ = trained
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tokenizer.encode("echo hello", add_special_tokens=False))

    def sample(n=1, **kw):
        return sampler.sample(prompt, n, types.SamplingParams(**kw)).result().sequences

    a = sample(3, max_tokens=12, seed=7, stop=[])
    b = sample(3, max_tokens=12, seed=7, stop=[])
    assert [s.tokens for s in a] == [s.tokens for s in b]  # seeded: reproducible
    assert len({tuple(s.tokens) for s in a}) > 1  # samples of one request differ
    assert all(s.stop_reason == "length" and len(s.tokens) == 12 for s in a)

    greedy = sample(2, max_tokens=8, temperature=0.0, stop=[])
    assert greedy[0].tokens == greedy[1].tokens

    # Stop token: stop on the greedy continuation's 3rd token, which is then the last one.
    target = greedy[0].tokens[2]
    first = greedy[0].tokens.index(target)
    s = sample(max_tokens=8, temperature=0.0, stop=[target])[0]
    assert s.stop_reason == "stop" and s.tokens == greedy[0].tokens[: first + 1]

    # Stop string: the decoded text of the greedy tokens contains it; sampling stops there.
    text = tokenizer.decode(greedy[0].tokens)
    windows = [text[i : i + 2] for i in range(len(text) // 2, len(text) - 1)]
    stop_str = next((w for w in windows if w.isascii() and w.isprintable() and w.strip()), None)
    assert stop_str, text
    s = sample(max_tokens=8, temperature=0.0, stop=[stop_str])[0]
    assert s.stop_reason == "stop" and stop_str in tokenizer.decode(s.tokens)
    assert stop_str not in tokenizer.decode(s.tokens[:-1])

    for kw in (dict(top_k=5), dict(top_p=0.5), dict(temperature=0.7, top_k=20, top_p=0.9)):
        seqs = sample(2, max_tokens=6, seed=1, stop=[], **kw)
        assert all(len(x.tokens) == 6 for x in seqs)

    # compute_logprobs: prompt logprobs agree with forward (first token has none).
    ids = tokenizer.encode("grep -rn TODO src/", add_special_tokens=False)
    plp = sampler.compute_logprobs(types.ModelInput.from_ints(ids)).result()
    fwd = tc.forward([_datum(ids)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    assert plp[0] is None
    np.testing.assert_allclose(plp[1:], fwd, atol=1e-4)


def test_save_load_identical(trained, service_client, tokenizer):
    tc, batch, _ = trained
    state = tc.save_state("ckpt-a").result().path
    sampler_path = tc.save_weights_for_sampler("ckpt-a").result().path
    assert state.startswith("tinker://") and "/weights/ckpt-a" in state
    assert "/sampler_weights/ckpt-a" in sampler_path

    tc2 = service_client.create_training_client_from_state_with_optimizer(state).result()
    assert tc2.model_id != tc.model_id

    def logprobs(client):
        out = client.forward(batch, "cross_entropy").result()
        return [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]

    for x, y in zip(logprobs(tc), logprobs(tc2), strict=True):
        np.testing.assert_array_equal(x, y)
    # One identical step on both: equal only if the Adam moments were restored too.
    for client in (tc, tc2):
        client.forward_backward(batch, "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    for x, y in zip(logprobs(tc), logprobs(tc2), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-6)

    prompt = types.ModelInput.from_ints(tokenizer.encode("make test", add_special_tokens=False))
    greedy = types.SamplingParams(max_tokens=10, temperature=0.0, stop=[])
    from_path = service_client.create_sampling_client(model_path=sampler_path).result()
    from_state = service_client.create_sampling_client(model_path=state).result()
    a = from_path.sample(prompt, 1, greedy).result().sequences[0]
    b = from_state.sample(prompt, 1, greedy).result().sequences[0]
    assert a.tokens == b.tokens
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)

    rest = tinker.RestClient(base_url=tc.holder._base_url, api_key="tml-local")
    ckpts = rest.list_checkpoints(tc.model_id).result().checkpoints
    assert {c.checkpoint_id for c in ckpts} >= {"weights/ckpt-a", "sampler_weights/ckpt-a"}
    run = rest.get_training_run_by_tinker_path(state).result()
    assert run.training_run_id == tc.model_id and run.lora_rank == 8
    info = rest.get_weights_info_by_tinker_path(state).result()
    assert info.is_lora and info.lora_rank == 8
    rest.delete_checkpoint_from_tinker_path(sampler_path).result()
    remaining = rest.list_checkpoints(tc.model_id).result().checkpoints
    assert "sampler_weights/ckpt-a" not in {c.checkpoint_id for c in remaining}


def test_concurrent_sampling_while_training(trained, tokenizer):
    """Sampling keeps serving while a training step runs."""
    tc, batch, _ = trained
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tokenizer.encode("ps aux", add_special_tokens=False))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        train = pool.submit(lambda: tc.forward_backward(batch * 4, "cross_entropy").result())
        samples = [sampler.sample(prompt, 1, types.SamplingParams(max_tokens=8, stop=[])) for _ in range(6)]
        assert all(len(s.result().sequences[0].tokens) == 8 for s in samples)
        train.result()
    tc.optim_step(types.AdamParams(learning_rate=0.0)).result()


def test_prefix_cache_reuses_conversation_history(trained, tokenizer):
    """A follow-up turn (previous prompt + reply + new message) reuses the cached KV, and its
    logprobs still agree with forward."""
    tc, _, _ = trained
    sampler = tc.save_weights_and_get_sampling_client().result()
    turn1 = tokenizer.encode("system: you are a shell agent.\nuser: list the files in /var/log "
                             "and show the newest one, then count lines.\nassistant:",
                             add_special_tokens=False)  # fmt: skip
    params = types.SamplingParams(max_tokens=16, stop=[], seed=3)
    first = sampler.sample(types.ModelInput.from_ints(turn1), 1, params).result()
    reply = list(first.sequences[0].tokens)
    turn2 = turn1 + reply + tokenizer.encode("\nuser: now the second newest.\nassistant:", add_special_tokens=False)
    second = sampler.sample(types.ModelInput.from_ints(turn2), 1, params).result()
    assert second.prompt_cache_hit_tokens >= len(turn1)
    seq = second.sequences[0]
    fwd = tc.forward([_datum(turn2 + list(seq.tokens))], "cross_entropy").result()
    lp = fwd.loss_fn_outputs[0]["logprobs"].to_numpy()[-len(seq.tokens) :]
    np.testing.assert_allclose(seq.logprobs, lp, atol=1e-4, rtol=0)


def test_scoring_leaves_nothing_in_the_prefix_cache(engine, service_client, base_model, tokenizer):
    """compute_logprobs (the KL reference's, every step of an RL run) never reads the prefix
    cache: its KV is not kept there, where it only took memory until the budget was full."""
    prefix = engine.engine.sampler.prefix
    before = list(prefix._entries)
    base = service_client.create_sampling_client(base_model=base_model)
    for i in range(3):
        ids = tokenizer.encode(f"score {i}: " + "grep -rn TODO src/ " * 8, add_special_tokens=False)
        base.compute_logprobs(types.ModelInput.from_ints(ids)).result()
    assert list(prefix._entries) == before


def test_checkpoint_ttl_and_names(trained, service_client):
    tc, _, _ = trained
    res = tc.save_state("ttl-ckpt", ttl_seconds=3600).result()
    rest = tinker.RestClient(base_url=tc.holder._base_url, api_key="tml-local")
    ckpt = {c.checkpoint_id: c for c in rest.list_checkpoints(tc.model_id).result().checkpoints}["weights/ttl-ckpt"]
    assert ckpt.expires_at is not None and ckpt.tinker_path == res.path
    with pytest.raises(tinker.APIStatusError) as e:
        tc.save_state("ttl-ckpt").result()  # exists, overwrite=False
    assert e.value.status_code == 400 and "exists" in str(e.value)
    tc.save_state("ttl-ckpt", overwrite=True).result()
    with pytest.raises(tinker.APIStatusError) as e:
        tc.save_state("../escape").result()
    assert e.value.status_code == 400


def test_lora_on_attention_only(service_client, base_model, tokenizer):
    tc = service_client.create_lora_training_client(
        base_model=base_model, rank=4, train_mlp=False, train_unembed=False, seed=3
    ).result()
    batch = _ce_batch(tokenizer)
    before = _ce_loss(tc, batch)
    for _ in range(3):
        tc.forward_backward(batch, "cross_entropy").result()
        m = tc.optim_step(types.AdamParams(learning_rate=1e-2, weight_decay=0.01, grad_clip_norm=1.0)).result()
        assert m.metrics["grad_norm:mean"] > 0
    assert _ce_loss(tc, batch) < before
    state = tc.save_state("attn-only").result().path
    rest = tinker.RestClient(base_url=tc.holder._base_url, api_key="tml-local")
    info = rest.get_weights_info_by_tinker_path(state).result()
    assert (info.train_attn, info.train_mlp, info.train_unembed) == (True, False, False)


def test_old_snapshots_are_dropped_with_a_clear_error(service_client, base_model):
    from tbconsole.engine.sampler_sessions import MAX_SNAPSHOTS_PER_RUN

    tc = service_client.create_lora_training_client(base_model=base_model, rank=2).result()
    samplers = [tc.save_weights_and_get_sampling_client().result() for _ in range(MAX_SNAPSHOTS_PER_RUN + 2)]
    prompt, params = types.ModelInput.from_ints([1, 2, 3]), types.SamplingParams(max_tokens=2, stop=[])
    assert len(samplers[-1].sample(prompt, 1, params).result().sequences[0].tokens) == 2
    with pytest.raises(tinker.APIStatusError) as e:
        samplers[0].sample(prompt, 1, params).result()
    assert e.value.status_code == 404 and "dropped" in str(e.value)
