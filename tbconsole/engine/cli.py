"""`tbconsole engine`: serve the local Tinker-compatible engine until interrupted.

Prints the base URL and the environment a client needs (TINKER_BASE_URL, TINKER_API_KEY), then
serves on loopback unless --host says otherwise. Ctrl-C (SIGINT) or SIGTERM stops it cleanly.

`--contract miles|miles-next` makes it behave as the Miles Tinker gateway (`contract.py`);
`--starting-seconds` and `--expire-futures` emulate a gateway still starting and one that loses
results, for testing clients.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from tbconsole.engine.contract import GatewayContract
from tbconsole.engine.registry import DEFAULT_MODEL, MODELS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tbconsole.engine.server import EngineSettings  # defaults live in one place

    d = EngineSettings()
    parser.add_argument("--host", default=d.host, help="interface to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=8900, help="port (0: pick a free one)")
    parser.add_argument("--device", default=d.device, help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--data-dir", type=Path, default=d.data_dir, help="checkpoints and runs")
    parser.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    parser.add_argument(
        "--base-weights",
        type=Path,
        default=None,
        help="safetensors state dict (HF Qwen3 names) to load as the base model",
    )
    parser.add_argument(
        "--max-context", type=int, default=None, help="refuse sequences longer than this (default: the model's)"
    )
    parser.add_argument(
        "--max-tokens-per-request",
        type=int,
        default=d.max_tokens_per_request,
        help="token budget of one forward/forward_backward request",
    )
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        default=d.micro_batch_tokens,
        help="padded tokens per training micro-batch (activation memory)",
    )
    parser.add_argument(
        "--kv-budget-tokens", type=int, default=d.kv_budget_tokens, help="KV-cache tokens the sampler may hold at once"
    )
    parser.add_argument("--max-num-samples", type=int, default=d.max_num_samples)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--api-key", default=None, help="require this X-API-Key (default: any)")
    parser.add_argument(
        "--compress-fwdbwd", action="store_true", help="ask clients to zstd-compress forward_backward bodies"
    )
    g = parser.add_argument_group("gateway contract (see tbconsole/engine/contract.py)")
    g.add_argument(
        "--contract",
        default=d.contract.value,
        choices=[c.value for c in GatewayContract],
        help="behave as hosted Tinker (tinker), the Miles gateway v1 as documented (miles: tinker==0.24.1, "
        "JSON forward_backward) or Miles with the SDK pin lifted (miles-next, an assumption about an "
        "unreleased gateway)",
    )
    g.add_argument(
        "--starting-seconds",
        type=float,
        default=d.starting_seconds,
        help="answer /api/v1/healthz 503 for this long after starting, like a gateway loading a model (any contract)",
    )
    g.add_argument(
        "--expire-futures",
        type=float,
        default=d.expire_futures,
        metavar="SHARE",
        help="share (0..1) of completed training results that answer 410 at retrieval and are lost (any contract)",
    )
    g.add_argument("--fault-seed", type=int, default=d.fault_seed, help="seed of the --expire-futures draws")
    g.add_argument(
        "--max-active-samples",
        type=int,
        default=d.max_active_samples,
        help="sampling sub-generations in flight before 429 (Miles contracts)",
    )
    g.add_argument(
        "--operation-gap-timeout",
        type=float,
        default=d.operation_gap_timeout,
        help="Miles' stall timeout for a missing seq_id; accepted for parity, bounds nothing here (operations "
        "run in arrival order)",
    )
    g.add_argument(
        "--future-replay-seconds",
        type=float,
        default=d.future_replay_seconds,
        help="how long a delivered result can be polled again",
    )
    g.add_argument(
        "--future-retention-seconds",
        type=float,
        default=d.future_retention_seconds,
        help="a completed result not retrieved for this long is reaped, 410 afterwards (Miles contracts)",
    )
    parser.add_argument("--log-level", default="INFO")


def settings_from_args(args: argparse.Namespace):
    from tbconsole.engine.server import EngineSettings

    return EngineSettings(
        host=args.host,
        port=args.port,
        device=args.device,
        data_dir=Path(args.data_dir).expanduser(),
        model=args.model,
        base_weights=args.base_weights,
        max_context=args.max_context,
        max_tokens_per_request=args.max_tokens_per_request,
        micro_batch_tokens=args.micro_batch_tokens,
        kv_budget_tokens=args.kv_budget_tokens,
        max_num_samples=args.max_num_samples,
        threads=args.threads,
        api_key=args.api_key,
        compress_fwdbwd=args.compress_fwdbwd,
        contract=GatewayContract.parse(args.contract),
        starting_seconds=args.starting_seconds,
        expire_futures=args.expire_futures,
        fault_seed=args.fault_seed,
        max_active_samples=args.max_active_samples,
        operation_gap_timeout=args.operation_gap_timeout,
        future_replay_seconds=args.future_replay_seconds,
        future_retention_seconds=args.future_retention_seconds,
    )


async def _serve(settings) -> None:
    from aiohttp import web

    from tbconsole.engine.embedded import LOCAL_API_KEY
    from tbconsole.engine.routes import make_runner
    from tbconsole.engine.server import Engine

    engine = Engine(settings)
    runner = make_runner(engine.app())
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    host, port = runner.addresses[0][:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    print(f"tbconsole engine: {engine.model_name} on {engine.device}, serving {url}", flush=True)
    if engine.contract.is_miles or settings.starting_seconds or settings.expire_futures:
        print(f"  contract {engine.contract.value}; healthz ready in {settings.starting_seconds:g} s; "
              f"expiring {settings.expire_futures:g} of completed training results", flush=True)  # fmt: skip
    print(f"  export TINKER_BASE_URL={url} TINKER_API_KEY={settings.api_key or LOCAL_API_KEY}",
          flush=True)  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await asyncio.to_thread(engine.close)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    try:
        settings = settings_from_args(args)
        asyncio.run(_serve(settings))
    except (ValueError, OSError) as e:
        print(f"tbconsole engine: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # python -m tbconsole.engine.cli
    p = argparse.ArgumentParser(prog="tbconsole engine")
    add_arguments(p)
    raise SystemExit(run(p.parse_args()))
