"""Batched sampling on a dedicated decode thread.

Requests are queued; each loop iteration admits what fits the KV budget (prefilling each new
prompt once and copying its cache for `num_samples` rows), then advances every active row by one
token, batching all rows that share the same weights into one decode step. Rows finish on a stop
token, a stop string, EOS or `max_tokens`, and their request completes when its last row does.

The logprob returned for a sampled token is log softmax of the raw logits (temperature 1), i.e.
exactly what `forward` computes for the same tokens; temperature/top-k/top-p only shape the
distribution the token is drawn from.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tbconsole.engine.errors import EngineError
from tbconsole.engine.model import Qwen3LM, RowCache
from tbconsole.engine.weights import Weights
from tbconsole.engine.wire import SequenceOut

log = logging.getLogger(__name__)


class PrefixCache:
    """KV of recently finished sequences (prompt + completion), reused when a new prompt starts
    with the same tokens under the same weights. An agent re-sends its whole conversation every
    turn, so without this every turn would prefill the full history again."""

    def __init__(self, budget_tokens: int, min_tokens: int = 32):
        self.budget = budget_tokens
        self.min_tokens = min_tokens
        self._entries: OrderedDict[int, tuple[Any, np.ndarray, RowCache]] = OrderedDict()
        self._ids = itertools.count()
        self.used = 0

    def put(self, key: Any, tokens: list[int], cache: RowCache) -> None:
        n = cache.length
        if n < self.min_tokens or n > self.budget:
            return
        kept = RowCache.like(cache, n)  # right-sized copy; the row's big cache is freed
        kept.copy_prefix_from(cache)
        self._entries[next(self._ids)] = (key, np.asarray(tokens[:n], dtype=np.int64), kept)
        self.used += n
        while self.used > self.budget:
            _, (_, toks, _) = self._entries.popitem(last=False)
            self.used -= len(toks)

    def forget(self, key: Any) -> None:
        for eid in [e for e, (k, _, _) in self._entries.items() if k == key]:
            self.used -= len(self._entries.pop(eid)[1])

    def lookup(self, key: Any, prompt: list[int]) -> tuple[RowCache, int] | None:
        """The cached KV sharing the longest prefix with `prompt` (at most len(prompt) - 1
        tokens: the last prompt token must run to produce the first logits)."""
        p = np.asarray(prompt, dtype=np.int64)
        best: tuple[int, int] | None = None
        for eid, (k, toks, _) in self._entries.items():
            if k != key:
                continue
            n = min(len(toks), len(p) - 1)
            if n < self.min_tokens:
                continue
            diff = np.flatnonzero(toks[:n] != p[:n])
            lcp = int(diff[0]) if diff.size else n
            if lcp >= self.min_tokens and (best is None or lcp > best[1]):
                best = (eid, lcp)
        if best is None:
            return None
        self._entries.move_to_end(best[0])
        return self._entries[best[0]][2], best[1]


PREFILL_TOKENS_PER_ITERATION = 8192


@dataclass
class SampleParams:
    max_tokens: int
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    seed: int | None = None
    stop_tokens: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()


@dataclass
class SampleJob:
    prompt: list[int]
    num_samples: int
    params: SampleParams
    weights_key: Any  # rows with equal keys decode together
    get_weights: Callable[[], Weights]  # called on the decode thread
    prompt_logprobs: bool
    # done(sequences, prompt_logprobs, prompt_cache_hit_tokens, error)
    done: Callable[[list[SequenceOut] | None, np.ndarray | None, int, BaseException | None], None]
    rows_left: int = 0
    results: list[SequenceOut | None] = field(default_factory=list)
    prompt_lp: np.ndarray | None = None
    cache_hit_tokens: int = 0
    failed: bool = False

    @property
    def kv_tokens(self) -> int:
        return self.num_samples * (len(self.prompt) + self.params.max_tokens)


@dataclass
class Row:
    job: SampleJob
    index: int
    cache: RowCache
    gen: torch.Generator
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class SamplerStats:
    """Counters for the console/benchmark (read without locking: approximate)."""

    requests: int = 0
    sampled_tokens: int = 0
    prefill_tokens: int = 0
    prefix_hit_tokens: int = 0
    active_rows: int = 0
    queued: int = 0
    kv_tokens_in_use: int = 0


class Sampler:
    def __init__(
        self,
        model: Qwen3LM,
        tokenizer: Any,
        device: torch.device,
        *,
        kv_budget_tokens: int,
        max_rows: int = 64,
        weights_cache_size: int = 4,
        decode_threads: int | None = None,
        prefix_cache_tokens: int | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.kv_budget = kv_budget_tokens
        self.max_rows = max_rows
        # On CPU a decode step streams every weight from memory for a few tokens' worth of
        # compute: one thread gets nearly the bandwidth of two and never waits at an OpenMP
        # barrier for a core another process holds (2-core machines running Harbor trials).
        # Prefill is compute-bound and keeps all threads.
        self.prefill_threads = torch.get_num_threads()
        self.decode_threads = decode_threads or (1 if device.type == "cpu" else self.prefill_threads)
        self.stats = SamplerStats()
        self.prefix = PrefixCache(kv_budget_tokens // 4 if prefix_cache_tokens is None else prefix_cache_tokens)
        self._queue: queue.Queue[SampleJob | None] = queue.Queue()
        self._pending: list[SampleJob] = []
        self._rows: list[Row] = []
        self._weights: dict[Any, Weights] = {}  # LRU of merged weights, by key
        self._weights_cache_size = weights_cache_size
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tbconsole-sampler", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ API (any thread)
    def submit(self, job: SampleJob) -> None:
        self._queue.put(job)

    def close(self) -> None:
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout=30)

    def forget_weights(self, key: Any) -> None:
        self._queue.put(_Forget(key))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ decode thread
    def _run(self) -> None:
        torch.set_grad_enabled(False)
        while not self._stop.is_set():
            try:
                self._iteration()
            except Exception:  # a bug must not kill the decode loop for everyone
                log.exception("sampler iteration failed")
                for row in list(self._rows):
                    self._fail(row.job, RuntimeError("sampler failure; see engine log"))
                self._rows.clear()

    def _drain_queue(self, block: bool) -> None:
        try:
            item = self._queue.get(timeout=0.5) if block else self._queue.get_nowait()
        except queue.Empty:
            return
        while True:
            if item is None:
                return
            if isinstance(item, _Forget):
                self._weights.pop(item.key, None)
                self.prefix.forget(item.key)
            else:
                self._pending.append(item)
                self.stats.requests += 1
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return

    def _iteration(self) -> None:
        self._drain_queue(block=not self._rows and not self._pending)
        self._admit()
        self.stats.active_rows = len(self._rows)
        self.stats.queued = len(self._pending)
        if not self._rows:
            return
        groups: dict[Any, list[Row]] = {}
        for row in self._rows:
            groups.setdefault(row.job.weights_key, []).append(row)
        for rows in groups.values():
            self._decode_step(rows)
        self._rows = [r for r in self._rows if r.stop_reason is None]
        self.stats.kv_tokens_in_use = sum(r.cache.capacity for r in self._rows)

    def _weights_for(self, job: SampleJob) -> Weights:
        key = job.weights_key
        w = self._weights.pop(key, None)
        if w is None:
            w = job.get_weights()
        self._weights[key] = w  # most recently used last
        while len(self._weights) > self._weights_cache_size:
            self._weights.pop(next(iter(self._weights)))
        return w

    def _admit(self) -> None:
        in_use = sum(r.cache.capacity for r in self._rows)
        prefilled = 0
        still: list[SampleJob] = []
        for job in self._pending:
            fits = in_use + job.kv_tokens <= self.kv_budget or not self._rows
            room = len(self._rows) + job.num_samples <= max(self.max_rows, job.num_samples)
            # Cap prefill work per iteration so running rows keep getting decode steps.
            busy = prefilled >= PREFILL_TOKENS_PER_ITERATION and self._rows
            if fits and room and not busy:
                try:
                    self._prefill(job)
                    in_use += job.kv_tokens
                    prefilled += len(job.prompt)
                except Exception as e:
                    log.exception("prefill failed")
                    self._fail(job, e)
            else:
                still.append(job)
        self._pending = still

    def _prefill(self, job: SampleJob) -> None:
        p = job.params
        w = self._weights_for(job)
        n_prompt = len(job.prompt)
        cap = n_prompt + p.max_tokens
        caches = [RowCache(self.model.cfg, cap, self.device, torch.float32) for _ in range(job.num_samples)]
        tokens = torch.tensor(job.prompt, dtype=torch.long, device=self.device)
        torch.set_num_threads(self.prefill_threads)
        hit = None if job.prompt_logprobs else self.prefix.lookup(job.weights_key, job.prompt)
        if hit is not None:
            cached, n_hit = hit
            caches[0].copy_prefix_from(cached, n_hit)
            hidden = self.model.extend_hidden(tokens[n_hit:], caches[0], w)
            job.cache_hit_tokens = n_hit
        else:
            hidden = self.model.hidden_states(tokens[None], w, cache_out=caches[:1])[0]
        for c in caches[1:]:
            c.copy_prefix_from(caches[0])
        self.stats.prefill_tokens += n_prompt - job.cache_hit_tokens
        self.stats.prefix_hit_tokens += job.cache_hit_tokens
        if job.prompt_logprobs:
            lp = self.model.token_logprobs(hidden[:-1], tokens[1:], w)
            job.prompt_lp = np.concatenate([[np.nan], lp.float().cpu().numpy()]).astype(np.float32)
        logits = self.model.logits(hidden[-1:], w).float()
        job.rows_left = job.num_samples
        job.results = [None] * job.num_samples
        rows = []
        for i, cache in enumerate(caches):
            gen = torch.Generator(device=self.device)
            if p.seed is not None:
                gen.manual_seed((p.seed * 1_000_003 + i) % (2**63))
            else:
                gen.manual_seed(int.from_bytes(os.urandom(8), "little") % (2**63))
            rows.append(Row(job, i, cache, gen))
        self._sample_and_check(rows, logits.expand(len(rows), -1))
        self._rows.extend(r for r in rows if r.stop_reason is None)

    def _decode_step(self, rows: list[Row]) -> None:
        w = self._weights_for(rows[0].job)
        torch.set_num_threads(self.decode_threads)
        tokens = torch.tensor([r.tokens[-1] for r in rows], dtype=torch.long, device=self.device)
        hidden = self.model.decode_hidden(tokens, [r.cache for r in rows], w)
        logits = self.model.logits(hidden, w).float()
        self._sample_and_check(rows, logits)

    def _sample_and_check(self, rows: list[Row], logits: torch.Tensor) -> None:
        logp = torch.log_softmax(logits, dim=-1)
        for b, row in enumerate(rows):
            tok = self._draw(logits[b], logp[b], row)
            row.tokens.append(tok)
            row.logprobs.append(float(logp[b, tok]))
            self.stats.sampled_tokens += 1
            self._check_stop(row)
            if row.stop_reason is not None:
                self._finish(row)

    @staticmethod
    def _draw(logits: torch.Tensor, logp: torch.Tensor, row: Row) -> int:
        p = row.job.params
        if p.temperature <= 0:
            return int(torch.argmax(logits))
        if p.temperature == 1.0 and p.top_k <= 0 and p.top_p >= 1.0:
            probs = logp.exp()
        else:
            z = logits / p.temperature
            if 0 < p.top_k < z.shape[0]:
                kth = torch.topk(z, p.top_k).values[-1]
                z = z.masked_fill(z < kth, float("-inf"))
            if p.top_p < 1.0:
                sorted_z, order = torch.sort(z, descending=True)
                probs_sorted = torch.softmax(sorted_z, dim=-1)
                # Drop a token once the mass before it already reaches top_p (keeps >= 1 token).
                drop = (torch.cumsum(probs_sorted, dim=-1) - probs_sorted) >= p.top_p
                z = z.clone()
                z[order[drop]] = float("-inf")
            probs = torch.softmax(z, dim=-1)
        return int(torch.multinomial(probs, 1, generator=row.gen))

    def _check_stop(self, row: Row) -> None:
        p = row.job.params
        tok = row.tokens[-1]
        if tok in p.stop_tokens:
            row.stop_reason = "stop"
        elif p.stop_strings:
            longest = max(len(s) for s in p.stop_strings)
            # A token decodes to >= 1 byte and a char to <= 4, so this window covers any match
            # that ends in the newest token; earlier tokens were checked already.
            tail = self.tokenizer.decode(row.tokens[-(4 * longest + 1) :])
            if any(s in tail for s in p.stop_strings):
                row.stop_reason = "stop"
        if row.stop_reason is None and len(row.tokens) >= p.max_tokens:
            row.stop_reason = "length"

    def _finish(self, row: Row) -> None:
        job = row.job
        if job.failed:
            return
        job.results[row.index] = SequenceOut(row.tokens, row.logprobs, row.stop_reason or "length")
        job.rows_left -= 1
        # A scoring job (prompt logprobs: the cookbook's KL reference, on base weights nothing
        # samples from) never reads the prefix cache (``_prefill`` skips the lookup for it), and
        # under weights that are never dropped its entries were never forgotten either: every
        # step's KL prompts stayed until the cache's budget was full (tbconsole bench soak: the
        # runner's memory grew by ~4 MB a step for a hundred steps).
        if not job.prompt_logprobs:
            self.prefix.put(job.weights_key, job.prompt + row.tokens, row.cache)
        row.cache = None  # type: ignore[assignment]  # free KV memory now
        if job.rows_left == 0:
            results = [r for r in job.results if r is not None]
            self._notify(job, results, job.prompt_lp, job.cache_hit_tokens, None)

    def _fail(self, job: SampleJob, exc: BaseException) -> None:
        if job.failed:
            return
        job.failed = True
        err = exc if isinstance(exc, EngineError) else RuntimeError(str(exc))
        self._notify(job, None, None, 0, err)

    @staticmethod
    def _notify(job: SampleJob, *args: Any) -> None:
        try:
            job.done(*args)
        except Exception:  # e.g. the server loop is gone during shutdown
            log.exception("sample completion callback failed")


@dataclass
class _Forget:
    key: Any
