"""What the pipeline view (``P``) says, as plain figures from the state: the window it covers, the
trainer's and the samplers' idle shares, the counts now, the limit's history, the updates and the
dropped groups to list. No Textual, no Rich: the screen draws these."""

from __future__ import annotations

from dataclasses import dataclass

from tbconsole.record.enums import TrainingMode
from tbconsole.state import RunState
from tbconsole.state.pipeline import DroppedGroup, LimitChange, UpdateSpan

MODE_WORDS: dict[str, str] = {
    TrainingMode.SYNC: "synchronous: a batch samples, then trains",
    TrainingMode.STREAM: "streaming minibatches: on-policy, a batch trains as its groups return",
    TrainingMode.ASYNC: "off-policy: sampling never waits for the trainer",
}
SPARKS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Flow:
    """The run's pipeline in figures at ``now``."""

    mode: str
    start: float | None  # where the view's time axis begins (the first count, else the run's start)
    end: float  # now, or where the run ended
    elapsed: float  # the run's time over all its starts
    trainer_busy: float
    sampling_busy: float
    in_flight: int
    queued: int
    trained: int
    dropped: int
    skipped: int
    limit: int | None
    configured: int | None
    limits: list[LimitChange]
    staleness: dict[int, int]
    dropped_by_reason: dict[str, int]
    dropped_sandbox_s: float

    @property
    def trainer_idle(self) -> float | None:
        return max(0.0, 1 - self.trainer_busy / self.elapsed) if self.elapsed > 0 else None

    @property
    def samplers_idle(self) -> float | None:
        return max(0.0, 1 - self.sampling_busy / self.elapsed) if self.elapsed > 0 else None


def flow(state: RunState, now: float) -> Flow:
    p = state.pipeline
    end = state.ended if state.ended is not None else now
    start = p.series[0][0] if p.series else state.started
    return Flow(
        mode=p.mode,
        start=start,
        end=max(end, start) if start is not None else end,
        elapsed=state.elapsed(end) or 0.0,
        trainer_busy=p.training_busy(end),
        sampling_busy=p.sampling_busy(end),
        in_flight=len(p.in_flight),
        queued=len(p.queued),
        trained=p.trained,
        dropped=p.dropped,
        skipped=p.skipped,
        limit=p.limit,
        configured=p.configured_limit,
        limits=list(p.limits),
        staleness=dict(sorted(p.staleness.items())),
        dropped_by_reason=dict(p.dropped_by_reason),
        dropped_sandbox_s=p.dropped_sandbox_s,
    )


def limit_words(f: Flow) -> str:
    """``max_steps_off_policy 1 (configured 2; 1 from update 5 by console)``; empty where the run
    is not off-policy."""
    if f.limit is None:
        return ""
    out = f"max_steps_off_policy {f.limit}"
    lowered = [c for c in f.limits if c.by != "config"]
    if lowered:
        last = lowered[-1]
        configured = f"configured {f.configured}; " if f.configured is not None else ""
        out += f" ({configured}{last.limit} from update {last.from_update} by {last.by})"
    return out


def staleness_words(staleness: dict[int, int]) -> str:
    """``+0 ×5  +1 ×11  +2 ×8``: trained groups by how many updates old their weights were."""
    return "  ".join(f"+{s} ×{n}" for s, n in staleness.items())


def update_words(span: UpdateSpan) -> str:
    """An update's groups by staleness: ``4 groups +0×1 +1×3``."""
    words = f"{span.groups} group{'s' if span.groups != 1 else ''}"
    if span.staleness:
        words += " " + " ".join(f"+{s}×{n}" for s, n in sorted(span.staleness.items()))
    return words


def newest_updates(state: RunState, count: int) -> list[UpdateSpan]:
    """The newest ``count`` updates that began (or trained groups), oldest first."""
    spans = [u for u in state.pipeline.updates.values() if u.started is not None or u.groups]
    return sorted(spans, key=lambda u: u.update)[-count:]


def newest_dropped(state: RunState, count: int) -> list[DroppedGroup]:
    """The newest ``count`` dropped groups, newest first."""
    return list(reversed(state.pipeline.dropped_groups))[:count]


def counts_at(
    series: list[tuple[float, int, int, int, int]], column: int, start: float, per_cell: float, width: int
) -> list[int]:
    """For each of ``width`` cells from ``start``, the most the series' ``column`` (1: in flight,
    2: queued) held in that cell's time."""
    out: list[int] = []
    value, j = 0, 0
    counts = [(ts, flying if column == 1 else queued) for ts, flying, queued, _trained, _dropped in series]
    for i in range(width):
        c0 = start + i * per_cell
        while j < len(counts) and counts[j][0] <= c0:
            value = counts[j][1]
            j += 1
        best = value
        while j < len(counts) and counts[j][0] < c0 + per_cell:
            value = counts[j][1]
            best = max(best, value)
            j += 1
        out.append(best)
    return out


def sparkline(values: list[int], top: int) -> str:
    """One glyph per value, scaled to ``top`` (a blank for 0)."""
    if top <= 0:
        return " " * len(values)
    last = len(SPARKS) - 1
    return "".join(SPARKS[0 if v <= 0 else max(1, min(last, round(v / top * last)))] for v in values)


OFF_POLICY = "offpolicy/"
MISMATCH_TREND = 8  # updates in the clipped-share trend


@dataclass
class Mismatch:
    """The newest update's sampler-vs-trainer figures by staleness (``runner.trainer_logprobs``)."""

    update: int
    stale_share: float | None
    rows: list[tuple[str, float | None, float | None]]  # (fresh | s{n} | stale, KL, clipped share)
    clipped_trend: list[float]  # the stale tokens' clipped share, the newest updates, oldest first


def mismatch(state: RunState) -> Mismatch | None:
    """None until an update trained tokens sampled with older weights."""
    share = state.metrics.get(f"{OFF_POLICY}stale_token_share")
    if not share or share[-1][1] <= 0:
        return None
    update = share[-1][0]
    latest = {k[len(OFF_POLICY) :]: v for k, v in state.metrics_latest.items() if k.startswith(OFF_POLICY)}
    names = sorted(
        {k.split("/", 1)[1] for k in latest if k.startswith("kl_sample_train/")},
        key=lambda n: (n == "stale", n != "fresh", int(n[1:]) if n[1:].isdigit() else 0),
    )
    rows = [(n, latest.get(f"kl_sample_train/{n}"), latest.get(f"clipped_share/{n}")) for n in names]
    trend = [v for _, v in state.metrics.get(f"{OFF_POLICY}clipped_share/stale", ())][-MISMATCH_TREND:]
    return Mismatch(update, share[-1][1], rows, trend)
