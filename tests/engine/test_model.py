"""The model is a real Qwen3 (matches transformers), its cached decode matches a full pass, and
the shipped tokenizer works with the cookbook's qwen3_5 renderer unchanged."""

from __future__ import annotations

import pytest
import torch

from tbconsole.engine.config import ModelConfig
from tbconsole.engine.lora import LoraAdapter
from tbconsole.engine.model import RowCache, build_model
from tbconsole.engine.weights import Weights

CFG = ModelConfig(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
)  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return build_model(CFG, seed=3, device=torch.device("cpu"))


def _adapter(model, seed=1):
    ad = LoraAdapter.create(model, CFG.lora_targets(attn=True, mlp=True, unembed=True), rank=4, alpha=8, seed=seed)
    g = torch.Generator().manual_seed(seed)
    for _, b in ad.weights.values():  # B starts at zero; make the delta visible
        b.copy_(torch.randn(b.shape, generator=g) * 0.05)
    return ad


def test_matches_transformers_qwen3(model):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    hf_cfg = {k: v for k, v in CFG.hf_config_dict().items() if k not in ("architectures", "model_type")}
    hf = Qwen3ForCausalLM(Qwen3Config(**hf_cfg)).eval()
    missing, unexpected = hf.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all("rotary" in m for m in missing)
    tokens = torch.randint(0, CFG.vocab_size, (2, 37), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = model.logits(model.hidden_states(tokens, Weights.base(model)), Weights.base(model))
        theirs = hf(tokens).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_merged_lora_equals_side_lora(model):
    ad = _adapter(model)
    tokens = torch.randint(0, CFG.vocab_size, (1, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        side = Weights.training(model, ad)
        merged = Weights.merged(model, ad)
        a = model.logits(model.hidden_states(tokens, side), side)
        b = model.logits(model.hidden_states(tokens, merged), merged)
        base = model.logits(model.hidden_states(tokens, Weights.base(model)), Weights.base(model))
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert (a - base).abs().max() > 1e-3  # the adapter does something


def test_cached_decode_and_extend_match_full_pass(model):
    w = Weights.merged(model, _adapter(model, seed=2))
    seqs = [torch.randint(0, CFG.vocab_size, (n,), generator=torch.Generator().manual_seed(n)) for n in (9, 14, 5)]
    with torch.no_grad():
        caches = [RowCache(CFG, 32, torch.device("cpu"), torch.float32) for _ in seqs]
        for s, c in zip(seqs, caches, strict=True):
            model.hidden_states(s[:-3][None], w, cache_out=[c])
        # Three batched decode steps over rows of different lengths.
        got = [[] for _ in seqs]
        for step in range(3):
            toks = torch.stack([s[len(s) - 3 + step] for s in seqs])
            h = model.decode_hidden(toks, caches, w)
            for i, row in enumerate(h):
                got[i].append(row)
        for s, rows in zip(seqs, got, strict=True):
            full = model.hidden_states(s[None], w)[0, -3:]
            torch.testing.assert_close(torch.stack(rows), full, atol=1e-5, rtol=1e-5)
        # Prefix reuse: extend a cached prefix by a chunk.
        c = RowCache(CFG, 32, torch.device("cpu"), torch.float32)
        s = seqs[1]
        model.hidden_states(s[:6][None], w, cache_out=[c])
        ext = model.extend_hidden(s[6:], c, w)
        torch.testing.assert_close(ext, model.hidden_states(s[None], w)[0, 6:], atol=1e-5, rtol=1e-5)


def test_chunked_logprobs_match_log_softmax(model):
    w = Weights.base(model)
    tokens = torch.randint(0, CFG.vocab_size, (1, 30), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        h = model.hidden_states(tokens, w)[0]
        lp = model.token_logprobs(h[:-1], tokens[0, 1:], w, chunk=7)
        ref = torch.log_softmax(model.logits(h[:-1], w), -1).gather(-1, tokens[0, 1:, None])[:, 0]
    torch.testing.assert_close(lp, ref, atol=1e-5, rtol=1e-5)


def test_tokenizer_round_trips_and_renders_qwen3_5(tokenizer):
    from tinker_cookbook import renderers

    samples = [
        "for f in *.log; do grep -c 'ERROR' \"$f\"; done | sort -n | tail -1\n",
        'def f(x):\n\treturn {"k": [1, 2.5e-3, None], "s": "\\u00e9"}\n',
        "Ünïcödé ✓ 日本語 🚀 \x00\x07\x1b[31m red \r\n  trailing   ",
        "<|im_start|> literal text <think> </tool_call>",
    ]
    for s in samples:
        assert tokenizer.decode(tokenizer.encode(s, add_special_tokens=False)) == s
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):  # fmt: skip
        assert len(tokenizer.encode(special, add_special_tokens=False)) == 1, special
    assert tokenizer.eos_token == "<|im_end|>"

    r = renderers.get_renderer("qwen3_5", tokenizer)
    msgs = [{"role": "system", "content": "You run shell commands."}, {"role": "user", "content": "List /tmp"}]
    prompt = tokenizer.decode(r.build_generation_prompt(msgs).to_ints())
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")
    reply = ("Listing.\n</think>\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls -la /tmp\n"
             "</parameter>\n</function>\n</tool_call><|im_end|>")  # fmt: skip
    msg, term = r.parse_response(tokenizer.encode(reply, add_special_tokens=False))
    assert term.is_clean
    assert msg["tool_calls"][0].function.name == "bash"
    assert r.get_stop_sequences() == [tokenizer.eos_token_id]


def test_cookbook_resolves_local_model_name(base_model):
    from tinker_cookbook import model_info
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    from tbconsole.engine import recommended_renderer, register_with_cookbook

    register_with_cookbook()
    register_with_cookbook()  # idempotent
    assert model_info.get_recommended_renderer_name(base_model) == "qwen3_5"
    assert recommended_renderer(base_model) == "qwen3_5"
    assert model_info.get_recommended_renderer_name("Qwen/Qwen3-8B") == "qwen3"  # untouched
    assert get_tokenizer(base_model).eos_token == "<|im_end|>"
