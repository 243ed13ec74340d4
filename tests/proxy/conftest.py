import pytest
from tinker_cookbook.renderers import get_renderer

from tbconsole.proxy.tokenizer import qwen35_tokenizer

from tests_support.proxy import close_clients, make_harness


@pytest.fixture(scope="session")
def tokenizer():
    return qwen35_tokenizer()


@pytest.fixture(scope="session")
def renderer(tokenizer):
    return get_renderer("qwen3_5", tokenizer)


@pytest.fixture
async def harness(renderer, tmp_path):
    """A started proxy (scripted sampler, events collected) for one test."""
    made = []

    async def make(**kwargs):
        h = make_harness(renderer, kwargs.pop("capture_dir", tmp_path / "capture"), **kwargs)
        await h.proxy.start()
        made.append(h)
        return h

    yield make
    for h in made:
        await h.proxy.stop()


@pytest.fixture(autouse=True)
async def _close_sdk_clients():
    """Closes the SDK clients a test opened (``tests_support.proxy.openai_client`` and the like)."""
    yield
    await close_clients()
