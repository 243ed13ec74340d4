"""The token view's words: its header (the trial, the turn, the loss mask and why) and the three
detail lines on the token under the cursor (its id, text, log-prob and rank; whether it was
trained on, with which advantage; the trainer's log-prob beside the sampler's).

Each line is laid out to the width here (Textual wraps no ``Text`` of a fixed box well): the
numbers first, what says least left out first, so that no line wraps and pushes the next one out
of sight. Pure: a capture record, the trial's state and its ``Training`` in, ``Text`` out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from rich.text import Text

from tbconsole.common.formatting import format_seconds, format_value
from tbconsole.record.capturefile import CaptureRecord
from tbconsole.state import TrialState
from tbconsole.ui.present.fit import GLUE, fit, glue_numbers, hang_text
from tbconsole.ui.present.logprob_scale import escaped, logprob_text, prob_text
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.trained import Training
from tbconsole.ui.present.transcript_doc import weights_words


class Tones(Protocol):
    """The theme's colours these lines use (a ``widgets.base.Palette``)."""

    @property
    def primary(self) -> str: ...

    @property
    def accent(self) -> str: ...

    @property
    def success(self) -> str: ...

    @property
    def warning(self) -> str: ...

    @property
    def muted(self) -> str: ...


def head_text(
    p: Tones,
    width: int,
    *,
    trial: str,
    t: TrialState | None,
    evaluation: bool,
    after: int | None,
    record: CaptureRecord | None,
    position: int,
    turns: int,
    loaded: bool,
    ids_only: bool,
    training: Training,
) -> Text:
    """The header: the trial (``t``: its state; where the run's events do not have it, a held-out
    ``evaluation`` trial, ``after`` that many updates), the turn (``position`` of ``turns``; ``ids_only``: no
    tokenizer was found), then the loss mask, the advantage and why, hung under them."""
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append("tokens ", style=p.muted)
    head.append(one_line(trial, 100), style=f"bold {p.primary}")
    if t is not None:
        head.append(f"  step {t.step} · group {t.group} · trial {t.index + 1}", style=p.muted)
        if t.reward is not None:
            head.append(f"  reward {format_value(t.reward)}", style="bold")
    elif evaluation:
        head.append(f"  held-out evaluation · after {after} updates", style=p.muted)
    head.append("\n")
    if record is None:
        waiting = "loading the capture file…" if not loaded else "no captured turn for this trial (yet)"
        head.append(waiting, style=p.muted)
    else:
        head.append(f"turn {position + 1} of {turns}", style="bold")
        head.append(f" (capture turn {record.turn})  {len(record.output)} tokens", style=p.muted)
        if record.stop_reason:
            head.append(f"  stop: {one_line(record.stop_reason, 20)}", style=p.muted)
        if record.sample_ms is not None:
            head.append(f"  sampled in {format_seconds(record.sample_ms / 1000)}", style=p.muted)
        weights = t.turn_weights(record.turn) if t is not None else None
        if weights is not None and t is not None:
            words, role = weights_words(weights, t.update)
            head.append("  " + words, style=p.warning if role == "warning" else p.muted)
        if ids_only:
            head.append("  (no tokenizer found: token ids)", style=p.warning)
    head.append("\n")
    colour = {True: p.success, False: p.warning, None: p.muted}[training.mask]
    # The numbers first, then why, wrapped under them: nothing is left alone at a line's start.
    mask = Text("loss mask ", style=p.muted)
    mask.append({True: "1", False: "0", None: "?"}[training.mask], style=f"bold {colour}")
    if training.advantage is not None and training.mask:
        mask.append(f"  advantage{GLUE}{training.advantage:+.4g}", style="bold")
    mask.append(f"  {glue_numbers(one_line(training.why, 160))}", style=colour)
    head.append_text(hang_text(mask, width, indent=2, first=0))
    return head


def detail_text(
    p: Tones,
    width: int,
    *,
    record: CaptureRecord | None,
    pieces: Sequence[str],
    cursor: int,
    logprobs: Sequence[float],
    rank: int | None,
    training: Training,
    trainer: Sequence[float] | None,
) -> Text:
    """The three lines on token ``cursor`` of ``record``'s reply (``pieces``: the tokens' texts;
    ``rank``: 1 for the least likely; ``trainer``: the trainer's log-probs, where recorded)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if record is None or not pieces:
        out.append("no tokens in this turn" if record is not None else "", style=p.muted)
        return out
    i = cursor
    lp = logprobs[i]
    line = Text(f"token {i + 1}/{len(pieces)}", style="bold")
    line.append(f"  id {record.output[i]}  ")
    line.append(escaped(pieces[i]), style=f"bold {p.accent}")
    line.append(f"  logprob {logprob_text(lp)}  p {prob_text(math.exp(lp))}", style="bold")
    if rank is not None:
        ranked = fit([f"  rank {rank}/{len(pieces)} (1: least likely)", f"  rank {rank}"], width - line.cell_len)
        line.append(ranked, style=p.muted)
    out.append_text(line)
    out.append("\n")
    line = Text("loss mask ", style=p.muted)
    line.append({True: "1 trained on", False: "0 not trained on", None: "? not known yet"}[training.mask])
    if training.advantage is not None:
        line.append("  advantage ", style=p.muted)
        line.append(f"{training.advantage:+.4g}", style="bold")
        if not training.trained:
            line.append(fit([" (step not trained yet)", " (not trained yet)"], width - line.cell_len), style=p.muted)
    if training.mask is not True:  # why, when it fits (the header above says it in full)
        why = f"  ({one_line(training.why, 120)})"
        line.append(why if line.cell_len + len(why) <= width else "", style=p.muted)
    out.append_text(line)
    out.append("\n")
    if trainer is not None:
        out.append("trainer logprob ", style=p.muted)
        out.append(logprob_text(trainer[i]), style="bold")
        out.append("  trainer − sampler ", style=p.muted)
        out.append(f"{trainer[i] - lp:+.4g}", style="bold")
    else:
        out.append("trainer logprobs: not recorded for this turn", style=p.muted)
    return out
