"""Child processes on asyncio that a cancel or a kill can never leave half-made, unreaped or
reaped twice: the spawn, its output protocol, and the kill of its whole tree."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tbconsole.common.cpushare import SANDBOX_SESSION_NICE, lower_session_weight
from tbconsole.common.procgroup import kill_tree

OutputSink = Callable[[str, str], Awaitable[None]]
SpawnedChild = tuple[asyncio.SubprocessTransport, "ExecProtocol"]


class ExecProtocol(asyncio.SubprocessProtocol):
    """Collects output and signals exit separately from end-of-output: asyncio's
    Process.wait() waits for every pipe to close, which a background job can prevent."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: OutputSink | None):
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        # Done at the first end of line on stdout, or once the process or its pipes end.
        self.first_line: asyncio.Future[None] = loop.create_future()
        self._sink = sink
        self._forwarding: asyncio.Task | None = None
        self._pending: list[tuple[str, str]] = []
        self._loop = loop

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).append(data)
        if fd == 1 and b"\n" in data:
            _resolve(self.first_line)
        if self._sink is not None:
            self._pending.append((data.decode(errors="replace"), "stdout" if fd == 1 else "stderr"))
            if self._forwarding is None or self._forwarding.done():
                self._forwarding = self._loop.create_task(self._forward(self._sink))

    async def _forward(self, sink: OutputSink) -> None:
        # One task at a time, in arrival order: the sink sees chunks as they came.
        while self._pending:
            text, name = self._pending.pop(0)
            await sink(text, name)

    async def flush(self) -> None:
        if self._forwarding is not None:
            await self._forwarding

    def process_exited(self) -> None:
        _resolve(self.exited)
        _resolve(self.first_line)

    def connection_lost(self, exc: Exception | None) -> None:
        _resolve(self.closed)
        _resolve(self.first_line)


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


async def spawn(
    loop: asyncio.AbstractEventLoop,
    protocol_factory: Callable[[], ExecProtocol],
    argv: list[str],
    **kwargs: Any,
) -> SpawnedChild:
    """loop.subprocess_exec in a session of its own, which a cancel cannot cut half-way.

    asyncio's own cleanup of a cancelled spawn SIGKILLs only the direct child, reaps it behind
    its child watcher's back (Popen.poll: "exit status already read" warnings) and then waits
    for its pipes to close, which a surviving grandchild (a namespace's PID 1) holds open
    forever: the cancelled task hangs. Here the spawn runs to its end (milliseconds), then the
    process and all it started are killed and collected by their normal path.
    """
    started = asyncio.ensure_future(
        loop.subprocess_exec(
            protocol_factory,
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            **kwargs,
        )
    )
    try:
        spawned = await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(_kill_spawned)
        raise
    lower_session_weight(spawned[0].get_pid(), SANDBOX_SESSION_NICE)
    return spawned


def _kill_spawned(started: asyncio.Future[SpawnedChild]) -> None:
    if started.cancelled() or started.exception() is not None:
        return
    transport, protocol = started.result()
    kill_child(transport.get_pid(), protocol.exited)
    close_when_exited(transport, protocol)


def kill_child(pid: int, exited: asyncio.Future) -> None:
    """SIGKILL a child we spawned in a session of its own, with all it started (``kill_tree``:
    its process group in one go, so a fork in progress cannot slip through, e.g. the namespace's
    PID 1 while unshare starts; and its descendants, which get those that left the group).
    Nothing once it is reaped: its pid may be someone else's by then."""
    if exited.done():
        return
    kill_tree(pid)


def close_when_exited(transport: asyncio.SubprocessTransport, protocol: ExecProtocol) -> None:
    """Close a subprocess transport once its exit is known, not before: closing earlier makes
    asyncio reap the child itself (Popen.poll), and its child watcher then reports 255 with an
    "exit status already read" warning."""
    if protocol.exited.done():
        transport.close()
    else:
        protocol.exited.add_done_callback(lambda _: transport.close())
