"""Shared fixtures: one engine per test session on loopback, driven through the real SDK."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TINKER_TELEMETRY", "0")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))

from tbconsole.engine import DEFAULT_MODEL  # noqa: E402

# The same suite runs on a GPU with TBCONSOLE_ENGINE_DEVICE=cuda.
DEVICE = os.environ.get("TBCONSOLE_ENGINE_DEVICE", "cpu")

# Small enough for this machine, large enough for every test; the budget tests rely on these.
MAX_CONTEXT = 2048
MAX_TOKENS_PER_REQUEST = 16_384
KV_BUDGET = 65_536


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    from tbconsole.engine import EmbeddedEngine

    with EmbeddedEngine(
        data_dir=tmp_path_factory.mktemp("engine-data"),
        device=DEVICE,
        max_context=MAX_CONTEXT,
        max_tokens_per_request=MAX_TOKENS_PER_REQUEST,
        kv_budget_tokens=KV_BUDGET,
        max_num_samples=16,
        long_poll_s=5.0,
    ) as eng:
        yield eng


@pytest.fixture(scope="session")
def service_client(engine):
    import tinker

    client = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
    yield client


@pytest.fixture(scope="session")
def tokenizer():
    from tbconsole.engine.registry import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def limits() -> dict[str, int]:
    return {"max_context": MAX_CONTEXT, "max_tokens_per_request": MAX_TOKENS_PER_REQUEST}


@pytest.fixture(scope="session")
def device() -> str:
    return DEVICE


@pytest.fixture(scope="session")
def base_model() -> str:
    return DEFAULT_MODEL
