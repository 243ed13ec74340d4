"""Stand-in gateways that answer only ``GET /api/v1/healthz`` and ``POST /api/v1/client/config``
(for checks that must get past the gateway probes without a real engine, and for the probes'
own answers: a gateway starting (503), one refusing the SDK). The real engine's answers are
tested against the engine itself (tests/engine)."""

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedGateway:
    """What the stand-in answers: healthz answers ``healthz[0]``, ``healthz[1]``, … and then its
    last one for ever; client/config answers ``client_config`` (status, JSON body)."""

    def __init__(self, healthz: list[int] | None = None, client_config: tuple[int, dict] | None = None):
        self.healthz = list(healthz or [200])
        self.client_config = client_config or (200, {"pjwt_auth_enabled": False})
        self.probes = 0
        self.sdk_versions: list[str] = []
        self._lock = threading.Lock()

    def next_healthz(self) -> int:
        with self._lock:
            status = self.healthz[min(self.probes, len(self.healthz) - 1)]
            self.probes += 1
            return status


def _handler(script: ScriptedGateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path != "/api/v1/healthz":
                return self._answer(404, {})
            status = script.next_healthz()
            body = {"status": "ok"} if status == 200 else {"detail": "trainer is initializing"}
            self._answer(status, body)

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/api/v1/client/config":
                return self._answer(404, {})
            script.sdk_versions.append(json.loads(body or b"{}").get("sdk_version", ""))
            self._answer(*script.client_config)

        def log_message(self, *args):
            pass

    return Handler


@contextlib.contextmanager
def scripted_gateway(script: ScriptedGateway) -> Iterator[str]:
    """Yields the base URL of a loopback server answering as ``script`` says."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def healthz_server() -> Iterator[str]:
    """Yields the base URL of a loopback server whose healthz answers 200."""
    with scripted_gateway(ScriptedGateway()) as url:
        yield url
