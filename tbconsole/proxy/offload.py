"""Rendering and tokenizing off the event loop.

A trial's prompt can be megabytes (an agent that cats a large file): tokenizing 5 MB takes
0.5-2.6 s, and on the group's event loop that stalls every other trial of the group. The work
runs on the proxy's own small thread pool instead. The tokenizers either release the GIL or (the
``tml_renderers`` ones, see ``tokenizer``) are fed in bounded chunks, so the loop keeps running.
Renders with little new text stay on the loop (the server decides, ``INLINE_RENDER_CHARS``):
under load a thread waits longer for the GIL than they take.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any


async def off_loop[T](executor: Executor, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on ``executor``. Cancelled, it still waits for the thread to finish (a thread
    cannot be interrupted): the caller holds the trial's lock, and the trial's renderer must not
    be used by two threads at once."""
    future = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.wait([future])
            except asyncio.CancelledError:
                continue
        raise
