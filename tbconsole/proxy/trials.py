"""The proxy's trials: who may call it, where each trial's turns go, and what each trial did.

A trial is registered by id (``TRIAL_ID``), with its own key (``keys``) and its capture file
``<capture_dir>/<trial_id>.jsonl`` (the runner hands over the attempt's capture folder, laid out
by ``tbconsole.record.runfolder``), created exclusively at its first turn. Per trial: one sampling
request at a time (``Trial.lock``), its own incremental renderer and conversion cache, the turns
it captured (kept compactly), why a turn was lost (if one was), and its ``TrialStats``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinker_cookbook.renderers.base import Renderer

from tbconsole.proxy.capture import CapturedTurn, CaptureWriter
from tbconsole.proxy.chat import ChatRequest, ConversionCache
from tbconsole.proxy.continuity import Continuity
from tbconsole.proxy.errors import ProxyError
from tbconsole.proxy.keys import TrialKeys
from tbconsole.proxy.render import IncrementalRenderer
from tbconsole.proxy.turn_text import ConversationCursor

log = logging.getLogger("tbconsole.proxy")

TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class TrialCredential:
    """What an agent needs to call the proxy as one trial. ``api_key`` is a secret: keep it out
    of logs and events (``repr`` hides it)."""

    trial_id: str
    proxy_url: str  # OpenAI clients: {proxy_url}/v1; Anthropic clients: {proxy_url}
    api_key: str = field(repr=False)  # this trial's own key; it opens no other trial's routes

    @property
    def openai_base_url(self) -> str:
        return self.proxy_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.proxy_url


@dataclass
class TrialStats:
    requests: int = 0
    captured: int = 0
    rejected: int = 0  # 4xx
    context_refused: int = 0  # of which: prompt + max_tokens over the trial's context window
    failed: int = 0  # 5xx (sampler, parse, capture)
    sampler_failed: int = 0  # of which: the sampler raised or timed out (infrastructure, not the agent)
    last_sampler_error: str | None = None  # "Type: message" of the latest, short, credentials masked
    prompt_tokens: int = 0
    output_tokens: int = 0

    def count_request(self, status: int) -> None:
        self.requests += 1
        if status >= 500:
            self.failed += 1
        elif status >= 400:
            self.rejected += 1


class TurnNotPersisted(Exception):
    """The disk refused a turn; the message says how."""


@dataclass
class _StoredTurn:
    """A captured turn, kept compactly: tuples (the GC does not track them), and the prompt as
    its tail after the ``shared`` tokens it has in common with the previous turn's prompt."""

    meta: CapturedTurn  # without its tokens and log-probs
    shared: int
    prompt_tail: tuple[int, ...]
    output: tuple[int, ...]
    logprobs: tuple[float, ...]


class Trial:
    def __init__(
        self,
        trial_id: str,
        renderer: Renderer,
        writer: CaptureWriter,
        *,
        context_window: int | None,
        temperature: float | None,
        incremental: bool,
        continuity: bool = True,
    ):
        self.id = trial_id
        self.context_window = context_window
        self.temperature = temperature
        self.lock = asyncio.Lock()
        self.renderer = IncrementalRenderer(renderer, incremental=incremental)
        self.continuity = Continuity(self.renderer, enabled=continuity)
        self.conversion = ConversionCache()
        self.conversation = ConversationCursor()  # what each captured request added, for its text
        self.writer = writer
        self.renders_at_capture = -1  # renderer.render_count right after the last captured turn
        self.turns: list[_StoredTurn] = []
        # (turn, the reply as its capture line holds it) for each captured turn: the runner's
        # reward-hacking watch reads the commands in them when the trial ends. The rest of a
        # turn's text (the messages, its bulk) is only in the file.
        self.replies: list[tuple[int, dict[str, Any] | None]] = []
        self.lost: str | None = None
        self.stats = TrialStats()

    def temperature_for(self, chat: ChatRequest) -> float:
        """The trial's temperature, else the request's, else 1."""
        if self.temperature is not None:
            return self.temperature
        return chat.temperature if chat.temperature is not None else 1.0

    def record(self, turn: CapturedTurn, known_shared: int | None = None) -> None:
        """Persist ``turn`` (one ``write``, and an ``fsync`` when the writer syncs every turn),
        then keep it; ``TurnNotPersisted`` when the disk refuses it. ``known_shared``: leading
        prompt tokens known to equal the previous captured prompt's (from the splice)."""
        renderer = self.renderer
        known = known_shared
        if known is None and not self.continuity.usable:
            # The renderer knows how much of this prompt repeats its previous one; that is the
            # previous *captured* prompt when nothing was rendered in between. (A spliced prompt
            # is not the renderer's, so its count does not apply there.)
            if renderer.render_count == self.renders_at_capture + 1:
                known = renderer.reused_tokens or None
        try:
            shared = self.writer.write(turn, known_shared=known)
            self.writer.sync()
        except Exception as exc:  # noqa: BLE001 - disk full, permissions, NaN log-prob…
            raise TurnNotPersisted(f"turn {turn.turn} could not be persisted: {type(exc).__name__}: {exc}") from exc
        self.turns.append(
            _StoredTurn(
                meta=dataclasses.replace(turn, prompt_tokens=[], output_tokens=[], logprobs=[], text=None),
                shared=shared,
                prompt_tail=tuple(turn.prompt_tokens[shared:]),
                output=tuple(turn.output_tokens),
                logprobs=tuple(turn.logprobs),
            )
        )
        self.replies.append((turn.turn, (turn.text or {}).get("reply")))
        self.renders_at_capture = renderer.render_count
        self.stats.captured += 1
        self.stats.prompt_tokens += len(turn.prompt_tokens)
        self.stats.output_tokens += len(turn.output_tokens)

    def captured_turns(self) -> list[CapturedTurn]:
        """The captured turns, in order, with full prompts."""
        out = []
        prev: list[int] = []
        for stored in self.turns:
            prompt = prev[: stored.shared] + list(stored.prompt_tail)
            out.append(
                dataclasses.replace(
                    stored.meta, prompt_tokens=prompt, output_tokens=list(stored.output), logprobs=list(stored.logprobs)
                )
            )
            prev = prompt
        return out


