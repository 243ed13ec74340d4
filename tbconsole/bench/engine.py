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
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch
    from tinker import types

    from tbconsole.engine import EmbeddedEngine, Engine
    from tbconsole.engine.lora import LoraAdapter
    from tbconsole.engine.model import RowCache

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


class _Figure(NamedTuple):
    """One line of the table: the figure through the server, the bare baseline's, and their unit."""

    name: str
    server: float
    bare: float
    unit: str


def run(args: argparse.Namespace) -> int:
    """Starts an engine on a temporary folder, measures every figure through it and bare, and prints the table."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from tbconsole.engine import DEFAULT_MODEL

    model_name = args.model or DEFAULT_MODEL
    with tempfile.TemporaryDirectory() as tmp, _open_engine(args, model_name, tmp) as eng:
        engine = eng.engine
        assert engine is not None
        tokens = _FreshTokens(engine.cfg.vocab_size)
        print(
            f"engine: {model_name} on {engine.device} ({engine.threads} threads, "
            f"{engine.sampler.decode_threads} for decoding), {eng.base_url}"
        )
        server = _ServerPath(eng, model_name)
        bare = _BarePath(engine, tokens)
        figures = _measure(args, server, bare, tokens, _synchronizer(engine.device))
    _report(args, figures)
    return 0


def _open_engine(args: argparse.Namespace, model_name: str, data_dir: str) -> EmbeddedEngine:
    """An engine whose context, request size and KV budget hold the largest of the measured requests."""
    from tbconsole.engine import EmbeddedEngine

    p_len, s_len = args.prompt_tokens, args.sample_tokens
    return EmbeddedEngine(
        data_dir=data_dir, device=args.device, model=model_name,
        max_context=max(p_len + s_len, args.train_len) + 16,
        max_tokens_per_request=max(131_072, args.train_seqs * args.train_len),
        kv_budget_tokens=max(262_144, args.concurrency * (p_len + s_len)), threads=args.threads,
        decode_threads=args.decode_threads,
    )  # fmt: skip


def _synchronizer(device: torch.device) -> Callable[[], None]:
    """Waits for the work queued on `device`, so that a timing covers it (nothing to wait for on a CPU)."""
    import torch

    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


class _FreshTokens:
    """Random token ids from one seeded generator. Every measured request gets a fresh random
    prompt: a repeated prompt would be served from the engine's prefix cache and measure that
    instead of prefill."""

    def __init__(self, vocab_size: int) -> None:
        import torch

        self._vocab_size = vocab_size
        self._generator = torch.Generator().manual_seed(0)

    def __call__(self, n: int) -> list[int]:
        import torch

        return torch.randint(0, self._vocab_size - 64, (n,), generator=self._generator).tolist()


class _ServerPath:
    """The measured side: the real tinker SDK against the engine over loopback HTTP."""

    def __init__(self, eng: EmbeddedEngine, model_name: str) -> None:
        import tinker

        client = tinker.ServiceClient(base_url=eng.base_url, api_key=eng.api_key)
        self._training = client.create_lora_training_client(base_model=model_name, rank=32).result()
        self._sampler = self._training.save_weights_and_get_sampling_client().result()

    def sample_many(self, prompts: list[list[int]], max_tokens: int) -> None:
        """Sends every prompt at once and waits for all; each reply must be whole and unserved by the cache."""
        from tinker import types

        params = types.SamplingParams(max_tokens=max_tokens, stop=[], seed=1)
        futs = [self._sampler.sample(types.ModelInput.from_ints(p), 1, params) for p in prompts]
        for f in futs:
            res = f.result()
            assert len(res.sequences[0].tokens) == max_tokens and res.prompt_cache_hit_tokens == 0

    def sample(self, tokens: list[int], max_tokens: int) -> None:
        self.sample_many([tokens], max_tokens)

    def train_step(self, data: list[types.Datum]) -> None:
        """forward_backward and optim_step sent back to back, as a training loop sends them."""
        from tinker import types

        fb = self._training.forward_backward(data, "cross_entropy")
        op = self._training.optim_step(types.AdamParams(learning_rate=1e-5))
        fb.result()
        op.result()


def _train_data(tokens: _FreshTokens, seqs: int, length: int) -> list[types.Datum]:
    """`seqs` random sequences of `length` tokens, each trained to predict its next token."""
    from tinker import types

    data = []
    for _ in range(seqs):
        ids = tokens(length + 1)
        # tinker annotates loss_fn_inputs as dict[str, TensorData]; Datum.__post_init__ takes
        # lists too and converts them by key (int64 target tokens).
        data.append(types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                                loss_fn_inputs={"target_tokens": ids[1:]}))  # type: ignore[dict-item]  # fmt: skip
    return data


class _BarePath:
    """The baseline: the same model object called directly, with no HTTP, no futures and no scheduler."""

    def __init__(self, engine: Engine, tokens: _FreshTokens) -> None:
        from tbconsole.engine.weights import Weights

        self._model, self._cfg, self._device = engine.model, engine.cfg, engine.device
        self._decode_threads = engine.sampler.decode_threads
        self._tokens = tokens
        self._merged = Weights.merged(self._model, self._adapter())

    def _adapter(self) -> LoraAdapter:
        """A fresh rank-32 adapter on every target, like the one the server's training client makes."""
        from tbconsole.engine.lora import LoraAdapter

        targets = self._cfg.lora_targets(attn=True, mlp=True, unembed=True)
        return LoraAdapter.create(self._model, targets, rank=32, alpha=32, seed=0)

    def prefill(self, prompt_tokens: int, room: int) -> RowCache:
        """Prefills a fresh random prompt into a cache with `room` tokens to spare."""
        import torch

        from tbconsole.engine.model import RowCache

        with torch.no_grad():
            cache = RowCache(self._cfg, prompt_tokens + room, self._device, torch.float32)
            toks = torch.tensor(self._tokens(prompt_tokens), device=self._device)[None]
            hidden = self._model.hidden_states(toks, self._merged, cache_out=[cache])
            self._model.logits(hidden[0, -1:], self._merged)
        return cache

    def decode(self, n_rows: int, prompt_tokens: list[int], sample_tokens: int) -> None:
        """Prefills `prompt_tokens` into `n_rows` caches, then samples `sample_tokens` for all rows at once."""
        import torch

        from tbconsole.engine.model import RowCache

        with torch.no_grad():
            caches = []
            for _ in range(n_rows):
                c = RowCache(self._cfg, len(prompt_tokens) + sample_tokens, self._device, torch.float32)
                prompt = torch.tensor(prompt_tokens, device=self._device)[None]
                self._model.hidden_states(prompt, self._merged, cache_out=[c])
                caches.append(c)
            tok = torch.zeros(n_rows, dtype=torch.long, device=self._device)
            # Same thread policy as the engine's sampler (see sampler.py), restored afterwards.
            threads = torch.get_num_threads()
            torch.set_num_threads(self._decode_threads)
            try:
                for _ in range(sample_tokens):
                    logits = self._model.logits(self._model.decode_hidden(tok, caches, self._merged), self._merged)
                    tok = torch.multinomial(torch.softmax(logits.float(), -1), 1)[:, 0]
            finally:
                torch.set_num_threads(threads)

    def train_step(self, seqs: int, length: int) -> None:
        """One cross-entropy step of a fresh adapter on `seqs` random sequences of `length` tokens."""
        import torch

        from tbconsole.engine.weights import Weights

        adapter = self._adapter().requires_grad_(True)
        opt = torch.optim.AdamW(adapter.parameters(), lr=1e-4)
        toks = torch.tensor([self._tokens(length) for _ in range(seqs)], device=self._device)
        w = Weights.training(self._model, adapter)
        h = self._model.hidden_states(toks[:, :-1], w)
        lp = self._model.token_logprobs(h.reshape(-1, self._cfg.hidden_size), toks[:, 1:].reshape(-1), w)
        (-lp.sum()).backward()
        opt.step()


