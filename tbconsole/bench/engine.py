"""`tbconsole bench engine`: throughput and latency of the local engine, measured through the
real tinker SDK over loopback HTTP, each next to a baseline measured in the same run on the same
model object without the server (bare torch calls), with the ratio server/bare.

Figures: prefill tokens/s (2k-token prompt), sampled tokens/s with 1 and with N concurrent
requests (the N-way figure against the 1-way one shows what batched decoding buys), the time
of one train step (forward_backward + optim_step) on 4 x 2k tokens, and the issue's latency
target: 256 sampled tokens after a 2,000-token prompt in <= 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

TARGET_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--model", default=None, help="local model preset (default: the default)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument(
        "--decode-threads", type=int, default=None, help="threads for decode steps (default: the engine's choice)"
    )
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--sample-tokens", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--train-seqs", type=int, default=4)
    parser.add_argument("--train-len", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")


def _median_time(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]) -> float:
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import tinker
    from tinker import types

    from tbconsole.engine import DEFAULT_MODEL, EmbeddedEngine
    from tbconsole.engine.lora import LoraAdapter
    from tbconsole.engine.model import RowCache
    from tbconsole.engine.weights import Weights

    model_name = args.model or DEFAULT_MODEL
    p_len, s_len, conc = args.prompt_tokens, args.sample_tokens, args.concurrency
    context = max(p_len + s_len, args.train_len) + 16
    rows: list[tuple[str, float, float | None, str]] = []  # (figure, server, bare, unit)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedEngine(
        data_dir=tmp, device=args.device, model=model_name, max_context=context,
        max_tokens_per_request=max(131_072, args.train_seqs * args.train_len),
        kv_budget_tokens=max(262_144, conc * (p_len + s_len)), threads=args.threads,
        decode_threads=args.decode_threads,
    ) as eng:  # fmt: skip
        engine = eng.engine
        assert engine is not None
        model, cfg, device = engine.model, engine.cfg, engine.device
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        gen = torch.Generator().manual_seed(0)

        def rand_tokens(n: int) -> list[int]:
            return torch.randint(0, cfg.vocab_size - 64, (n,), generator=gen).tolist()

        print(
            f"engine: {model_name} on {device} ({engine.threads} threads, "
            f"{engine.sampler.decode_threads} for decoding), {eng.base_url}"
        )
        client = tinker.ServiceClient(base_url=eng.base_url, api_key=eng.api_key)
        tc = client.create_lora_training_client(base_model=model_name, rank=32).result()
        sampler = tc.save_weights_and_get_sampling_client().result()
        # Every measured request gets a fresh random prompt: a repeated prompt would be served
        # from the engine's prefix cache and measure that instead of prefill.
        fresh = rand_tokens

        def sample_many(prompts: list[list[int]], max_tokens: int) -> None:
            params = types.SamplingParams(max_tokens=max_tokens, stop=[], seed=1)
            futs = [sampler.sample(types.ModelInput.from_ints(p), 1, params) for p in prompts]
            for f in futs:
                res = f.result()
                assert len(res.sequences[0].tokens) == max_tokens and res.prompt_cache_hit_tokens == 0

        def sample(tokens: list[int], max_tokens: int) -> None:
            sample_many([tokens], max_tokens)

        # ---- bare model baselines: same model object, no HTTP, no futures, no scheduler
        adapter = LoraAdapter.create(model, cfg.lora_targets(attn=True, mlp=True, unembed=True),
                                     rank=32, alpha=32, seed=0)  # fmt: skip
        merged = Weights.merged(model, adapter)

        @torch.no_grad()
        def bare_prefill() -> RowCache:
            cache = RowCache(cfg, p_len + s_len, device, torch.float32)
            toks = torch.tensor(fresh(p_len), device=device)[None]
            model.logits(model.hidden_states(toks, merged, cache_out=[cache])[0, -1:], merged)
            return cache

        @torch.no_grad()
        def bare_decode(n_rows: int, prompt_tokens: list[int]) -> None:
            # Same thread policy as the engine's sampler (see sampler.py), restored afterwards.
            threads = torch.get_num_threads()
            caches = []
            for _ in range(n_rows):
                c = RowCache(cfg, len(prompt_tokens) + s_len, device, torch.float32)
                model.hidden_states(torch.tensor(prompt_tokens, device=device)[None], merged, cache_out=[c])
                caches.append(c)
            tok = torch.zeros(n_rows, dtype=torch.long, device=device)
            torch.set_num_threads(engine.sampler.decode_threads)
            try:
                for _ in range(s_len):
                    logits = model.logits(model.decode_hidden(tok, caches, merged), merged)
                    tok = torch.multinomial(torch.softmax(logits.float(), -1), 1)[:, 0]
            finally:
                torch.set_num_threads(threads)

        def bare_train() -> None:
            ad = LoraAdapter.create(model, cfg.lora_targets(attn=True, mlp=True, unembed=True),
                                    rank=32, alpha=32, seed=0).requires_grad_(True)  # fmt: skip
            opt = torch.optim.AdamW(ad.parameters(), lr=1e-4)
            toks = torch.tensor([rand_tokens(args.train_len) for _ in range(args.train_seqs)], device=device)
            w = Weights.training(model, ad)
            h = model.hidden_states(toks[:, :-1], w)
            lp = model.token_logprobs(h.reshape(-1, cfg.hidden_size), toks[:, 1:].reshape(-1), w)
            (-lp.sum()).backward()
            opt.step()

        # Warm-up (allocator, kernels, first-request setup) on both paths.
        bare_prefill()
        sample(fresh(128), 8)

        reps = args.repeats
        t_bare_prefill = _median_time(bare_prefill, reps, sync)
        t_srv_prefill = _median_time(lambda: sample(fresh(p_len), 1), reps, sync)
        rows.append(("prefill tokens/s (2k prompt)", p_len / t_srv_prefill, p_len / t_bare_prefill, "tok/s"))

        t_bare_1 = _median_time(lambda: bare_decode(1, fresh(128)), reps, sync)
        t_srv_1 = _median_time(lambda: sample(fresh(128), s_len), reps, sync)
        rows.append(("sampled tokens/s, 1 request", s_len / t_srv_1, s_len / t_bare_1, "tok/s"))

        t_bare_n = _median_time(lambda: bare_decode(conc, fresh(128)), reps, sync)
        t_srv_n = _median_time(lambda: sample_many([fresh(128) for _ in range(conc)], s_len), reps, sync)
        rows.append((f"sampled tokens/s, {conc} concurrent", conc * s_len / t_srv_n,
                     conc * s_len / t_bare_n, "tok/s"))  # fmt: skip

        data = []
        for _ in range(args.train_seqs):
            ids = rand_tokens(args.train_len + 1)
            # tinker annotates loss_fn_inputs as dict[str, TensorData]; Datum.__post_init__ takes
            # lists too and converts them by key (int64 target tokens).
            data.append(types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                                    loss_fn_inputs={"target_tokens": ids[1:]}))  # type: ignore[dict-item]  # fmt: skip

        def srv_train() -> None:
            fb = tc.forward_backward(data, "cross_entropy")
            op = tc.optim_step(types.AdamParams(learning_rate=1e-5))
            fb.result()
            op.result()

        t_bare_train = _median_time(bare_train, reps, sync)
        t_srv_train = _median_time(srv_train, reps, sync)
        rows.append((f"train step, {args.train_seqs} x {args.train_len} tokens", t_srv_train,
                     t_bare_train, "s"))  # fmt: skip

        t_bare_target = _median_time(lambda: bare_decode(1, fresh(p_len)), reps, sync)
        t_target = _median_time(lambda: sample(fresh(p_len), s_len), reps, sync)
        rows.append((f"{s_len} tokens after a {p_len}-token prompt", t_target, t_bare_target, "s"))

    print()
    print(f"{'figure':44} {'server':>12} {'bare':>12} {'server/bare':>12}")
    for name, srv, bare, unit in rows:
        ratio = f"{srv / bare:.2f}" if bare else "-"
        print(f"{name:44} {srv:>9.2f} {unit:<3}{bare:>9.2f} {unit:<3}{ratio:>11}")
    batching = rows[2][1] / rows[1][1]
    print(f"\nbatched decode gain ({conc} concurrent vs 1): {batching:.2f}x")
    verdict = "PASS" if t_target <= TARGET_S else "MISS"
    print(f"latency target ({s_len} tokens after {p_len}-token prompt <= {TARGET_S:.0f} s): "
          f"{t_target:.2f} s  {verdict}")  # fmt: skip
    if args.json:
        print(json.dumps({name: {"server": srv, "bare": bare, "unit": unit} for name, srv, bare, unit in rows}))
    return 0


if __name__ == "__main__":  # python -m tbconsole.bench.engine
    parser = argparse.ArgumentParser(prog="tbconsole bench engine")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
