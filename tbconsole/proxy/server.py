"""``CaptureProxy``: one capture proxy per group, the object its host holds (see the package
docstring for the contract).

It only wires and runs the parts: ``trials`` (registry, keys, capture files, per-trial stats),
``pipeline`` (parse → render → sample → capture → answer) and ``http`` (the aiohttp app, routes,
auth, API-shaped answers and errors), and publishes their events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from tinker_cookbook.renderers.base import Renderer

from tbconsole.proxy.body import MAX_BODY_BYTES
from tbconsole.proxy.capture import CapturedTurn
from tbconsole.proxy.http import ProxyHttp
from tbconsole.proxy.pipeline import Pipeline
from tbconsole.proxy.server_log import ServerLog
from tbconsole.proxy.trials import TrialCredential, TrialRegistry, TrialStats
from tbconsole.record.events import CaptureLost, Event

log = logging.getLogger("tbconsole.proxy")


class CaptureProxy:
    """One per group. The constructor's settings are kept as attributes of the same names (read
    them; changing them after construction has no effect)."""

    def __init__(
        self,
        *,
        renderer: Renderer,
        sampler: Any,
        default_max_tokens: int,
        capture_dir: Path | str,
        tokenizer: Any = None,
        publish: Callable[[Event], None] | None = None,
        step: int = 0,
        group: int = 0,
        listen_host: str = "127.0.0.1",
        advertised_host: str | None = None,
        port: int = 0,
        model_name: str = "policy",
        fsync: bool = False,
        incremental: bool = True,
        continuity: bool = True,
        keepalive_s: float = 10.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        sample_timeout_s: float | None = None,
        on_sampler_error: Callable[[str, BaseException], None] | None = None,
        on_capture_lost: Callable[[str, str], None] | None = None,
    ):
        """Checks and keeps the settings, then builds the parts (trials, pipeline, http); nothing
        listens before ``start``."""
        if default_max_tokens <= 0:
            raise ValueError("default_max_tokens must be positive")
        if sample_timeout_s is not None and not sample_timeout_s > 0:
            raise ValueError("sample_timeout_s must be positive")
        self.renderer = renderer
        self.tokenizer = tokenizer if tokenizer is not None else renderer.tokenizer
        self.default_max_tokens = int(default_max_tokens)
        self.capture_dir = Path(capture_dir)
        self.step = step
        self.group = group
        self.listen_host = listen_host
        self.advertised_host = advertised_host or listen_host
        self.model_name = model_name
        self.fsync = fsync
        self.incremental = incremental
        self.continuity = continuity  # token continuity (``continuity``): earlier samples' tokens in later prompts
        self.keepalive_s = keepalive_s
        self.max_body_bytes = max_body_bytes
        self.sample_timeout_s = sample_timeout_s
        # Called with (trial id, reason) once a turn of a trial could not be captured, from
        # whichever thread found it out: the runner stops that trial (it cannot be trained on).
        self._on_capture_lost = on_capture_lost
        self.port: int | None = None  # the bound port, once started
        self._listen_port = port
        self._publish_fn = publish
        self._runner: web.AppRunner | None = None
        self._trials = self._trial_registry()
        self._keys = self._trials.keys
        self._pipeline = self._sampling_pipeline(sampler, on_sampler_error)
        self._http = self._http_front()
        self._errors = self._http.errors  # the error middleware, for apps of one's own

    def _trial_registry(self) -> TrialRegistry:
        """The group's trials: their keys, capture files and stats (a lost capture reported)."""
        return TrialRegistry(
            self.renderer,
            self.capture_dir,
            fsync=self.fsync,
            incremental=self.incremental,
            continuity=self.continuity,
            on_lost=self._capture_lost,
        )

    def _sampling_pipeline(
        self, sampler: Any, on_sampler_error: Callable[[str, BaseException], None] | None
    ) -> Pipeline:
        """Parse → render → sample → capture → answer, on a thread named for the group."""
        return Pipeline(
            renderer=self.renderer,
            tokenizer=self.tokenizer,
            sampler=sampler,
            default_max_tokens=self.default_max_tokens,
            sample_timeout_s=self.sample_timeout_s,
            on_sampler_error=on_sampler_error,
            lose=self._trials.lose,
            thread_name=f"proxy-g{self.group}",
        )

    def _http_front(self) -> ProxyHttp:
        """The aiohttp app: routes, auth, API-shaped answers and errors, its events published."""
        return ProxyHttp(
            self._trials,
            self._pipeline,
            model_name=self.model_name,
            max_body_bytes=self.max_body_bytes,
            keepalive_s=self.keepalive_s,
            publish=self._publish,
            step=self.step,
            group=self.group,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("proxy not started")
        host = self.advertised_host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def app(self) -> web.Application:
        return self._http.app()

    async def start(self) -> None:
        if self._runner is not None:
            return
        # auto_decompress off: bodies are decoded in ``body``, where a bad one is a 4xx, not a reset.
        runner = web.AppRunner(
            self.app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=2.0,
            auto_decompress=False,
            logger=ServerLog(),
        )
        await runner.setup()
        site = web.TCPSite(runner, self.listen_host, self._listen_port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info(
            "capture proxy for step %s group %s listening on %s:%s", self.step, self.group, self.listen_host, self.port
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._pipeline.close()
        self._trials.close()

    async def __aenter__(self) -> CaptureProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- trials --------------------------------------------------------------------------------

    def register_trial(
        self, trial_id: str, *, context_window: int | None = None, temperature: float | None = None
    ) -> TrialCredential:
        return self._trials.register(trial_id, self.url, context_window=context_window, temperature=temperature)

    def turns(self, trial_id: str) -> list[CapturedTurn]:
        """The trial's captured turns, in order, with full prompts."""
        return self._trials[trial_id].captured_turns()

    def replies(self, trial_id: str) -> list[tuple[int, dict[str, Any] | None]]:
        """(turn, reply) of the trial's captured turns, in order: each reply as its capture line
        holds it (``{"text", "reasoning"?, "tool_calls"?}``)."""
        return list(self._trials[trial_id].replies)

    def lost(self, trial_id: str) -> bool:
        return self._trials[trial_id].lost is not None

    def lost_reason(self, trial_id: str) -> str | None:
        return self._trials[trial_id].lost

    def stats(self, trial_id: str) -> TrialStats:
        return self._trials[trial_id].stats

    def capture_path(self, trial_id: str) -> Path:
        return self._trials[trial_id].writer.path

    # -- events --------------------------------------------------------------------------------

    def _publish(self, event: Event) -> None:
        if self._publish_fn is None:
            return
        try:
            self._publish_fn(event)
        except Exception:  # noqa: BLE001 - an observer must never break a model call
            log.exception("publishing %s failed", event.kind)

    def _capture_lost(self, trial_id: str, reason: str) -> None:
        self._publish(CaptureLost(step=self.step, group=self.group, trial=trial_id, error=reason))
        if self._on_capture_lost is not None:
            try:
                self._on_capture_lost(trial_id, reason)
            except Exception:  # noqa: BLE001 - the host's callback must never break a model call
                log.exception("on_capture_lost failed")
