"""amplification: a step whose trials train many more tokens than their final contexts hold.

The cookbook trains a trial as one datum only when each turn's prompt extends the previous prompt
+ sampled tokens exactly; every other turn is a datum of its own that carries its whole prompt
again, so the trained tokens (and the KL reference's and the trainer's time) grow with the square
of the turns. Each scored trial's ``trial.ended`` says what its turns cost (``runner.datums``) and
why turns began new datums (``enums.NewDatum``); when a step ends, the rule compares the step's
trained tokens with its trials' final contexts and names the most common cause.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tbconsole.advisories.base import Rule, step_done
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import NewDatum

# What to do about each cause, for the advisory's line.
REMEDY = {
    NewDatum.CONTINUITY_OFF: "set harbor.token_continuity=true (the default) to keep sampled tokens in later prompts",
    NewDatum.RENDERER: "use a renderer that renders message by message and stops on a token (e.g. qwen3_5)",
    NewDatum.HISTORY_REWRITTEN: (
        "the agent truncates, summarises or edits its history, or leaves out replies it could not use "
        "(mini-swe-agent drops a reply with no tool call): each rewrite starts a datum"
    ),
    NewDatum.ECHO_CHANGED: "the agent edits the replies it sends back: see new_datum in the trials' capture lines",
    NewDatum.REPEATED: "the agent sends requests again: look for proxy errors in its trials",
    NewDatum.CONTEXT_CHANGED: "the renderer renders earlier messages differently as a conversation grows",
}


class Amplification(Rule):
    """H0: each trial trains as one datum (trained tokens ≈ its final context, ratio ≤ 1, as in
    every healthy run of the corpus); a step over ``advise.amplification_max`` × trains turns again
    and again: warning."""

    name = "amplification"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.steps: dict[int, list[int]] = {}  # step → [trials, datums, trained tokens, context tokens]
        self.causes: dict[int, Counter[str]] = {}
        self.done: set[int] = set()

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.TrialEnded) and item.scored and isinstance(item.datums, int):
            sums = self.steps.setdefault(item.step, [0, 0, 0, 0])
            for i, value in enumerate((1, item.datums, item.trained_tokens, item.context_tokens)):
                sums[i] += value if isinstance(value, int) and value > 0 else 0
            if isinstance(item.new_datum, dict):
                causes = self.causes.setdefault(item.step, Counter())
                for why, count in item.new_datum.items():
                    causes[str(why)] += count if isinstance(count, int) and count > 0 else 0
        step = step_done(item)
        if step is not None and step not in self.done:
            self.done.add(step)
            self._judge(step)
            self.steps.pop(step, None)
            self.causes.pop(step, None)

    def _judge(self, step: int) -> None:
        trials, datums, trained, context = self.steps.get(step, [0, 0, 0, 0])
        if not trials or not context:
            return
        ratio = trained / context
        limit = self.t.amplification_max
        if ratio <= limit:
            self.release(self.name, f"step {step}: trained tokens {ratio:.2f}× the final contexts, at most {limit:g}×")
            return
        causes = self.causes.get(step, Counter())
        top = causes.most_common(1)
        why = ""
        if top and top[0][1] > 0:
            cause = top[0][0]
            known = cause in NewDatum.__members__.values()
            text = NewDatum(cause).describe if known else cause
            remedy = REMEDY[NewDatum(cause)] if known else "see new_datum in the trials' capture lines"
            why = f"; most new datums: {text} ({top[0][1]} turns) — {remedy}"
        self.warn(
            message=f"step {step}: trained tokens are {ratio:.1f}× the trials' final contexts "
            f"({datums / trials:.1f} datums per trial){why}",
            threshold=f"advise.amplification_max={limit:g}",
            value=round(ratio, 3),
            step=step,
        )
