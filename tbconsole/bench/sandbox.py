"""`tbconsole bench sandbox`: what the local sandbox costs per trial and per command.

Baseline: the same command as a plain subprocess on the host (no namespaces, no overlay).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time

from tbconsole.common.formatting import format_latencies
from tbconsole.common.stats import percentile
from tbconsole.sandbox.namespace import NamespaceSandbox, SandboxSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--execs", type=int, default=200, help="commands to time (default 200)")
    parser.add_argument("--starts", type=int, default=20, help="sandbox start/stop cycles (default 20)")


async def _bare(command: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await proc.communicate()


async def _measure(args) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"start": [], "stop": [], "exec": [], "bare": [], "tail": [], "bare_tail": []}
    for _ in range(args.starts):
        box = NamespaceSandbox(SandboxSpec(name="bench"))
        t0 = time.perf_counter()
        await box.start()
        t1 = time.perf_counter()
        await box.stop()
        times["start"].append(t1 - t0)
        times["stop"].append(time.perf_counter() - t1)
    box = NamespaceSandbox(SandboxSpec(name="bench"))
    await box.start()
    try:
        big = "head -c 10485760 /dev/zero"
        for _ in range(args.execs):
            t0 = time.perf_counter()
            await box.exec("true")
            times["exec"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await _bare("true")
            times["bare"].append(time.perf_counter() - t0)
        for _ in range(max(3, args.execs // 20)):
            t0 = time.perf_counter()
            await box.exec(big)
            times["tail"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await _bare(big)
            times["bare_tail"].append(time.perf_counter() - t0)
    finally:
        await box.stop()
    return times


def run(args) -> int:
    times = asyncio.run(_measure(args))
    print(
        f"machine: {platform.machine()}, {platform.system()} {platform.release()}, python {platform.python_version()}"
    )
    print(f"sandbox start     {format_latencies(times['start'])}   ({args.starts} cycles)")
    print(f"sandbox stop      {format_latencies(times['stop'])}")
    print(f"exec 'true'       {format_latencies(times['exec'])}   ({args.execs} runs)")
    print(f"  baseline bash   {format_latencies(times['bare'])}")
    ratio = percentile(times["exec"], 50) / percentile(times["bare"], 50)
    print(f"  ratio p50       {ratio:.2f}x the bare subprocess")
    print(f"exec 10 MB out    {format_latencies(times['tail'])}")
    print(f"  baseline bash   {format_latencies(times['bare_tail'])}")
    ratio = percentile(times["tail"], 50) / percentile(times["bare_tail"], 50)
    print(f"  ratio p50       {ratio:.2f}x the bare subprocess")
    return 0
