"""`tbconsole bench console --day`: the console on a run of the real recipe's size, beside the same
figures on a one-step run of the same shape.

The day run: 100 steps of 4 groups × 8 trials, 20–200 turns a trial, prompts growing to about
65k tokens, tool output of a real agent's length; its ``events.jsonl`` and a capture file per
trial, built once (minutes) and kept in a cache folder (``--day-folder``, default
``~/.cache/tbconsole/bench-day``) for the next time. It is a run in flight, halfway through its
last step, with the reducer snapshot its runner wrote as that step started
(``tbconsole.state.snapshot``): what a console attaching at 2 a.m. finds.

Figures, on both runs, through a real `tbconsole attach` on a pseudo-terminal (``tbconsole.bench.console``):
attach's first frame (the first that shows the run as it stood; wall and CPU time), the console's
memory (peak RSS to that frame, and RSS after the keys), key-to-frame latency (the ``--live``
key cycle, plus find across all kept steps and the timeline of the step), and, in a replay of
the same folder (`attach --replay`, the path a finished run takes: it opens at the end from the
snapshot as attach does and keeps no event in memory), its first frame, its memory, ``{ ]`` to
step 0 (a fold of the file's first step, in a worker) and opening a step-0 trial.

Targets (issue 21): first frame ≤ 1 s and memory ≤ 200 MB on the day run, on 2 idle cores.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

from tbconsole.bench.console import (
    ESCAPE,
    KEY_CYCLE,
    MAIN,
    TRANSCRIPT,
    AttachedConsole,
    FirstFrame,
    Keys,
    _first_frame,
    _percentiles,
    in_flight,
    press_keys,
)
from tbconsole.bench.transcript import tool_output
from tbconsole.common.atomic import write_json
from tbconsole.record.events import BatchStarted, Event, EventsReader, ProxyRequest
from tbconsole.record.runfolder import CAPTURE_DIR, RunFolder
from tbconsole.state import RunState, reduce
from tbconsole.state.snapshot import code_version, write_snapshot
from tbconsole.synthetic.captures import SyntheticCaptures
from tbconsole.synthetic.run import synthetic_run

BUILD = 1  # how the folder is built: a cached folder of another build is built again
FIRST_TARGET_S = 1.0
MEMORY_TARGET_MB = 200.0


@dataclass(frozen=True)
class Shape:
    steps: int
    groups: int = 4
    group_size: int = 8
    turns: tuple[int, int] = (20, 200)
    prompt_step: int = 320  # tokens each turn adds to the prompt: the 200th's is about 65k


DAY = Shape(steps=100)
ONE_STEP = dataclasses.replace(DAY, steps=1)

RESULTS = re.compile(r"results? in \d+ trials?")
TIMELINE = re.compile(r"\d+ trials · (trained|going on|not trained)")
DAY_CYCLE: Keys = [
    *KEY_CYCLE,
    ("f find", b"f", "type a word", None),
    ("ctrl+t all kept steps", b"\x14", "all kept steps", None),
    ("find: type, enter", b"COMPLETE\r", RESULTS, None),
    ("esc from find", ESCAPE, MAIN, "all kept steps"),
    ("w timeline", b"w", TIMELINE, None),
    ("esc from timeline", ESCAPE, MAIN, TIMELINE),
]
# A replay (`attach --replay`): to the first step (the file folded from its start to step 0's end),
# then a step-0 trial's transcript, again and again.
REPLAY_FIRST: Keys = [("{ ] to step 0", b"{]", re.compile(r"trials · step 0\b"), None)]
REPLAY_CYCLE: Keys = [
    ("enter a step-0 trial", b"\r", re.compile(r"step 0 · group \d+ · trial \d+"), None),
    ("esc from transcript", ESCAPE, MAIN, TRANSCRIPT),
]


def cache_root(folder: Path | None) -> Path:
    if folder is not None:
        return folder
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tbconsole" / "bench-day"


def run_folder(root: Path, shape: Shape) -> Path:
    """The run folder of ``shape`` under ``root``: built once, then reused (its snapshot written
    again when the reducer's code has changed, as the runner of this code would have)."""
    folder = root / f"steps-{shape.steps}"
    marker = root / f"steps-{shape.steps}.json"
    wanted = {"build": BUILD, **dataclasses.asdict(shape)}
    try:
        built = json.loads(marker.read_text())
    except (OSError, ValueError):
        built = {}
    if {k: built.get(k) for k in wanted} != json.loads(json.dumps(wanted)):
        shutil.rmtree(folder, ignore_errors=True)
        print(f"building the {shape.steps}-step run in {folder} (once; the next runs reuse it)…", flush=True)
        built = {**wanted, "snapshot_at": build(folder, shape)}
    if built.get("code") != code_version():
        snapshot_at(folder, built["snapshot_at"])
        built["code"] = code_version()
    write_json(marker, built)
    return folder


def build(folder: Path, shape: Shape) -> int:
    """Record the run as a real one is recorded (events.jsonl; a capture file per trial, each line
    written before its proxy.request), halfway through its last step. Returns where that step
    begins in events.jsonl (just after its batch.started line). Memory: one step's events."""
    captures = SyntheticCaptures(folder)
    events = synthetic_run(
        steps=shape.steps,
        groups=shape.groups,
        group_size=shape.group_size,
        turns=shape.turns,
        prompt_step=shape.prompt_step,
        tool_output=tool_output,
        end=False,
        log_path=str(folder),
        captures=captures,
    )
    path = RunFolder(folder).events
    path.parent.mkdir(parents=True, exist_ok=True)
    offset = last_start = 0
    with open(path, "wb") as out:

        def write(batch: list[Event]) -> None:
            nonlocal offset, last_start
            for event in batch:
                if isinstance(event, ProxyRequest):
                    captures.write(event)
                line = (event.to_json() + "\n").encode()
                out.write(line)
                offset += len(line)
                if isinstance(event, BatchStarted):
                    last_start = offset

        step: list[Event] = []
        for event in events:
            if isinstance(event, BatchStarted):
                write(step)
                step = []
                # The earlier steps' trials have ended: their prompts (kept to write each next
                # turn's line) are no longer needed.
                captures.prompts.clear()
            step.append(event)
        write(in_flight(step))
    snapshot_at(folder, last_start)
    return last_start


def snapshot_at(folder: Path, offset: int) -> None:
    """The snapshot a runner writes as a step starts: the state of the events before ``offset``."""
    state = RunState()
    with EventsReader(RunFolder(folder).events) as reader:
        while reader.offset < offset:
            for event in reader.read(end=offset):
                reduce(state, event)
            if not reader.more:
                break
        write_snapshot(state, reader)


@dataclass
class Figures:
    first: list[FirstFrame]  # of each attach
    keys: dict[str, list[float | None]]
    rss_after_mb: float | None
    replay_first: FirstFrame
    replay_keys: dict[str, list[float | None]]
    replay_rss_mb: float | None


def measure(folder: Path, cycles: int) -> Figures:
    first = [_first_frame(folder) for _ in range(3)]
    rss: list[float | None] = []

    def note_rss(console: AttachedConsole) -> None:
        rss.append(console.rss_mb())

    keys = press_keys(folder, cycles, DAY_CYCLE, after=note_rss)
    replay_first = _first_frame(folder, ("--replay",))
    replay_keys = press_keys(
        folder, max(3, cycles // 2), REPLAY_CYCLE, args=("--replay",), first=REPLAY_FIRST, after=note_rss
    )
    return Figures(first, keys, rss[0], replay_first, replay_keys, rss[1])


def _size(folder: Path) -> tuple[int, int, float, float]:
    """(events, events after the snapshot, events MB, captures MB)."""
    events = RunFolder(folder).events
    with open(events, "rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    head = RunFolder(folder).snapshot.read_bytes().partition(b"\n")[0]
    with open(events, "rb") as handle:
        handle.seek(json.loads(head)["offset"])
        tail = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    captures = sum(p.stat().st_size for p in (folder / CAPTURE_DIR).rglob("*.jsonl"))
    return lines, tail, events.stat().st_size / 1e6, captures / 1e6


def _p50(samples: list[float | None]) -> float | None:
    got = [s for s in samples if s is not None]
    return statistics.median(got) if got else None


def _row(name: str, day: float | None, one: float | None, unit: str) -> str:
    def cell(v: float | None) -> str:
        if v is None:
            return f"{'–':>12}"
        return f"{v * 1000:9.1f} ms" if unit == "ms" else f"{v:9.2f} s " if unit == "s" else f"{v:9.1f} MB"

    ratio = f"{day / one:6.2f} ×" if day is not None and one else "      –"
    return f"  {name:34}{cell(day)}  {cell(one)}   {ratio}"


def run_day_bench(folder: Path | None, cycles: int) -> bool:
    root = cache_root(folder)
    day, one = run_folder(root, DAY), run_folder(root, ONE_STEP)
    sizes = {name: _size(f) for name, f in (("day", day), ("one", one))}
    load = os.getloadavg()[0]
    d, o = measure(day, cycles), measure(one, cycles)
    load_after = os.getloadavg()[0]
    n, tail, events_mb, captures_mb = sizes["day"]
    print(
        f"console on a day-long run: {DAY.steps} steps × {DAY.groups} groups × {DAY.group_size} trials, "
        f"{DAY.turns[0]}–{DAY.turns[1]} turns a trial, prompts up to ~65k tokens"
    )
    print(
        f"  {n:,} events ({events_mb:.1f} MB), captures {captures_mb / 1000:.2f} GB; in flight, the runner's "
        f"snapshot at the last step's start ({tail:,} events after it)"
    )
    print(
        f"  beside a one-step run of the same shape: {sizes['one'][0]:,} events ({sizes['one'][2]:.1f} MB); "
        f"`tbconsole attach` on a pseudo-terminal at 120x36; load {load:.1f} → {load_after:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print(f"  {'':34}{'day run':>12}  {'one step':>12}   ratio")
    best_d, best_o = min(d.first), min(o.first)
    print(_row("attach: first frame (best of 3)", best_d.seconds, best_o.seconds, "s"))
    print(_row("  its CPU time", best_d.cpu_s, best_o.cpu_s, "s"))
    peak_d, peak_o = max(f.peak_mb for f in d.first), max(f.peak_mb for f in o.first)
    print(_row("memory at first frame (peak RSS)", peak_d, peak_o, "MB"))
    print(_row("memory after the keys (RSS)", d.rss_after_mb, o.rss_after_mb, "MB"))
    every = {name: [s for v in f.keys.values() for s in v if s is not None] for name, f in (("d", d), ("o", o))}
    for label, at in (("keys: p50", 0), ("keys: p95", 1), ("keys: max", 2)):
        pd = _percentiles(every["d"])[at] if every["d"] else None
        po = _percentiles(every["o"])[at] if every["o"] else None
        print(_row(label, pd, po, "ms"))
    missed = sum(s is None for v in d.keys.values() for s in v)
    for label, *_ in DAY_CYCLE:
        print(_row(f"  {label} (p50)", _p50(d.keys[label]), _p50(o.keys[label]), "ms"))
    print("  replay of the same folder (`attach --replay`: a finished run's path, from the snapshot)")
    print(_row("  first frame", d.replay_first.seconds, o.replay_first.seconds, "s"))
    print(_row("  memory at first frame (peak RSS)", d.replay_first.peak_mb, o.replay_first.peak_mb, "MB"))
    print(_row("  memory after the keys (RSS)", d.replay_rss_mb, o.replay_rss_mb, "MB"))
    for label, *_ in [*REPLAY_FIRST, *REPLAY_CYCLE]:
        print(_row(f"  {label} (p50)", _p50(d.replay_keys[label]), _p50(o.replay_keys[label]), "ms"))
    memory = max(peak_d, d.rss_after_mb or 0.0)
    ok = best_d.seconds <= FIRST_TARGET_S and memory <= MEMORY_TARGET_MB and not missed
    print(
        f"  targets       attach's first frame ≤{FIRST_TARGET_S:.0f} s, console memory ≤{MEMORY_TARGET_MB:.0f} MB "
        f"on the day run, every key shown within 5 s{f' ({missed} not)' if missed else ''}: "
        f"{'met' if ok else 'NOT met'}"
    )
    return ok
