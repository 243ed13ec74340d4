"""Local model names, their tokenizer, and their registration with the cookbook.

The cookbook resolves a model name in two places the runner depends on:
`tokenizer_utils.get_tokenizer(name)` (has a registry: `register_tokenizer`) and
`model_info.get_recommended_renderer_name(name)` (has no registry: it dispatches on the org).
`register_with_cookbook()` adds our names to the first and wraps `model_info.get_model_attributes`
(module attribute, so every caller going through the module sees it) for the second, without
editing the cookbook. Both are idempotent.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbconsole.engine.config import SMALL, TINY, ModelConfig
from tbconsole.engine.errors import BadRequest

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
TOKENIZER_DIR = ASSETS_DIR / "tokenizer"
POLICIES_DIR = ASSETS_DIR / "policies"
QWEN3_5_RENDERERS = ("qwen3_5", "qwen3_5_disable_thinking", "qwen3_5_preserve_thinking")


@dataclass(frozen=True)
class LocalModel:
    name: str
    config: ModelConfig
    size: str
    seed: int = 0
    renderers: tuple[str, ...] = QWEN3_5_RENDERERS
    # A PEFT adapter folder merged into the seeded base weights: a starting policy made by
    # `tbconsole warmup` (training then adds a fresh LoRA on top, as on any base model).
    warm_start: Path | None = None

    @property
    def tokenizer_dir(self) -> Path:
        return TOKENIZER_DIR


MODELS: dict[str, LocalModel] = {
    m.name: m
    for m in (
        LocalModel("tbconsole/qwen3-tiny", TINY, "7M"),
        LocalModel("tbconsole/qwen3-small", SMALL, "30M"),
        LocalModel("tbconsole/qwen3-tiny-agent", TINY, "7M", warm_start=POLICIES_DIR / "qwen3-tiny-agent"),
        # Warmed up on two-turn demonstrations (look up, then act): `tbconsole demo --multi-turn`.
        LocalModel("tbconsole/qwen3-tiny-agent-mt", TINY, "7M", warm_start=POLICIES_DIR / "qwen3-tiny-agent-mt"),
    )
}
DEFAULT_MODEL = "tbconsole/qwen3-tiny"


def get_local_model(name: str) -> LocalModel:
    """The preset for `name` (a `:suffix` is ignored, as the cookbook does). KeyError if unknown."""
    return MODELS[name.split(":", 1)[0]]


def check_base_model(requested: str | None, served: str) -> None:
    """Refuse a request naming a base model other than the one served (a `:suffix` is ignored)."""
    if requested is not None and requested.split(":", 1)[0] != served:
        raise BadRequest(f"base model {requested!r} is not served here; this engine serves {served!r}")


def recommended_renderer(name: str) -> str:
    return get_local_model(name).renderers[0]


@functools.cache
def load_tokenizer() -> Any:
    """The shipped tokenizer as an HF fast tokenizer (what the SDK and the cookbook expect)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))


_REGISTERED = False


def register_with_cookbook() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    from tinker_cookbook import model_info
    from tinker_cookbook.tokenizer_utils import register_tokenizer

    for name in MODELS:
        register_tokenizer(name, load_tokenizer)

    original = model_info.get_model_attributes
    if not getattr(original, "_tbconsole_wrapped", False):

        def get_model_attributes(model_name: str) -> model_info.ModelAttributes:
            base = model_name.split(":", 1)[0]
            local = MODELS.get(base)
            if local is None:
                return original(model_name)
            return model_info.ModelAttributes(
                organization="tbconsole",
                version_str="3",
                size_str=local.size,
                is_chat=True,
                recommended_renderers=local.renderers,
            )

        get_model_attributes._tbconsole_wrapped = True  # type: ignore[attr-defined]
        get_model_attributes.__doc__ = original.__doc__
        model_info.get_model_attributes = get_model_attributes
    _REGISTERED = True
