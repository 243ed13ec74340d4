"""`tbconsole bench console`: how the console copes with a flood of events.

Feeds the app (headless, 120×36, every panel on screen) N synthetic events as fast as a
producer thread can hand them over, and reports: events/s ingested (folded into the state and
drawn), the worst UI lag (how late a 10 ms timer on the app's loop fired), memory before and
after (RSS), and how long `tbconsole attach` takes to show its first frame on a recorded run
(a fresh process on a pseudo-terminal). Baseline: the bare reducer's rate on the same events.

Targets (issue 5): ≥ 5,000 events/s, lag ≤ 100 ms, memory flat within 50 MB, first frame ≤ 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=100_000, help="synthetic events to feed (default 100k)")
    parser.add_argument("--chunk", type=int, default=500, help="events handed over per producer step")
    parser.add_argument("--no-attach", action="store_true", help="skip the attach first-frame measurement")


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _feed(events, chunk: int) -> dict:
    from tbconsole.ui.app import ConsoleApp

    app = ConsoleApp(clock=time.time)
    lags: list[float] = []
    result: dict = {}
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        async def probe() -> None:
            while not stop.is_set():
                t = loop.time()
                await asyncio.sleep(0.01)
                lags.append(loop.time() - t - 0.01)

        probe_task = asyncio.create_task(probe())
        rss_before = rss_mb()

        def produce() -> None:
            for i in range(0, len(events), chunk):
                app.inbox.put_many(events[i : i + chunk])

        t0 = time.perf_counter()
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        while app.state.events < len(events):
            await asyncio.sleep(0.02)
        ingest_s = time.perf_counter() - t0
        app.tick()
        await pilot.pause(0.2)
        draw_s = time.perf_counter() - t0
        stop.set()
        await probe_task
        producer.join()
        result.update(
            ingest_s=ingest_s,
            draw_s=draw_s,
            rss_before=rss_before,
            rss_after=rss_mb(),
            lag_max=max(lags) if lags else 0.0,
            lag_p99=sorted(lags)[int(len(lags) * 0.99)] if lags else 0.0,
            ticks=app.ticks,
            trials=len(app.state.trials),
            steps=app.state.step,
        )
    return result


def _first_frame(log_path: Path) -> float:
    """Seconds from starting `attach` in a fresh process until its first frame is drawn."""
    env = dict(os.environ, TBCONSOLE_EXIT_AFTER_FIRST_FRAME="1", COLUMNS="120", LINES="36", TERM="xterm-256color")
    master, slave = pty.openpty()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbconsole.ui.cli", "attach", str(log_path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    try:
        while proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        proc.wait(timeout=30)
    finally:
        os.close(master)
    return time.perf_counter() - t0


def run(args) -> int:
    from tbconsole.state import reduce_all
    from tbconsole.ui.synthetic import flood, write_jsonl

    events = list(flood(args.events))
    n = len(events)
    t0 = time.perf_counter()
    reduce_all(events)
    bare = n / (time.perf_counter() - t0)

    r = asyncio.run(_feed(events, args.chunk))
    rate = n / r["ingest_s"]
    grown = r["rss_after"] - r["rss_before"]
    print(f"console benchmark: {n} synthetic events ({r['steps'] + 1} steps), app headless at 120x36")
    print(
        f"  ingested      {rate:10,.0f} events/s   ({r['ingest_s']:.2f} s; drawn by {r['draw_s']:.2f} s;"
        f" {r['ticks']} refresh ticks)"
    )
    print(f"  bare reducer  {bare:10,.0f} events/s   (baseline; the app reaches {rate / bare:.0%} of it)")
    print(
        f"  worst UI lag  {r['lag_max'] * 1000:10.1f} ms        "
        f"(p99 {r['lag_p99'] * 1000:.1f} ms; a 10 ms timer on the app loop)"
    )
    print(f"  memory        {r['rss_before']:10.1f} MB before, {r['rss_after']:.1f} MB after ({grown:+.1f} MB)")
    ok = rate >= 5000 and r["lag_max"] <= 0.1 and grown <= 50
    if not args.no_attach:
        with tempfile.TemporaryDirectory() as tmp:
            small = write_jsonl(flood(2_000), Path(tmp) / "small" / "events.jsonl").parent
            big = write_jsonl(events, Path(tmp) / "big" / "events.jsonl").parent
            _first_frame(small)  # warm the file cache
            first_small = min(_first_frame(small) for _ in range(3))
            first_big = min(_first_frame(big) for _ in range(2))
        print(
            f"  attach        {first_small:10.2f} s to first frame (2k-event run); "
            f"{first_big:.2f} s ({n // 1000}k-event run); includes interpreter start"
        )
        ok = ok and first_small <= 1.0 and first_big <= 1.0
    print(
        f"  targets       ≥5,000 events/s, lag ≤100 ms, memory +≤50 MB, first frame ≤1 s: {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tbconsole bench console", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
