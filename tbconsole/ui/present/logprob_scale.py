"""Log-probability → colour, on a continuous scale, and the legend that explains it.

A token's colour follows its surprisal ``s = -logprob`` (nats) on a logarithmic axis,
``log(1 + s / FLOOR)``, so the difference between p=0.9999 and p=0.999 is as visible as the one
between p=0.5 and p=0.05: a confident reply still shows its least likely tokens. The absolute
scale runs from certain (p=1, the theme's background, no tint) to ``CEIL`` nats (p≈4.5e-5, the
theme's error colour); the turn-relative scale stretches the same axis over one turn's range.

Colours are interpolated in RGB between stops made from the theme's own colours (background →
warning → error), and each token's text takes the theme's foreground or background, whichever
reads better on its tint. The sampler↔trainer difference has its own diverging scale.

Pure: no app, no widgets; Rich ``Text``/``Style`` out, theme colours (hex strings) in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.color import Color

from tbconsole.common.stats import percentile
from tbconsole.ui.present.fit import fit
from tbconsole.ui.present.sanitize import plain

FLOOR = 1e-4  # nats: surprisals below this all look alike (p > 0.9999)
CEIL = 10.0  # nats: p ≈ 4.5e-5 and below get the scale's last colour
CONFIDENT_P = 0.9  # the old two-level view's threshold, named in the legend
LEGEND_MARKS = (0.999, 0.99, 0.9, 0.5, 0.1, 0.01, 0.001)  # probabilities ticked under the legend's bar
LEGEND_WIDTH = 42  # cells of the legend's bar


def surprisal(logprob: float) -> float:
    """-logprob, never below 0 (a sampler may report tiny positive log-probs)."""
    return max(0.0, -logprob) if math.isfinite(logprob) else CEIL * 10


def _axis(s: float) -> float:
    return math.log1p(s / FLOOR)


def position(logprob: float, lo: float = 0.0, hi: float = CEIL) -> float:
    """Where a log-prob sits on the axis between surprisals ``lo`` (0.0) and ``hi`` (1.0), clipped."""
    a, b = _axis(lo), _axis(hi)
    if b <= a:
        return 0.0
    return min(1.0, max(0.0, (_axis(surprisal(logprob)) - a) / (b - a)))


def prob_text(p: float) -> str:
    """A probability in few characters: 0.9987, 0.5, 3.1e-05."""
    if p >= 0.9995 and p < 1:
        return f"{p:.5f}".rstrip("0")
    if p >= 0.001:
        return f"{p:.4g}"
    return f"{p:.1e}"


def logprob_text(logprob: float) -> str:
    """A log-prob with its significant digits: -1.2345, -0.0312, -8.49e-04."""
    return f"{logprob:.4f}" if logprob == 0 or abs(logprob) >= 0.01 else f"{logprob:.2e}"


def escaped(piece: str) -> str:
    """A token's text as a quoted literal: newlines, tabs, quotes and control characters escaped."""
    return plain(json.dumps(piece, ensure_ascii=False))


@dataclass(frozen=True)
class Ramp:
    """Colours at positions 0..1, linearly interpolated between stops."""

    stops: tuple[tuple[float, Color], ...]

    def at(self, t: float) -> Color:
        t = min(1.0, max(0.0, t))
        for (t0, c0), (t1, c1) in zip(self.stops, self.stops[1:], strict=False):
            if t <= t1:
                return c0.blend(c1, 0.0 if t1 <= t0 else (t - t0) / (t1 - t0))
        return self.stops[-1][1]


