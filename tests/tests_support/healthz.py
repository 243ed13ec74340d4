"""A stand-in gateway that answers only ``GET /api/v1/healthz`` (for command-line checks that
must get past the gateway probe without a real engine)."""

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Healthz(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        ok = self.path == "/api/v1/healthz"
        body = b'{"status":"ok"}' if ok else b"{}"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def healthz_server():
    """Yields the base URL of a loopback server whose healthz answers 200."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
