"""Run the engine inside another program: the server gets its own thread and event loop, so
the host's loop (Textual's, pytest's) never runs model code and SDK calls can block on it.

    with EmbeddedEngine(data_dir=tmp) as engine:        # or: async with ...
        client = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from aiohttp import web

from tbconsole.engine.routes import make_runner
from tbconsole.engine.server import Engine, EngineSettings

LOCAL_API_KEY = "tml-local"  # the SDK insists on a `tml-` key; the engine accepts any by default


class EmbeddedEngine:
    def __init__(self, settings: EngineSettings | None = None, **overrides: Any):
        settings = settings or EngineSettings()
        self.settings = dataclasses.replace(settings, **overrides)
        self.engine: Engine | None = None
        self.base_url = ""
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def api_key(self) -> str:
        return self.settings.api_key or LOCAL_API_KEY

    def start(self) -> EmbeddedEngine:
        if self._thread is not None:
            return self
        self.engine = Engine(self.settings)
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                assert self.engine is not None
                self._runner = make_runner(self.engine.app())
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.settings.host, self.settings.port)
                loop.run_until_complete(site.start())
                self.port = self._runner.addresses[0][1]
            except BaseException as e:  # surfaced to start()'s caller
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="tbconsole-engine-http", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            self.engine.close()
            raise failure[0]
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self.port}"
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        if self.engine is not None:
            self.engine.close()

    def __enter__(self) -> EmbeddedEngine:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedEngine:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.stop)
