"""The request pipeline: one model call of a trial, from its JSON body to its answer.

parse (the API's request → ``ChatRequest``, through the trial's conversion cache) → render (the
trial's incremental renderer, its earlier sampled tokens spliced in: ``continuity``; on the
proxy's thread pool when there is much text to tokenize, see ``offload``) → plan (max_tokens,
temperature, stops; the context-window check) → sample (one bounded sampler call) → **capture**
(the turn persisted before anything else can fail) → parse the sample back → answer. Streams and
bodies are the HTTP side's: the pipeline drives it through an ``Exchange``.

Errors before sampling are the client's (4xx). A sampler failure (it raised, or ran past
``sample_timeout_s``) is 502 (504 for the timeout), captures nothing, counts in
``TrialStats.sampler_failed`` and calls ``on_sampler_error(trial_id, exc)``; a turn that cannot
be persisted loses the trial (503); a turn the renderer cannot parse is kept and answered 502.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import tinker
from tinker_cookbook.renderers.base import Message, Renderer

from tbconsole.proxy import anthropic_input
from tbconsole.proxy.apis import Answer, Api
from tbconsole.proxy.capture import CapturedTurn
from tbconsole.proxy.chat import ChatReply, ChatRequest, ConversionCache, new_id
from tbconsole.proxy.continuity import Splice
from tbconsole.proxy.errors import ContextWindowExceeded, ProxyError
from tbconsole.proxy.offload import off_loop
from tbconsole.proxy.reply import parse_reply
from tbconsole.proxy.sampling import Sampled, client_error, describe, sample_once
from tbconsole.proxy.trials import Trial, TurnNotPersisted
from tbconsole.proxy.turn_text import reply_view

log = logging.getLogger("tbconsole.proxy")

RENDER_THREADS = 4  # per proxy: a long render in one trial leaves room for the others'
# Renders that tokenize fewer characters (a few ms) stay on the loop: a thread hop costs more
# than that under load (a thread waits up to the 5 ms GIL switch interval for the busy loop).
INLINE_RENDER_CHARS = 32 * 1024
# Samples again from newer weights when a publish retired the sampler mid-call (``_sample_latest``):
# more than a few publishes during one sample means the trainer outruns sampling altogether.
MOVED_WEIGHTS_RETRIES = 3


@dataclass
class Outcome:
    """What one request did, for its ProxyRequest event."""

    t0: float
    started_at: float
    api: str
    stream: bool = False
    status: int = 200
    error: str | None = None
    turn: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    sample_ms: float | None = None
    weights: int | None = None  # the update whose weights sampled it, when the sampler says


class Exchange(Protocol):
    """The HTTP side of one model call."""

    async def open_stream(self, answer: Answer, prompt_tokens: int, *, keepalive: bool) -> None:
        """SSE headers (200) and the answer's opening events: from here on, errors go into the stream."""

    async def send(self, answer: Answer, reply: ChatReply) -> None:
        """The reply, as a body or as the rest of the stream."""


@dataclass
class _Plan:
    max_tokens: int
    temperature: float
    stop: list