@dataclass(frozen=True)
class TurnStats:
    """One turn's log-probs in numbers the legend and the detail line show."""

    count: int
    min_logprob: float
    max_logprob: float
    mean_logprob: float
    p10: float  # probabilities: 10% of the tokens are less likely than p10
    median: float
    p90: float
    below_confident: int  # tokens below CONFIDENT_P
    order: tuple[int, ...]  # token indices from least to most likely

    @classmethod
    def of(cls, logprobs: Sequence[float]) -> TurnStats | None:
        if not logprobs:
            return None
        order = tuple(sorted(range(len(logprobs)), key=lambda i: (logprobs[i], i)))
        ranked = [logprobs[i] for i in order]

        def pct(q: float) -> float:
            return math.exp(percentile(ranked, q, "floor"))

        threshold = math.log(CONFIDENT_P)
        return cls(
            count=len(logprobs),
            min_logprob=ranked[0],
            max_logprob=ranked[-1],
            mean_logprob=sum(logprobs) / len(logprobs),
            p10=pct(10),
            median=pct(50),
            p90=pct(90),
            below_confident=sum(1 for lp in logprobs if lp < threshold),
            order=order,
        )

    def ranks(self) -> dict[int, int]:
        """Token index → rank in its turn (1: the least likely)."""
        return {index: rank + 1 for rank, index in enumerate(self.order)}


def readable_on(cell: Color, fg: Color, bg: Color) -> Color:
    """The theme's foreground or background, whichever contrasts more with ``cell``."""
    return fg if abs(fg.brightness - cell.brightness) >= abs(bg.brightness - cell.brightness) else bg


@dataclass(frozen=True)
class LogprobScale:
    """Log-prob → Rich style, for one theme, on the absolute axis or stretched over one turn."""

    ramp: Ramp
    fg: Color
    bg: Color
    lo: float = 0.0  # surprisal drawn at the ramp's start
    hi: float = CEIL  # ... and at its end
    relative: bool = False

    @classmethod
    def for_theme(cls, *, background: str, foreground: str, warning: str, error: str) -> LogprobScale:
        bg = Color.parse(background)
        ramp = Ramp(
            (
                (0.0, bg),
                (0.5, bg.blend(Color.parse(warning), 0.6)),
                (1.0, bg.blend(Color.parse(error), 0.9)),
            )
        )
        return cls(ramp=ramp, fg=Color.parse(foreground), bg=bg)

    def stretched(self, stats: TurnStats | None) -> LogprobScale:
        """The same colours over one turn's range: its most likely token at the start, its least
        likely at the end (a turn of equal log-probs stays on the absolute scale)."""
        if stats is None:
            return self
        lo, hi = surprisal(stats.max_logprob), surprisal(stats.min_logprob)
        if _axis(hi) - _axis(lo) < 1e-9:
            return self
        return LogprobScale(ramp=self.ramp, fg=self.fg, bg=self.bg, lo=lo, hi=hi, relative=True)

    def colour(self, logprob: float) -> Color:
        return self.ramp.at(position(logprob, self.lo, self.hi))

    def style(self, logprob: float) -> Style:
        cell = self.colour(logprob)
        return Style(color=readable_on(cell, self.fg, self.bg).hex, bgcolor=cell.hex)

    def legend(self, stats: TurnStats | None, width: int = LEGEND_WIDTH, muted: str = "", room: int = 200) -> Text:
        """Three lines: the bar with its ends, the probabilities ticked under it, and this turn's
        spread (min, percentiles, mean; "all tokens above p=0.9" when so). ``room``: the columns
        the lines have (the scale's name is said shorter where the long one does not fit)."""
        out = Text(no_wrap=True, overflow="ellipsis")
        lead = "colour  "
        left, right = f"p={prob_text(math.exp(-self.lo))} ", f" p={prob_text(math.exp(-self.hi))}"
        if not self.relative:
            right += " and below"
        named = ["this turn's range (r: absolute)", "this turn's range (r)"]
        if not self.relative:
            named = ["absolute (r: this turn's range)", "absolute (r)"]
        # A narrow screen takes columns from the bar before it cuts a word.
        width = max(16, min(width, room - len(lead) - len(left) - len(right) - 3 - len(named[-1])))
        out.append(lead, style=f"bold {muted}")
        out.append(left, style=muted)
        for i in range(width):
            out.append(" ", style=Style(bgcolor=self.ramp.at(i / (width - 1)).hex))
        out.append(right, style=muted)
        out.append("   " + fit(named, room - out.cell_len - 3))
        out.append("\n")
        ticks = [" "] * (width + 8)
        start = len(lead) + len(left)
        for p in LEGEND_MARKS:
            t = position(math.log(p), self.lo, self.hi)
            if not 0.0 < t < 1.0:
                continue
            at, label = round(t * (width - 1)), "╵" + f"{p:g}".removeprefix("0")
            if at + len(label) <= len(ticks) and all(c == " " for c in ticks[max(0, at - 1) : at + len(label)]):
                ticks[at : at + len(label)] = list(label)
        out.append(" " * start + "".join(ticks).rstrip(), style=muted)
        out.append("\n")
        out.append_text(self.summary(stats, muted))
        return out

    @staticmethod
    def summary(stats: TurnStats | None, muted: str = "") -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        if stats is None:
            out.append("this turn: no tokens", style=muted)
            return out
        out.append("this turn ", style=muted)
        out.append(f"{stats.count} tokens", style="bold")
        if stats.below_confident == 0:
            out.append(f" · all tokens above p={CONFIDENT_P:g}", style="bold")
        else:
            out.append(f" · {stats.below_confident} below p={CONFIDENT_P:g}", style="bold")
        out.append(f" · least likely p={prob_text(math.exp(stats.min_logprob))}")
        out.append(
            f" · p10 {prob_text(stats.p10)} · median {prob_text(stats.median)} · p90 {prob_text(stats.p90)}"
            f" · mean logprob {stats.mean_logprob:.3g}",
            style=muted,
        )
        return out


