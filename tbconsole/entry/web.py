"""``tbconsole attach LOG_PATH --web``: the same console in a browser, through textual-serve
(``tbconsole compare … --web`` serves its comparison the same way: ``serve_command``).

textual-serve starts one process per browser connection; each runs ``tbconsole attach LOG_PATH``
under Textual's web driver, so a browser gets exactly what a terminal gets (live with controls,
or a replay). There is no login: whoever reaches the address can pause, stop or abort the run
(the command line defaults to loopback and warns for any other host).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import ipaddress
import shlex
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual_serve.server import Server


def serve(log_path: Path, theme: str | None, host: str, port: int) -> int:
    """Serve the console over ``log_path`` on ``host:port`` until Ctrl-C (0); 2 when it cannot listen."""
    return serve_command(
        _attach_command(log_path, theme), "attach", str(log_path), f"tbconsole · {log_path.name}", host, port
    )


def serve_command(command: str, prog: str, what: str, title: str, host: str, port: int) -> int:
    """Serve ``command`` (a shell command that runs a Textual app: one process per browser
    session) on ``host:port`` until Ctrl-C (0); 2 when it cannot listen. ``prog`` names the
    subcommand in its messages, ``what`` what it serves."""
    from textual_serve.server import Server  # only here: plain `attach` never loads the web server

    class QuietServer(Server):
        async def on_startup(self, app: Any) -> None:
            """textual-serve prints a banner here; one line once the port listens is enough."""

    url = _url(host, port)
    server = QuietServer(command, host=host, port=port, title=title, public_url=url)
    error = asyncio.run(_serve_until_interrupted(server, host, port, url, f"tbconsole {prog}: serving {what}"))
    if error is not None:
        print(f"tbconsole {prog} --web: {error}", file=sys.stderr)
        return 2
    return 0


async def _serve_until_interrupted(server: Server, host: str, port: int, url: str, serving: str) -> str | None:
    """Listen, then serve until SIGINT/SIGTERM; returns why it could not listen (None: it did)."""
    from aiohttp import web

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # textual-serve's routes under our own runner: its serve() announces the URL before the port
    # listens, and closes the loop before its sessions' processes are closed.
    runner = web.AppRunner(await server._make_app())
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} is already in use on {host}; choose another with --port"
            return f"cannot listen on {host}:{port}: {exc}"
        print(f"{serving} at {url} (Ctrl-C to stop)", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
        await _close_sessions()
    return None


async def _close_sessions(grace: float = 2.0) -> None:
    """textual-serve never closes its sessions' processes (one per browser connection; each was
    told to quit). Let them exit, then close them while this loop still runs, killing any still
    going: a transport left to the garbage collector after the loop has closed prints an
    "Event loop is closed" traceback at exit."""
    sessions = [o for o in gc.get_objects() if isinstance(o, asyncio.SubprocessTransport) and not o.is_closing()]
    deadline = time.monotonic() + grace
    while any(t.get_returncode() is None for t in sessions) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for transport in sessions:
        transport.close()


def _attach_command(log_path: Path, theme: str | None) -> str:
    """The shell command textual-serve runs for each browser session."""
    argv = [sys.executable, "-m", "tbconsole", "attach", str(log_path.absolute())]
    if theme is not None:
        argv += ["--theme", theme]
    return shlex.join(argv)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int) -> str:
    """The address to open. The page builds its websocket URL from it, so a wildcard bind shows
    this machine's name rather than an address no browser can reach."""
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"