class TrialRegistry:
    """The group's trials and their keys. ``on_lost(trial_id, reason)``: a trial lost a turn."""

    def __init__(
        self,
        renderer: Renderer,
        capture_dir: Path,
        *,
        fsync: bool,
        incremental: bool,
        continuity: bool = True,
        on_lost: Callable[[str, str], None],
    ):
        self.renderer = renderer
        self.capture_dir = capture_dir
        self.fsync = fsync
        self.incremental = incremental
        self.continuity = continuity
        self.keys = TrialKeys()
        self._on_lost = on_lost
        self._trials: dict[str, Trial] = {}

    def register(
        self, trial_id: str, base_url: str, *, context_window: int | None = None, temperature: float | None = None
    ) -> TrialCredential:
        if not TRIAL_ID.match(trial_id):
            raise ValueError(
                f"trial id {trial_id!r} must be 1-128 characters of [A-Za-z0-9._-], starting with a letter or digit"
            )
        if trial_id in self._trials:
            raise ValueError(f"trial {trial_id!r} is already registered")
        if context_window is not None and context_window <= 0:
            raise ValueError("context_window must be positive")
        if temperature is not None and not 0 <= temperature <= 2:
            raise ValueError("temperature must be between 0 and 2")
        # The file name RunFolder.capture_file gives: the folder is the attempt's, from the runner.
        writer = CaptureWriter(self.capture_dir / f"{trial_id}.jsonl", trial_id, fsync=self.fsync)
        self._trials[trial_id] = Trial(
            trial_id,
            self.renderer,
            writer,
            context_window=context_window,
            temperature=temperature,
            incremental=self.incremental,
            continuity=self.continuity,
        )
        return TrialCredential(trial_id=trial_id, proxy_url=f"{base_url}/t/{trial_id}", api_key=self.keys.key(trial_id))

    def __getitem__(self, trial_id: str) -> Trial:
        try:
            return self._trials[trial_id]
        except KeyError:
            raise KeyError(f"unknown trial {trial_id!r}") from None

    def authorize(self, trial_id: str, headers: Mapping[str, str]) -> Trial:
        """The trial, for a request that presents its key: 401 otherwise (whether or not the
        trial exists), 404 for the right key of a trial never registered."""
        if not self.keys.accepts(trial_id, headers):
            raise ProxyError(401, "invalid or missing API key", code="invalid_api_key")
        trial = self._trials.get(trial_id)
        if trial is None:
            raise ProxyError(404, "unknown trial")
        return trial

    def lose(self, trial: Trial, reason: str) -> None:
        """A turn of ``trial`` was sampled but not persisted: the trial cannot be trained on."""
        if trial.lost is None:
            trial.lost = reason
        log.error("trial %s: capture lost: %s", trial.id, reason)
        self._on_lost(trial.id, reason)

    def close(self) -> None:
        """Sync and close every capture file; a trial whose file cannot be synced is lost."""
        for trial in self._trials.values():
            try:
                trial.writer.close()
            except OSError as exc:
                if trial.turns:
                    self.lose(trial, f"the capture file could not be synced at the end: {exc}")
