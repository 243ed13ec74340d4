"""Before a run starts: a gateway that answers healthz 503 is starting (waited for, with
progress, up to gateway.start_timeout), one that is not there is refused at once, and one that
refuses the installed SDK's version stops the run with its own words. Against loopback stand-ins
(tests_support.healthz); the engine's own 503 window is tested end to end in test_gateway_faults."""

import asyncio
import socket

import pytest

from tbconsole.record.events import GatewayHealth, LogLine
from tbconsole.runner.health import (
    GatewayRefusesSdk,
    GatewayUnreachable,
    GatewayWatch,
    check_sdk,
    wait_until_ready,
)

from tests_support.healthz import ScriptedGateway, scripted_gateway


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_starting_gateway_is_waited_for_with_progress_then_the_run_goes_on():
    script = ScriptedGateway(healthz=[503, 503, 503, 200])
    seen = []
    with scripted_gateway(script) as url:
        await wait_until_ready(url, seen.append, start_timeout=60, poll=0.01, say_every=0)
    health = [e for e in seen if isinstance(e, GatewayHealth)]
    assert [(e.ok, e.starting) for e in health] == [(False, True)] * 3 + [(True, False)]
    assert "503" in health[0].error and "trainer is initializing" in health[0].error
    lines = [e.message for e in seen if isinstance(e, LogLine)]
    assert len(lines) == 4 and all("starting" in m for m in lines[:3]) and "is ready after" in lines[-1]


async def test_a_gateway_still_starting_past_the_bound_is_unreachable_naming_the_option():
    with scripted_gateway(ScriptedGateway(healthz=[503])) as url:
        with pytest.raises(GatewayUnreachable) as raised:
            await wait_until_ready(url, lambda e: None, start_timeout=0.05, poll=0.01)
    assert "still starting" in str(raised.value) and "gateway.start_timeout" in str(raised.value)


async def test_a_closed_port_is_refused_at_the_first_probe():
    seen = []
    with pytest.raises(GatewayUnreachable) as raised:
        await wait_until_ready(f"http://127.0.0.1:{closed_port()}", seen.append, start_timeout=3600)
    assert "is not answering" in str(raised.value)
    assert len(seen) == 1 and not seen[0].ok and not seen[0].starting  # one probe, no waiting


async def test_a_gateway_that_refuses_the_sdk_version_is_said_with_its_own_words():
    refusal = "unsupported tinker SDK version '0.38.0': this deployment serves exactly tinker==0.24.1."
    script = ScriptedGateway(client_config=(400, {"detail": refusal}))
    with scripted_gateway(script) as url:
        with pytest.raises(GatewayRefusesSdk) as raised:
            await check_sdk(url, "0.38.0")
    assert script.sdk_versions == ["0.38.0"]
    message = str(raised.value)
    assert refusal in message and "docs/gateways.md" in message and "tinker 0.38.0" in message


@pytest.mark.parametrize("answer", [(200, {}), (404, {"detail": "not found"}), (500, {"detail": "boom"})])
async def test_a_gateway_that_does_not_refuse_the_sdk_is_left_to_it(answer):
    with scripted_gateway(ScriptedGateway(client_config=answer)) as url:
        await check_sdk(url, "0.38.0")


async def test_an_outage_is_ridden_out_within_the_limit_and_given_up_past_it():
    port = closed_port()
    watch = GatewayWatch(f"http://127.0.0.1:{port}", lambda e: None, retry=0.01, outage_limit=3600)
    assert not await watch.check() and not await watch.check() and watch.down.is_set()
    riding = asyncio.create_task(watch.ride_out())
    await asyncio.sleep(0)
    assert not riding.done()
    with scripted_gateway(ScriptedGateway()) as url:
        watch.base_url = url
        assert await watch.check()
    assert await asyncio.wait_for(riding, 5) is True and watch.down_for() == 0

    watch = GatewayWatch(f"http://127.0.0.1:{port}", lambda e: None, outage_limit=0.05)
    assert not await watch.check() and not await watch.check()
    # the guard (not a measure) would end a ride that ignored the limit for the default's 600 s
    assert await asyncio.wait_for(watch.ride_out(), 60) is False
    assert watch.down_for() >= 0.05


async def test_a_failed_model_call_waits_for_the_watch_s_verdict():
    down = GatewayWatch(f"http://127.0.0.1:{closed_port()}", lambda e: None, interval=3600, retry=0.01)
    running = asyncio.create_task(down.run())
    try:
        assert await asyncio.wait_for(down.confirm_down(), 30) is True
    finally:
        running.cancel()
    with scripted_gateway(ScriptedGateway()) as url:
        up = GatewayWatch(url, lambda e: None, interval=3600, retry=0.01)
        running = asyncio.create_task(up.run())
        try:
            assert await asyncio.wait_for(up.confirm_down(), 30) is False
        finally:
            running.cancel()
