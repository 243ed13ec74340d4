"""`tbconsole bench console`: how the console copes with a flood of events, and how fast it answers keys.
(Over 400 lines: both measurements of the one command, each with the terminal or process harness it needs.)

Feeds the app (headless, 120×36, every panel on screen) N synthetic events as fast as a
producer thread can hand them over, and reports: events/s ingested (folded into the state and
drawn), the worst UI lag (how late a 10 ms timer on the app's loop fired), memory before and
after (RSS), and how long `tbconsole attach` takes to show its first frame on a recorded run
(a fresh process on a pseudo-terminal; the first frame that shows the run as it stood, not an
empty console). Baseline: the bare reducer's rate on the same events.

``--live``: key latency instead. A real demo run trains in a detached runner while ``tbconsole
attach`` runs on a pseudo-terminal; keys open a screen and go back to the main one (``KEY_CYCLE``),
and each press is timed until the first whole frame that shows the change has arrived (the
console is told the terminal has synchronized output, so every frame ends with a marker).
Escape is sent as terminals with the kitty keyboard protocol send it: a lone ESC byte also
waits Textual's ESCDELAY (100 ms) to tell it from the start of a sequence. Baseline: the same
keys on a synthetic run's folder (a batch in flight, no runner), in the same invocation.

Then the transcript at scale (``tbconsole.bench.transcript``): a 200-turn trial's first
screen and pages, beside a 5-turn trial's and beside drawing everything up front;
``--transcript`` measures only that.

``--day``: the console on a run of the recipe's real size instead (``tbconsole.bench.day``).

Targets (issue 5): ≥ 5,000 events/s, lag ≤ 100 ms, memory flat within 50 MB, first frame ≤ 1 s;
with ``--live``: any key within 100 ms p95 while the demo trains; the transcript (issue 15): its
first screen within 300 ms, a page within 50 ms p95.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from rich.cells import cell_len, get_character_cell_size

from tbconsole.bench import attach_on_pty
from tbconsole.common.procgroup import kill_group, kill_process
from tbconsole.common.stats import percentile
from tbconsole.record.runfolder import RunFolder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=100_000, help="synthetic events to feed (default 100k)")
    parser.add_argument("--chunk", type=int, default=500, help="events handed over per producer step")
    parser.add_argument("--no-attach", action="store_true", help="skip the attach first-frame measurement")
    parser.add_argument(
        "--live", action="store_true", help="measure key-to-frame latency while a real demo run trains instead"
    )
    parser.add_argument("--cycles", type=int, default=10, help="--live, --day: times the key cycle is pressed per run")
    parser.add_argument("--steps", type=int, default=3, help="--live: config.max_steps of the demo run")
    parser.add_argument(
        "--transcript", action="store_true", help="measure only the transcript at scale (200 turns, ~65k-token prompts)"
    )
    parser.add_argument("--no-transcript", action="store_true", help="skip the transcript measurement")
    parser.add_argument(
        "--day",
        action="store_true",
        help="the console on a day-long run of the recipe's size (100 steps; built once, cached) beside a one-step run",
    )
    parser.add_argument(
        "--day-folder",
        type=Path,
        default=None,
        help="--day: where the runs are built and kept (default: ~/.cache/tbconsole/bench-day)",
    )


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
            lag_p99=percentile(lags, 99, "floor") if lags else 0.0,
            ticks=app.ticks,
            trials=len(app.state.trials),
            steps=app.state.step,
        )
    return result


class FirstFrame(NamedTuple):
    seconds: float  # wall time, interpreter start included
    cpu_s: float  # the process's CPU time (user + system): what an idle machine's wall time would be, about
    peak_mb: float  # its peak RSS


def _first_frame(log_path: Path, args: tuple[str, ...] = ()) -> FirstFrame:
    """Start `attach` in a fresh process: until its first frame that shows the run as it stood
    (the console exits then)."""
    env = dict(os.environ, TBCONSOLE_EXIT_AFTER_FIRST_FRAME="1", COLUMNS="120", LINES="36", TERM="xterm-256color")
    master, slave = pty.openpty()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbconsole.entry.attach", "attach", *args, str(log_path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    deadline = t0 + 120
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                with contextlib.suppress(OSError):  # the console has closed the terminal: exiting
                    os.read(master, 65536)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # reaped here, for its resource usage
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() > deadline:
                kill_group(proc.pid)  # the console leads its own session: it and anything it started
    finally:
        os.close(master)
    return FirstFrame(time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def run(args) -> int:
    from tbconsole.bench.transcript import run_transcript_bench

    if args.live:
        return run_live(args.cycles, args.steps)
    if args.day:
        from tbconsole.bench.day import run_day_bench

        return 0 if run_day_bench(args.day_folder, args.cycles) else 1
    if args.transcript:
        return 0 if run_transcript_bench() else 1
    from tbconsole.state import reduce_all
    from tbconsole.synthetic.run import flood, write_jsonl

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
            first_small = min(_first_frame(small) for _ in range(3)).seconds
            first_big = min(_first_frame(big) for _ in range(2)).seconds
        print(
            f"  attach        {first_small:10.2f} s to the first frame showing the run (2k-event run); "
            f"{first_big:.2f} s ({n // 1000}k-event run, best of 2; no runner wrote it a snapshot); includes "
            "interpreter start"
        )
        ok = ok and first_small <= 1.0 and first_big <= 1.0
    print(
        f"  targets       ≥5,000 events/s, lag ≤100 ms, memory +≤50 MB, first frame ≤1 s: {'met' if ok else 'NOT met'}"
    )
    if not args.no_transcript:
        ok = run_transcript_bench() and ok
    return 0 if ok else 1


# -- --live: key-to-frame latency of `tbconsole attach` on a pseudo-terminal ------------------------

SIZE = (120, 36)
SYNC_QUERY = b"\x1b[?2026$p"  # Textual asks whether the terminal has synchronized output;
SYNC_REPLY = b"\x1b[?2026;2$y"  # the answer yes makes it close every frame with SYNC_END
SYNC_END = b"\x1b[?2026l"
ESCAPE = b"\x1b[27u"  # Escape as the kitty keyboard protocol sends it (a lone ESC waits ESCDELAY)
ESCAPES = re.compile(r"\x1b(?:\[([0-?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78NOMc])")
MAIN = "PPO metrics"
HELP = "pause after the current batch / resume"  # the first key `?` lists: on view however long the list
TRANSCRIPT = re.compile(r"step \d+ · group \d+ · trial \d+")
FILTER = "filter trials: task"
LOG = re.compile(r"█▀* log ▀")  # the log's thick border, with its title
# (what the key does, the key, what the frame must show, what it must no longer show)
KEY_CYCLE: list[tuple[str, bytes, str | re.Pattern, str | re.Pattern | None]] = [
    ("? help", b"?", HELP, None),
    ("esc from help", ESCAPE, MAIN, HELP),
    ("enter transcript", b"\r", TRANSCRIPT, None),
    ("esc from transcript", ESCAPE, MAIN, TRANSCRIPT),
    ("/ filter", b"/", FILTER, None),
    ("esc from filter", ESCAPE, MAIN, FILTER),
    ("l log", b"l", LOG, None),
    ("esc from log", ESCAPE, MAIN, LOG),
]
KEY_TIMEOUT_S = 5.0


class Terminal:
    """Just enough of a terminal to read Textual's frames: cursor moves and characters (styles
    are ignored). It is fed whole frames only (see ``AttachedConsole.read``)."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.lines = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0

    def feed(self, data: str) -> None:
        at = 0
        for match in ESCAPES.finditer(data):
            self._put(data[at : match.start()])
            at = match.end()
            params, final = match.group(1), match.group(2)
            if final in ("H", "f"):
                row, _, col = (params or "").partition(";")
                self.y = min(self.rows - 1, max(0, int(row or 1) - 1))
                self.x = min(self.cols - 1, max(0, int(col or 1) - 1))
        self._put(data[at:])

    def _put(self, text: str) -> None:
        line = self.lines[self.y]
        if text.isprintable() and cell_len(text) == len(text):  # the usual run: one cell a character
            end = min(self.cols, self.x + len(text))
            line[self.x : end] = text[: end - self.x]
            self.x = end
            return
        for ch in text:
            if ch == "\r":
                self.x = 0
            elif ch == "\n":
                self.y = min(self.rows - 1, self.y + 1)
                line = self.lines[self.y]
            elif ch >= " " and self.x < self.cols:
                width = get_character_cell_size(ch)
                if width:
                    line[self.x] = ch
                    if width == 2 and self.x + 1 < self.cols:
                        line[self.x + 1] = ""
                    self.x += width

    def shows(self, wanted: str | re.Pattern) -> bool:
        screen = "\n".join("".join(line) for line in self.lines)
        return bool(wanted.search(screen)) if isinstance(wanted, re.Pattern) else wanted in screen


