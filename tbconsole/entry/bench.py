"""`tbconsole bench NAME`: the benchmarks, each printing its figures beside a same-run baseline."""

from __future__ import annotations

import importlib

from tbconsole.entry.usage import Parser

BENCHMARKS = {
    "sandbox": ("tbconsole.bench.sandbox", "local sandbox: start/stop and per-command cost vs a bare subprocess"),
    "console": (
        "tbconsole.bench.console",
        "console: events/s ingested, UI lag, memory, attach's first frame; a 200-turn transcript's first screen; "
        "--day: all of it on a day-long run",
    ),
    "proxy": (
        "tbconsole.bench.proxy",
        "capture proxy: overhead per call vs a bare aiohttp handler; incremental vs full render",
    ),
    "train": (
        "tbconsole.bench.train",
        "a 200-turn trial's training cost, token continuity on vs off: datums, trained tokens, train step",
    ),
    "engine": (
        "tbconsole.bench.engine",
        "local engine: prefill, sampling (1 and 8 concurrent), train step, vs the bare model",
    ),
    "startup": (
        "tbconsole.bench.startup",
        "command-line start: --help, a usage error and a dead gateway (tbconsole train) vs python -c pass",
    ),
    "pipeline": (
        "tbconsole.bench.pipeline",
        "training modes on heavy-tailed trials (sync, stream, async K=1/2): updates/h, trainer and sampler idle",
    ),
    "soak": (
        "tbconsole.bench.soak",
        "a 200-step real run of tiny trials: memory, fds, threads and loop lag stay flat; every step's files closed",
    ),
}


def register(sub, full: bool) -> None:
    """``full``: import the benchmark modules for their own options (only when `bench` runs)."""
    p = sub.add_parser(
        "bench",
        help="run a benchmark (figures with a same-run baseline)",
        description="Benchmarks. Each prints its figures beside a baseline measured in the same run, with the ratio.",
    )
    names = p.add_subparsers(dest="benchmark", metavar="NAME", parser_class=Parser, required=True)
    for name, (module, summary) in BENCHMARKS.items():
        bp = names.add_parser(name, help=summary, description=summary)
        bp.set_defaults(handler=run, bench_module=module)
        if full:
            importlib.import_module(module).add_arguments(bp)


def run(args) -> int:
    return importlib.import_module(args.bench_module).run(args)
