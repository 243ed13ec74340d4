"""One captured turn's reply as the token view works on it: each token's log-prob as the sampler
gave it and, where the run recorded them, as the trainer did; and where a cursor key takes the
cursor. Pure: a capture record and the laid-out tokens in, numbers and token indices out."""

from __future__ import annotations

from collections.abc import Sequence

from tbconsole.record.capturefile import CaptureRecord
from tbconsole.ui.present.logprob_scale import TurnStats
from tbconsole.ui.present.token_layout import word_start


def sampler_logprobs(record: CaptureRecord | None) -> list[float]:
    """One per output token; a short row is padded with 0.0 (unknown reads as certain)."""
    if record is None:
        return []
    lps = list(record.logprobs[: len(record.output)])
    return lps + [0.0] * (len(record.output) - len(lps))


def trainer_logprobs(trainer: dict[int, list[float]], record: CaptureRecord | None) -> list[float] | None:
    """The trainer's log-probs of ``record``'s turn (``trainer``: by capture turn), where there is
    one for every output token."""
    if record is None:
        return None
    row = trainer.get(record.turn)
    return row if row is not None and len(row) == len(record.output) else None


def differences(trainer: Sequence[float] | None, sampler: Sequence[float]) -> list[float]:
    """Trainer − sampler, per token (none without the trainer's)."""
    return [tr - sa for tr, sa in zip(trainer or [], sampler, strict=False)]


def cursor_target(how: str, n: int, cursor: int, pieces: Sequence[str]) -> int:
    """The token a cursor key takes the cursor to from ``cursor`` (not yet clamped): ``move`` n
    tokens on, ``word`` the next (n = 1) or previous (n = -1) word's start, ``edge`` the first
    (n = 0) or the last. (Up and down go by rows: ``TokenLayout.vertical``.)"""
    if how == "move":
        return cursor + n
    if how == "word":
        return word_start(pieces, cursor, n)
    if how == "edge":
        return len(pieces) - 1 if n else 0
    raise ValueError(f"no cursor move {how!r}")


def by_rank(cursor: int, step: int, stats: TurnStats, ranks: dict[int, int]) -> int:
    """The token ``step`` places on from ``cursor`` in the order from the least likely (``n``: the
    next less likely), round again at either end."""
    rank = ranks.get(cursor, 1) - 1
    return stats.order[(rank + step) % len(stats.order)]


def scrolled_to(row: int, top: float, height: int) -> int | None:
    """The scroll offset that brings ``row`` into a view ``height`` rows tall now scrolled to
    ``top`` (a row of context above or below it); None: it is in view."""
    if row < top:
        return max(0, row - 1)
    if row >= top + height:
        return row - height + 2
    return None