class Pipeline:
    def __init__(
        self,
        *,
        renderer: Renderer,
        tokenizer: Any,
        sampler: Any,
        default_max_tokens: int,
        sample_timeout_s: float | None,
        on_sampler_error: Callable[[str, BaseException], None] | None,
        lose: Callable[[Trial, str], None],
        thread_name: str,
    ):
        self.renderer = renderer
        self._sampler = sampler
        self.default_max_tokens = default_max_tokens
        self.sample_timeout_s = sample_timeout_s
        self._on_sampler_error = on_sampler_error
        self._lose = lose
        self._thread_name = thread_name
        self._executor: ThreadPoolExecutor | None = None
        stops = renderer.get_stop_sequences()
        self._tokenizer = tokenizer
        self._stop_strings = [s if isinstance(s, str) else tokenizer.decode([s]) for s in stops]
        self._default_stop = list(stops)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    # -- parse -------------------------------------------------------------------------------------

    def parse(self, api: Api, body: Any, cache: ConversionCache | None) -> ChatRequest:
        return _client_input(api.parse, body, self.renderer, cache)

    def count_request(self, body: Any) -> list[Message]:
        """A ``count_tokens`` body's conversation (without the trial's conversion cache, which
        counting must leave as the trial's last call left it)."""
        return _client_input(anthropic_input.count_request, body, self.renderer)

    async def count_tokens(self, trial: Trial, messages: list[Message]) -> int:
        """Anthropic's count_tokens for ``trial`` (its lock held): the length of the prompt a
        ``create`` of the same conversation would sample from now, its earlier sampled tokens
        spliced in when it continues one of the trial's conversations (Claude Code decides when
        to compact from this count). Nothing is sampled or captured, and the trial's continuity
        and renderer are left as they were (``Continuity.peek``)."""
        return len((await self._splice(trial, messages, trial.continuity.peek)).prompt)

    # -- one turn ------------------------------------------------------------------------------------

    async def turn(self, api: Api, trial: Trial, chat: ChatRequest, exchange: Exchange, out: Outcome) -> None:
        """One call of ``trial`` (its lock held), answered through ``exchange``."""
        splice = await self._splice(trial, chat.messages, trial.continuity.splice)
        prompt = splice.prompt
        out.prompt_tokens = len(prompt)
        answer = api.answer(chat, new_id(api.id_prefix), trial.temperature_for(chat))
        try:
            plan = self._plan(trial, chat, len(prompt))
        except ContextWindowExceeded:
            if api.context_refusal_in_stream and chat.stream:
                await exchange.open_stream(answer, len(prompt), keepalive=False)
            raise
        try:
            params = tinker.SamplingParams(
                max_tokens=plan.max_tokens,
                temperature=plan.temperature,
                stop=plan.stop,
                top_p=chat.top_p if chat.top_p is not None else 1.0,
                top_k=chat.top_k if chat.top_k is not None else -1,
                seed=chat.seed,
            )
        except ValueError as exc:  # pydantic's ValidationError: a value the SDK refuses
            raise ProxyError(400, f"invalid sampling parameters: {str(exc)[:300]}") from None
        if chat.stream:
            await exchange.open_stream(answer, len(prompt), keepalive=True)
        sampled = await self._sample(trial, prompt, params, out)
        reply: ChatReply | None = None
        try:
            reply = parse_reply(
                trial.renderer.working,
                sampled.tokens,
                sampled.stop_reason,
                len(prompt),
                api.tool_id_prefix,
                stops=chat.stop,
                tools_offered=chat.tool_choice != "none",
            )
            unparsed = None
        except Exception as exc:  # noqa: BLE001 - the renderer could not parse the sample: still captured
            unparsed = exc
        # The turn's text rides in its capture line, for the console's live transcript.
        text = trial.conversation.new_messages(chat.messages)
        text["reply"] = reply_view(reply, self._decode(sampled.tokens) if reply is None else "", _why(unparsed))
        turn = self._capture(trial, chat, splice, sampled, plan, out, text)
        trial.continuity.commit(splice, chat.messages, turn, sampled.tokens, reply)
        if reply is None:
            log.warning("trial %s turn %s: unparseable sample: %s", trial.id, turn, unparsed)
            raise ProxyError(502, f"the model's response could not be parsed: {str(unparsed)[:300]}")
        await exchange.send(answer, reply)

    def _decode(self, tokens: list[int]) -> str:
        try:
            return str(self._tokenizer.decode(tokens))
        except Exception:  # noqa: BLE001 - only for showing an unparseable sample
            return f"[{len(tokens)} tokens that could not be decoded]"

    async def _splice(self, trial: Trial, messages: list[Message], splice: Callable[[list[Message]], Splice]) -> Splice:
        """``splice(messages)`` (the trial's ``Continuity.splice`` or ``peek``); a conversation
        the renderer refuses is the client's 400."""
        try:
            return await self._render(trial.renderer.pending_chars(messages), splice, messages)
        except Exception as exc:  # noqa: BLE001 - the renderer refuses this conversation
            raise ProxyError(
                400, f"the conversation cannot be rendered: {type(exc).__name__}: {str(exc)[:300]}"
            ) from None

    async def _render(self, chars: int, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, on the proxy's thread pool when it tokenizes ``chars`` or more."""
        if chars < INLINE_RENDER_CHARS:
            return fn(*args)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(RENDER_THREADS, thread_name_prefix=self._thread_name)
        return await off_loop(self._executor, fn, *args)

    def _plan(self, trial: Trial, chat: ChatRequest, prompt_len: int) -> _Plan:
        """``max_tokens = min(request's or default, default, window)``; a prompt that leaves no
        room for it in the trial's window is refused. Stops are the renderer's, plus the client's
        strings (one kind per request: the renderer's own decoded to strings, then the client's)."""
        max_tokens = min(chat.max_tokens or self.default_max_tokens, self.default_max_tokens)
        window = trial.context_window
        if window is not None:
            max_tokens = min(max_tokens, window)
            if prompt_len + max_tokens > window:
                raise ContextWindowExceeded(prompt_len, max_tokens, window)
        stop = list(dict.fromkeys(self._stop_strings + chat.stop)) if chat.stop else list(self._default_stop)
        return _Plan(max_tokens, trial.temperature_for(chat), stop)

    async def _sample(self, trial: Trial, prompt: list[int], params: tinker.SamplingParams, out: Outcome) -> Sampled:
        t_sample = time.perf_counter()
        try:
            sampled = await self._sample_latest(prompt, params, out)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the sampler's failure (or timeout), not the client's
            self._sampler_failed(trial, exc)
            raise client_error(exc, self.sample_timeout_s) from None
        finally:
            out.sample_ms = elapsed_ms(t_sample)
        out.output_tokens, out.stop_reason = len(sampled.tokens), sampled.stop_reason
        return sampled

    async def _sample_latest(self, prompt: list[int], params: tinker.SamplingParams, out: Outcome) -> Sampled:
        """One sample from the current sampler. Where the proxy follows the latest weights (a
        callable sampler) and newer weights were published while the call ran, a failure is the
        publish retiring the sampler (a gateway serving only its latest weights refuses the old
        one): the turn is sampled again from the new weights, the failed call having produced
        nothing. A run's samplers carry the update their weights come from
        (``runner.weights.VersionedSampler``), recorded on the turn."""
        for _ in range(MOVED_WEIGHTS_RETRIES):
            client = self._sampling_client()
            out.weights = getattr(client, "weights_version", None)
            try:
                return await sample_once(client, prompt, params, self.sample_timeout_s)
            except Exception:
                if self._sampling_client() is client:
                    raise
                log.info("weights moved from update %s while sampling: sampling again", out.weights)
        client = self._sampling_client()
        out.weights = getattr(client, "weights_version", None)
        return await sample_once(client, prompt, params, self.sample_timeout_s)

    def _sampling_client(self) -> Any:
        """``sampler`` is a client, or a callable returning the current one."""
        sampler = self._sampler
        return sampler if hasattr(sampler, "sample_async") or hasattr(sampler, "sample") else sampler()

    def _sampler_failed(self, trial: Trial, exc: BaseException) -> None:
        line = describe(exc)
        trial.stats.sampler_failed += 1
        trial.stats.last_sampler_error = line
        log.warning("trial %s: sampling failed: %s", trial.id, line)
        if self._on_sampler_error is not None:
            try:
                self._on_sampler_error(trial.id, exc)
            except Exception:  # noqa: BLE001 - the host's callback must never break a model call
                log.exception("on_sampler_error failed")

    def _capture(
        self,
        trial: Trial,
        chat: ChatRequest,
        splice: Splice,
        sampled: Sampled,
        plan: _Plan,
        out: Outcome,
        text: dict[str, Any] | None = None,
    ) -> int:
        """Persist the sampled turn, before anything can go wrong in parsing it; its index."""
        index = len(trial.turns)
        prompt = splice.prompt
        output, logprobs = sampled.tokens, sampled.logprobs
        if logprobs is None or len(logprobs) != len(output):
            self._lose(
                trial,
                f"turn {index}: the sampler returned "
                f"{'no' if logprobs is None else len(logprobs)} log-probs for {len(output)} tokens",
            )
            raise ProxyError(502, "the sampler returned no log-probs for this turn; it cannot be trained on")
        turn = CapturedTurn(
            turn=index,
            prompt_tokens=prompt,
            output_tokens=output,
            logprobs=[float(x) for x in logprobs],
            stop_reason=sampled.stop_reason,
            api=chat.api,
            started_at=out.started_at,
            sample_ms=out.sample_ms or 0.0,
            max_tokens=plan.max_tokens,
            temperature=plan.temperature,
            text=text,
            continues=splice.continues,
            new_datum=splice.new_datum,
            weights=out.weights,
        )
        try:
            trial.record(turn, splice.shared)
        except TurnNotPersisted as exc:
            self._lose(trial, str(exc))
            raise ProxyError(503, "the turn could not be captured; this trial cannot be trained on") from None
        out.turn = index
        return index


def _client_input(parse: Callable[..., Any], body: Any, *args: Any) -> Any:
    """A request parser, with any slip of its validation still the client's 400: its only input
    is the client's body. Logged without a traceback (at debug level, with one)."""
    try:
        return parse(body, *args)
    except ProxyError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        log.debug("capture proxy: malformed request: %s", describe(exc), exc_info=True)
        raise ProxyError(400, f"malformed request: {describe(exc, 200)}") from None


def _why(exc: BaseException | None) -> str | None:
    return None if exc is None else f"{type(exc).__name__}: {str(exc)[:300]}"


def elapsed_ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
