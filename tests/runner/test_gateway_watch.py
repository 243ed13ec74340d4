"""GatewayWatch against real loopback servers: refused connections mark the gateway down after
two probes, a gateway that is only slow needs four timeouts in a row, and it comes back up."""

import asyncio
import socket

from tbconsole.runner.health import GatewayWatch

from tests_support.healthz import healthz_server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_refused_twice_is_down_and_a_good_probe_is_up_again():
    seen = []
    watch = GatewayWatch(f"http://127.0.0.1:{closed_port()}", seen.append)
    assert not await watch.check() and not watch.down.is_set()  # one failure may be a hiccup
    assert not await watch.check() and watch.down.is_set() and not watch.up.is_set()
    assert "is not answering" in watch.reason and len(seen) == 2 and not any(e.ok for e in seen)
    with healthz_server() as url:
        watch.base_url = url
        assert await watch.check()
    assert not watch.down.is_set() and watch.up.is_set() and seen[-1].ok


async def test_a_slow_gateway_needs_four_timeouts_in_a_row():
    silent = socket.socket()  # accepts connections (the kernel's backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        watch = GatewayWatch(f"http://127.0.0.1:{silent.getsockname()[1]}", lambda e: None, probe_timeout=0.2)
        for _ in range(3):
            assert not await watch.check()
        assert not watch.down.is_set(), "three timeouts must not cancel every group in flight"
        assert not await watch.check()
        assert watch.down.is_set()
    finally:
        silent.close()


async def test_a_failed_model_call_makes_the_watch_probe_at_once():
    watch = GatewayWatch(f"http://127.0.0.1:{closed_port()}", lambda e: None, interval=3600, retry=0.05)
    running = asyncio.create_task(watch.run())
    try:
        watch.suspect()  # otherwise the next probe would be an hour away
        await asyncio.wait_for(watch.down.wait(), 5)
    finally:
        running.cancel()
