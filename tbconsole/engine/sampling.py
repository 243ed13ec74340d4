"""The sampling requests: create_sampling_session and asample.

A sample is checked on the server's loop against the context and the KV budget (cheaper to
refuse than to run out of memory), then goes to the batched decode thread (`sampler.py`), whose
completion resolves the request's future (`jobs.py`).

Under the Miles contracts (`contract.py`) two more rules hold: sub-generations in flight are
bounded (`SampleAdmission`: 429 before anything is spent), and only the latest publication of a
training run's weights is served (a sample on an earlier one fails, also when the publish lands
while it runs).
"""

from __future__ import annotations

from typing import Any

from tinker import types

from tbconsole.engine import wire
from tbconsole.engine.contract import SampleAdmission
from tbconsole.engine.errors import BadRequest, EngineError, TooLarge, TooManyRequests
from tbconsole.engine.futures import Outcome
from tbconsole.engine.jobs import Jobs
from tbconsole.engine.journal import Journal
from tbconsole.engine.model import Qwen3LM
from tbconsole.engine.sampler import SampleJob, SampleParams, Sampler
from tbconsole.engine.sampler_sessions import SamplerSessions
from tbconsole.engine.sessions import Sessions
from tbconsole.engine.weights import Weights


class SamplingOps:
    def __init__(self, *, sessions: Sessions, samplers: SamplerSessions, jobs: Jobs, journal: Journal,
                 sampler: Sampler, model: Qwen3LM, model_name: str, max_context: int,
                 eos_ids: frozenset[int], max_num_samples: int, kv_budget_tokens: int,
                 admission: SampleAdmission | None = None, latest_only: bool = False):  # fmt: skip
        self.sessions = sessions
        self.samplers = samplers
        self.jobs = jobs
        self.journal = journal
        self.sampler = sampler
        self.model = model
        self.model_name = model_name
        self.vocab_size = model.cfg.vocab_size
        self.max_context = max_context
        self.eos_ids = eos_ids
        self.max_num_samples = max_num_samples
        self.kv_budget_tokens = kv_budget_tokens
        self.admission = admission
        self.latest_only = latest_only

    async def create_session(self, body: types.CreateSamplingSessionRequest) -> str:
        self.sessions.check(body.session_id)
        sid = f"{body.session_id}:sample:{body.sampling_session_seq_id}"
        sess = await self.samplers.for_source(sid, body.model_path, body.base_model)
        kind = "path" if sess.model_path else "base"
        self.journal.save_sampler(sid, {"kind": kind, "base_model": self.model_name,
                                        "model_path": sess.model_path}, None)  # fmt: skip
        self.samplers.add(sess)
        return sid

    async def sample(self, body: types.SampleRequest) -> dict[str, Any]:
        if body.sampling_session_id is not None:
            if self.latest_only and (stale := self.samplers.stale_reason(body.sampling_session_id)):
                return {**self.jobs.failed("sample", None, stale), "sample_sequence_ids": []}
            sess = await self.samplers.get(body.sampling_session_id)
        else:
            sess = await self.samplers.for_source("adhoc", body.model_path, body.base_model)
        unsupported = [
            name
            for name, on in (
                ("topk_prompt_logprobs", body.topk_prompt_logprobs),
                ("topk_sample_logprobs", body.topk_sample_logprobs),
                ("target_prompt_logprobs", body.target_prompt_logprobs is not None),
                ("prompt_alt_tokens_k", body.prompt_alt_tokens_k),
                ("prompt_logprobs_last_n", body.prompt_logprobs_last_n is not None),
            )
            if on
        ]
        if unsupported:
            raise BadRequest(f"not supported by this engine: {unsupported}")
        prompt = wire.model_input_tokens(body.prompt.chunks, "prompt")
        if not prompt:
            raise BadRequest("empty prompt")
        if min(prompt) < 0 or max(prompt) >= self.vocab_size:
            raise BadRequest(f"prompt has token ids outside [0, {self.vocab_size})")
        if not (1 <= body.num_samples <= self.max_num_samples):
            raise BadRequest(f"num_samples must be in [1, {self.max_num_samples}], got {body.num_samples}")
        params = self._sample_params(body.sampling_params, len(prompt))
        need = body.num_samples * (len(prompt) + params.max_tokens)
        if need > self.kv_budget_tokens:
            raise TooLarge(
                f"num_samples x (prompt + max_tokens) = {need} tokens exceeds the engine's "
                f"KV budget of {self.kv_budget_tokens}"
            )
        admission, weight = self.admission, body.num_samples
        if admission is not None:
            admission.check_size(weight)
            if not admission.try_acquire(weight):
                raise TooManyRequests(
                    f"sampling capacity reached ({admission.in_use}/{admission.capacity} sub-generations "
                    "active); retry the identical request"
                )
        rid, resolve = self.jobs.new_sample()
        sid = sess.id

        def done(seqs, prompt_lp, hit_tokens, exc) -> None:
            if admission is not None:
                admission.release(weight)
            if exc is not None:
                cat = "user" if isinstance(exc, EngineError) else "server"
                resolve(Outcome(error=getattr(exc, "message", str(exc)), category=cat))
            elif self.latest_only and (stale := self.samplers.stale_reason(sid)):
                resolve(Outcome(error=f"{stale} (the publish landed while this sample ran)", category="user"))
            else:
                resolve(Outcome(payload=wire.encode_sample_response(seqs, prompt_lp, hit_tokens)))

        adapter = sess.adapter
        try:
            self.sampler.submit(
                SampleJob(
                    prompt=prompt,
                    num_samples=body.num_samples,
                    params=params,
                    weights_key=sess.key,
                    get_weights=lambda: Weights.merged(self.model, adapter),
                    prompt_logprobs=bool(body.prompt_logprobs),
                    done=done,
                )
            )
        except BaseException:
            if admission is not None:
                admission.release(weight)
            raise
        seq_ids = [f"{rid}:{i}" for i in range(body.num_samples)]
        return {"request_id": rid, "model_id": None, "sample_sequence_ids": seq_ids}

    def _sample_params(self, sp: types.SamplingParams, prompt_len: int) -> SampleParams:
        room = self.max_context - prompt_len
        if room < 1:
            raise TooLarge(f"prompt of {prompt_len} tokens leaves no room in the {self.max_context}-token context")
        max_tokens = room if sp.max_tokens is None else int(sp.max_tokens)
        if max_tokens < 1:
            raise BadRequest(f"max_tokens must be >= 1, got {max_tokens}")
        if prompt_len + max_tokens > self.max_context:
            raise TooLarge(
                f"prompt ({prompt_len}) + max_tokens ({max_tokens}) exceeds the model's context "
                f"of {self.max_context} tokens"
            )
        if not (sp.temperature >= 0) or not (0 < sp.top_p <= 1) or sp.top_k < -1 or sp.top_k == 0:
            raise BadRequest(
                f"invalid sampling params: temperature={sp.temperature} (>= 0), "
                f"top_p={sp.top_p} (0 < top_p <= 1), top_k={sp.top_k} (-1 or >= 1)"
            )
        stop_tokens: frozenset[int] = frozenset()
        stop_strings: tuple[str, ...] = ()
        if sp.stop is None:
            stop_tokens = self.eos_ids
        elif isinstance(sp.stop, str):
            stop_strings = (sp.stop,)
        else:
            items = list(sp.stop)
            strings = [s for s in items if isinstance(s, str)]
            ints = [s for s in items if isinstance(s, int)]
            if len(strings) == len(items):
                stop_strings = tuple(strings)
            elif len(ints) == len(items):
                stop_tokens = frozenset(ints)
            else:
                raise BadRequest("stop must be strings or token ids, not a mix")
        if any(s == "" for s in stop_strings):
            raise BadRequest("empty stop string")
        return SampleParams(
            max_tokens=max_tokens,
            temperature=float(sp.temperature),
            top_k=int(sp.top_k),
            top_p=float(sp.top_p),
            seed=None if sp.seed is None else int(sp.seed),
            stop_tokens=stop_tokens,
            stop_strings=stop_strings,
        )