class AttachedConsole:
    """`tbconsole attach [ARGS] LOG_PATH` in a fresh process on a pseudo-terminal of ``SIZE``."""

    def __init__(self, log_path: Path, args: tuple[str, ...] = ()) -> None:
        cols, rows = SIZE
        self.screen = Terminal(cols, rows)
        self.unread = b""  # what arrived since the last frame ended
        self.master, self.proc = attach_on_pty(log_path, cols, rows, args)

    def read(self, timeout: float) -> float | None:
        """Take what the console wrote within ``timeout``: when it arrived, if a frame ended in it.
        Frames are drawn on the screen only once whole, so that reading a frame never holds up
        the console writing it."""
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return None
        arrived = time.perf_counter()
        try:
            self.unread += os.read(self.master, 1 << 20)
        except OSError:  # the console has exited
            time.sleep(timeout)
            return None
        if SYNC_QUERY in self.unread:
            os.write(self.master, SYNC_REPLY)
            self.unread = self.unread.replace(SYNC_QUERY, b"")
        end = self.unread.rfind(SYNC_END)
        if end < 0:
            return None
        end += len(SYNC_END)
        self.screen.feed(self.unread[:end].decode(errors="replace"))
        self.unread = self.unread[end:]
        return arrived

    def wait_for(self, shown: str | re.Pattern, gone: str | re.Pattern | None, timeout: float) -> float | None:
        """When the first whole frame arrived that shows ``shown`` and no longer ``gone``."""
        deadline = time.perf_counter() + timeout
        while (left := deadline - time.perf_counter()) > 0:
            arrived = self.read(left)
            if arrived is not None and self.screen.shows(shown) and not (gone and self.screen.shows(gone)):
                return arrived
        return None

    def settle(self, seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while (left := deadline - time.perf_counter()) > 0:
            self.read(left)

    def press(self, key: bytes, shown: str | re.Pattern, gone: str | re.Pattern | None) -> float | None:
        """Seconds from writing ``key`` to the frame that shows its effect (None: not within 5 s)."""
        self.settle(0.0)
        sent = time.perf_counter()
        os.write(self.master, key)
        done = self.wait_for(shown, gone, KEY_TIMEOUT_S)
        return None if done is None else done - sent

    def rss_mb(self) -> float | None:
        """The console's resident memory now."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as handle:
                return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, b"q")
        deadline = time.perf_counter() + 10
        while self.proc.poll() is None and time.perf_counter() < deadline:
            self.read(0.1)
        if self.proc.poll() is None:
            kill_group(self.proc.pid)  # the console leads its own session: it and anything it started
            self.proc.wait()
        os.close(self.master)


Keys = Sequence[tuple[str, bytes, str | re.Pattern, str | re.Pattern | None]]  # label, key, shown, gone


def press_keys(
    log_path: Path,
    cycles: int,
    cycle: Keys = KEY_CYCLE,
    *,
    args: tuple[str, ...] = (),
    first: Keys = (),
    after: Callable[[AttachedConsole], None] | None = None,
) -> dict[str, list[float | None]]:
    """Each key of ``cycle`` pressed ``cycles`` times on the attached console (``first``: keys
    pressed once before); their latencies. ``after`` sees the console before it is closed."""
    times: dict[str, list[float | None]] = {label: [] for label, *_ in [*first, *cycle]}
    console = AttachedConsole(log_path, args)
    try:
        if console.wait_for(re.compile(r"trials · step \d+"), None, 120) is None:
            raise RuntimeError(f"the console over {log_path} never showed a batch")
        console.settle(1.0)
        for keys in [first] + [cycle] * cycles:
            for label, key, shown, gone in keys:
                times[label].append(console.press(key, shown, gone))
                console.settle(0.25)
        if after is not None:
            after(console)
    finally:
        console.close()
    return times


def start_demo(log_path: Path, steps: int, *options: str) -> int:
    """`tbconsole demo --detach` into ``log_path`` (``options``: more of the recipe's, e.g.
    ``config.eval_every=0``); the runner's pid once a batch is in flight."""
    from tbconsole.record.events import BatchStarted, read_events
    from tbconsole.record.lease import read_lease

    command = [sys.executable, "-m", "tbconsole", "demo", "--detach", f"config.log_path={log_path}"]
    started = subprocess.run(
        [*command, f"config.max_steps={steps}", *options], capture_output=True, text=True, timeout=600
    )
    pid = read_lease(log_path).pid
    if started.returncode != 0 or pid is None:
        if pid is not None:
            stop_runner(pid)
        raise RuntimeError(f"the demo did not start: {started.stdout}{started.stderr}")
    events = RunFolder(log_path).events
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and _alive(pid):
        if events.exists() and any(isinstance(e, BatchStarted) for e in read_events(events)):
            return pid
        time.sleep(1.0)
    stop_runner(pid)
    raise RuntimeError(f"the demo in {log_path} trained no batch (its log: {RunFolder(log_path).runner_log})")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_runner(pid: int) -> None:
    """SIGTERM (stop after the batch); again after 15 s (abort); SIGKILL to its process group at 75 s."""
    for signum, wait_s in ((signal.SIGTERM, 15), (signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        if signum == signal.SIGKILL:
            kill_group(pid)  # a detached runner leads its own session
        else:
            kill_process(pid, signum)  # the runner alone: it stops its own children
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.2)


def _percentiles(samples: list[float]) -> tuple[float, float, float]:
    """p50, p95 and the worst (floor ranks: the p50 is the upper middle sample)."""
    return percentile(samples, 50, "floor"), percentile(samples, 95, "floor"), max(samples)


def _ms(samples: list[float | None]) -> str:
    got = [s for s in samples if s is not None]
    if not got:
        return "      –          –          –"
    return "  ".join(f"{v * 1000:6.1f} ms" for v in _percentiles(got))


def in_flight(events) -> list:
    """A run's events cut halfway through its last batch: trials running, as in a live run."""
    from tbconsole.record.events import BatchStarted

    events = list(events)
    last = max(i for i, e in enumerate(events) if isinstance(e, BatchStarted))
    return events[: (last + len(events)) // 2]


def run_live(cycles: int, steps: int) -> int:
    from tbconsole.synthetic.run import synthetic_run, write_jsonl

    runs: dict[str, dict[str, list[float | None]]] = {}
    loads: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tbconsole-keys-") as tmp:
        synthetic = Path(tmp) / "synthetic"
        events = synthetic_run(steps=2, end=False, hostile=False, log_path=str(synthetic))
        write_jsonl(in_flight(events), RunFolder(synthetic).events)
        load = os.getloadavg()[0]
        runs["synthetic run"] = press_keys(synthetic, cycles)
        loads["synthetic run"] = (load, os.getloadavg()[0])
        demo = Path(tmp) / "demo"
        pid = start_demo(demo, steps)
        try:
            load = os.getloadavg()[0]
            runs["live demo"] = press_keys(demo, cycles)
            loads["live demo"] = (load, os.getloadavg()[0])
        finally:
            stop_runner(pid)
    presses = len(KEY_CYCLE) * cycles
    print("console key latency: key to the first whole frame that shows its effect, `tbconsole attach` on a")
    print(f"pseudo-terminal at {SIZE[0]}x{SIZE[1]}; {len(KEY_CYCLE)} keys x {cycles} cycles = {presses} presses a run")
    print(f"  {'':22}{'p50':>9}  {'p95':>9}  {'max':>9}   missed  load (1 min)")
    every = {name: [s for samples in times.values() for s in samples] for name, times in runs.items()}
    for name, samples in every.items():
        missed = sum(s is None for s in samples)
        print(f"  {name:22}{_ms(samples)}   {missed:6d}  {loads[name][0]:.1f} → {loads[name][1]:.1f}")
    base, live = (_percentiles([s for s in every[n] if s is not None] or [math.nan]) for n in runs)
    print(f"  {'ratio (live/synthetic)':22}" + "  ".join(f"{lv / b:7.2f} x" for b, lv in zip(base, live, strict=True)))
    print("  per key (p50  p95  max)       synthetic run                     live demo")
    for label, *_ in KEY_CYCLE:
        print(f"    {label:22}{_ms(runs['synthetic run'][label])}   {_ms(runs['live demo'][label])}")
    ok = live[1] <= 0.1 and not any(s is None for s in every["live demo"])
    print(f"  target        any key within 100 ms p95 while the demo trains: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tbconsole bench console", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