def _measure(
    args: argparse.Namespace, server: _ServerPath, bare: _BarePath, fresh: _FreshTokens, sync: Callable[[], None]
) -> list[_Figure]:
    """The five figures in the table's order, after one warm-up of each path; the latency target's is last."""
    p_len, s_len, conc = args.prompt_tokens, args.sample_tokens, args.concurrency

    def medians(bare_fn: Callable[[], Any], server_fn: Callable[[], Any]) -> tuple[float, float]:
        """(server, bare) median times over `--repeats` runs, the bare path timed first."""
        t_bare = _median_time(bare_fn, args.repeats, sync)
        return _median_time(server_fn, args.repeats, sync), t_bare

    # Warm-up (allocator, kernels, first-request setup) on both paths.
    bare.prefill(p_len, s_len)
    server.sample(fresh(128), 8)

    srv, bare_s = medians(lambda: bare.prefill(p_len, s_len), lambda: server.sample(fresh(p_len), 1))
    figures = [_Figure("prefill tokens/s (2k prompt)", p_len / srv, p_len / bare_s, "tok/s")]
    srv, bare_s = medians(lambda: bare.decode(1, fresh(128), s_len), lambda: server.sample(fresh(128), s_len))
    figures.append(_Figure("sampled tokens/s, 1 request", s_len / srv, s_len / bare_s, "tok/s"))
    srv, bare_s = medians(
        lambda: bare.decode(conc, fresh(128), s_len),
        lambda: server.sample_many([fresh(128) for _ in range(conc)], s_len),
    )
    figures.append(_Figure(f"sampled tokens/s, {conc} concurrent", conc * s_len / srv, conc * s_len / bare_s, "tok/s"))
    data = _train_data(fresh, args.train_seqs, args.train_len)
    srv, bare_s = medians(lambda: bare.train_step(args.train_seqs, args.train_len), lambda: server.train_step(data))
    figures.append(_Figure(f"train step, {args.train_seqs} x {args.train_len} tokens", srv, bare_s, "s"))
    srv, bare_s = medians(lambda: bare.decode(1, fresh(p_len), s_len), lambda: server.sample(fresh(p_len), s_len))
    figures.append(_Figure(f"{s_len} tokens after a {p_len}-token prompt", srv, bare_s, "s"))
    return figures