@dataclass(frozen=True)
class DiffScale:
    """Trainer minus sampler log-prob → a diverging tint: 0 untinted, the trainer finding a token
    more likely in one colour, less likely in another; symmetric over ``span`` nats."""

    bg: Color
    fg: Color
    more: Color
    less: Color
    span: float

    @classmethod
    def for_theme(cls, *, background: str, foreground: str, more: str, less: str, diffs: Sequence[float]) -> DiffScale:
        span = max((abs(d) for d in diffs if math.isfinite(d)), default=0.0)
        return cls(
            bg=Color.parse(background),
            fg=Color.parse(foreground),
            more=Color.parse(more),
            less=Color.parse(less),
            span=max(span, 1e-4),
        )

    def colour(self, diff: float) -> Color:
        t = min(1.0, abs(diff) / self.span) if math.isfinite(diff) else 1.0
        return self.bg.blend(self.more if diff > 0 else self.less, 0.85 * t)

    def style(self, diff: float) -> Style:
        cell = self.colour(diff)
        return Style(color=readable_on(cell, self.fg, self.bg).hex, bgcolor=cell.hex)

    def legend(self, diffs: Sequence[float], width: int = LEGEND_WIDTH, muted: str = "") -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("trainer − sampler  ", style=f"bold {muted}")
        out.append(f"{-self.span:+.2g} ", style=muted)
        for i in range(width):
            out.append(" ", style=Style(bgcolor=self.colour(-self.span + 2 * self.span * i / (width - 1)).hex))
        out.append(f" {self.span:+.2g} nats", style=muted)
        out.append("   m: back to logprobs\n")
        finite = [d for d in diffs if math.isfinite(d)]
        if finite:
            mean = sum(finite) / len(finite)
            v2 = 0.5 * sum(d * d for d in finite) / len(finite)
            out.append("this turn ", style=muted)
            out.append(
                f"mean sampler − trainer {-mean:.3g} (kl v1) · half mean square {v2:.3g} (kl v2) · "
                f"largest |Δ| {max(abs(d) for d in finite):.3g}"
            )
        return out
