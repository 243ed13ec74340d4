"""What a trial's captured turns cost to train: how many datums the cookbook makes of them, and
how many tokens those datums hold against the tokens of the trial's final contexts.

The cookbook (``trajectory_to_data``) walks a trajectory's transitions in order and merges a
transition into the datum being built when its prompt extends the datum's tokens so far (earlier
prompts + sampled tokens) exactly; otherwise it closes the datum and starts one with the whole
prompt. ``conversation_order`` puts each of a trial's conversations (``CapturedTurn.continues``
links a turn to the one it extends) together, in order, so that an agent's side requests between
two turns of its main conversation do not split it. ``datum_stats`` applies the cookbook's rule to
the turns in that order: a test checks it against the cookbook's own function.

*Token amplification* is trained tokens ÷ the trial's final context (its longest prompt plus
that turn's sampled tokens): about 1 when the trial trains as one datum, above 1 for each datum
that carries a prompt again (it grows with the square of the turns when every turn is a datum of
its own), and for an agent's side conversations or a history it rewrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tbconsole.record.enums import NewDatum


@dataclass
class DatumStats:
    datums: int = 0
    trained_tokens: int = 0  # the datums' input tokens (each datum's tokens less its last)
    context_tokens: int = 0  # the final context: the longest prompt + its sampled tokens
    new_datum: Counter[str] = field(default_factory=Counter)  # why turns started a datum (NewDatum)

    @property
    def amplification(self) -> float | None:
        return self.trained_tokens / self.context_tokens if self.context_tokens else None


def conversation_order(turns: Sequence[Any]) -> list[Any]:
    """The turns, each conversation's together and in order, conversations by their first turn.
    A turn joins the conversation of the turn it ``continues`` when that turn is the latest of
    its conversation; otherwise (a turn with no link, or a second turn continuing the same one)
    it begins a conversation of its own."""
    chains: list[list[Any]] = []
    chain_of: dict[int, int] = {}  # turn index → its chain, while it is that chain's latest turn
    for turn in turns:
        link = getattr(turn, "continues", None)
        at = chain_of.pop(link, None) if link is not None else None
        if at is None:
            at = len(chains)
            chains.append([])
        chains[at].append(turn)
        chain_of[turn.turn] = at
    return [turn for chain in chains for turn in chain]


def datum_stats(turns: Sequence[Any]) -> DatumStats:
    """The cookbook's merge rule over ``turns`` taken in ``conversation_order``."""
    stats = DatumStats()
    ordered = conversation_order(turns)
    sequence: list[int] = []
    for index, turn in enumerate(ordered):
        prompt = turn.prompt_tokens
        if not sequence or len(prompt) < len(sequence) or prompt[: len(sequence)] != sequence:
            if sequence:
                stats.trained_tokens += len(sequence) - 1
            stats.datums += 1
            if index:
                stats.new_datum[str(_why_new(turn))] += 1
            sequence = list(prompt)
        else:
            sequence.extend(prompt[len(sequence) :])
        sequence.extend(turn.output_tokens)
        stats.context_tokens = max(stats.context_tokens, len(prompt) + len(turn.output_tokens))
    if sequence:
        stats.trained_tokens += len(sequence) - 1
    return stats


def _why_new(turn: Any) -> NewDatum | str:
    """Why a turn began a datum: the proxy's word, else a second continuation of one turn (an
    agent's retry after an unparseable sample), else a prompt that stopped extending."""
    why = getattr(turn, "new_datum", None)
    if why:
        return str(why)
    return NewDatum.REPEATED if getattr(turn, "continues", None) is not None else NewDatum.CONTEXT_CHANGED
