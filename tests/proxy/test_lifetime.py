"""A stopped proxy is freed: nothing outside it keeps its trials, captured turns, renderers or
sampling client alive after its group ended. The runner starts a proxy per group, so one that
outlives its group is a leak of a group's worth of memory per step (aiohttp's module-level cache
of middleware-wrapped handlers held every proxy until this was fixed)."""

import gc
import weakref

import aiohttp

from tests_support.proxy import make_harness


async def test_a_stopped_proxy_is_freed(renderer, tmp_path):
    gone = []
    for i in range(3):
        h = make_harness(renderer, tmp_path / f"capture{i}")
        await h.proxy.start()
        credential = h.proxy.register_trial(f"trial-{i}")
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": f"Bearer {credential.api_key}"}
            async with session.get(credential.openai_base_url + "/models", headers=headers) as response:
                assert response.status == 200
            async with session.get(h.proxy.url + "/no-such-route") as response:
                assert response.status == 404
        await h.proxy.stop()
        gone.append(weakref.ref(h.proxy))
        del h, credential
    gc.collect()
    assert [ref() for ref in gone] == [None, None, None]
