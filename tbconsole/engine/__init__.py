"""Local Tinker-compatible engine: a loopback server that the real `tinker` SDK and the
cookbook's RL loop train against (LoRA on a small Qwen3-architecture model).

Modules: `config` (model shapes/presets), `registry` (model names, tokenizer, cookbook
registration), `model` (torch model, KV cache), `lora` (adapters), `weights` (base + adapter
matrices of a pass), `losses`, `trainer` (training maths), `sampler` (batched decode loop),
`checkpoints` (tinker:// storage), `journal` (live state that survives a restart; a run's
state in `state_slots`), `host` (device tensors to the host in one copy), `futures`
(long-poll promises), `jobs` (queued work behind them), `sessions` (client sessions, training
runs), `sampler_sessions`, `training` and `sampling` (the requests), `wire` (protobuf/JSON
formats), `contract` (the gateway contract it holds: hosted Tinker or the Miles gateway), `routes`
(aiohttp app), `server` (`Engine`: builds and wires the parts), `embedded` (in-process
start/stop), `cli` (`tbconsole engine`).

Importing this package is cheap (no torch); the heavy parts load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tbconsole.engine.registry import (
    DEFAULT_MODEL,
    MODELS,
    recommended_renderer,
    register_with_cookbook,
)

if TYPE_CHECKING:
    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.server import Engine, EngineSettings

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "EmbeddedEngine",
    "Engine",
    "EngineSettings",
    "recommended_renderer",
    "register_with_cookbook",
]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedEngine":
        from tbconsole.engine.embedded import EmbeddedEngine

        return EmbeddedEngine
    if name in ("Engine", "EngineSettings"):
        from tbconsole.engine import server

        return getattr(server, name)
    raise AttributeError(name)
