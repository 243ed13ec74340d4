"""The trials grid's `/` filter: which trials a line of words matches."""

from __future__ import annotations

from tbconsole.record.enums import TrialOutcome
from tbconsole.state import TrialState

FAIL_WORDS = ("fail", "failed")
ERROR_WORDS = ("error", "errors")
OK_WORDS = ("ok", "solved")
STALE_WORD = "stale"  # trained with weights older than the update that trained it; stale=N exactly N
FRESH_WORD = "fresh"  # trained with the weights of the update that trained it


def did_not_submit(trial: TrialState) -> bool:
    """Ended any other way than a submission (a limit or an error), or cancelled with its group."""
    return trial.cancelled or (trial.done and trial.outcome != TrialOutcome.SUBMITTED)


def trial_matches(trial: TrialState, query: str) -> bool:
    """Every word must match: the task, the outcome, the phase, the trial id or the exception
    (substrings), or one of ``ok``/``solved`` (reward ≥ 1), ``fail``/``failed`` (no submission:
    a limit, an error or cancelled), ``error``/``errors`` (not scored: an error outcome or cancelled
    with its group), ``cancelled``, ``reward=1``, ``stale`` (trained on weights at least one update
    old: off-policy), ``stale=2`` (exactly two), ``fresh`` (trained on-policy). A trial no update
    has trained yet is neither stale nor fresh."""
    words = query.lower().split()
    if not words:
        return True
    hay = " ".join(
        filter(
            None,
            (
                trial.task,
                trial.outcome,
                trial.phase,
                trial.trial,
                trial.exception_type,
                "cancelled" if trial.cancelled else None,
            ),
        )
    ).lower()
    for word in words:
        if word.startswith("reward="):
            try:
                if trial.reward is None or abs(trial.reward - float(word[7:])) > 1e-9:
                    return False
            except ValueError:
                return False
        elif word in (STALE_WORD, FRESH_WORD) or word.startswith(STALE_WORD + "="):
            if not _staleness_matches(trial.staleness, word):
                return False
        elif word in FAIL_WORDS:
            if not did_not_submit(trial):
                return False
        elif word in ERROR_WORDS:
            if not trial.failed:
                return False
        elif word in OK_WORDS:
            if not (trial.reward is not None and trial.reward >= 1.0):
                return False
        elif word not in hay:
            return False
    return True


def _staleness_matches(staleness: int | None, word: str) -> bool:
    if staleness is None:
        return False
    if word == FRESH_WORD:
        return staleness == 0
    if word == STALE_WORD:
        return staleness >= 1
    try:
        return staleness == int(word[len(STALE_WORD) + 1 :])
    except ValueError:
        return False