def _report(args: argparse.Namespace, figures: list[_Figure]) -> None:
    """The table with each figure's server/bare ratio, the batched decode gain, and the latency verdict."""
    conc, s_len, p_len = args.concurrency, args.sample_tokens, args.prompt_tokens
    print()
    print(f"{'figure':44} {'server':>12} {'bare':>12} {'server/bare':>12}")
    for name, srv, bare, unit in figures:
        ratio = f"{srv / bare:.2f}" if bare else "-"
        print(f"{name:44} {srv:>9.2f} {unit:<3}{bare:>9.2f} {unit:<3}{ratio:>11}")
    one_request, concurrent, target = figures[1], figures[2], figures[-1]
    print(f"\nbatched decode gain ({conc} concurrent vs 1): {concurrent.server / one_request.server:.2f}x")
    verdict = "PASS" if target.server <= TARGET_S else "MISS"
    print(f"latency target ({s_len} tokens after {p_len}-token prompt <= {TARGET_S:.0f} s): "
          f"{target.server:.2f} s  {verdict}")  # fmt: skip
    if args.json:
        print(json.dumps({f.name: {"server": f.server, "bare": f.bare, "unit": f.unit} for f in figures}))


if __name__ == "__main__":  # python -m tbconsole.bench.engine
    parser = argparse.ArgumentParser(prog="tbconsole bench engine")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
