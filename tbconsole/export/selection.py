"""Which trials an export holds, read from the run's events.jsonl.

A group is exported when its last attempt ended with every trial scored (``group.ended`` with
``ok``): that attempt is the one the cookbook trains on, and only then does every trial of it
have a reward and an advantage. Infrastructure failures never carry a reward, so a failed group
(and an earlier attempt of a retried one) is never exported. Held-out evaluation trials come
wrapped (``heldout.event``) and are left out. By default the steps are those the run trained
(``batch.ended``); asked for, any step the run started, each record saying whether it trained.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tbconsole.export.advantages import group_advantages
from tbconsole.record.events import BatchEnded, Event, GroupEnded, GroupStarted, RunStarted, TrialEnded


class SelectionError(Exception):
    """The steps asked for are not in the run: a usage error."""


@dataclass(frozen=True)
class ExportTrial:
    trial: str
    task: str
    step: int
    group: int
    reward: float
    outcome: str
    advantage: float
    group_rewards: tuple[float, ...]
    trained: bool  # its step's update ran (batch.ended)
    turns: int
    trial_dir: str | None


@dataclass
class RunFacts:
    """What the records say about the run as a whole."""

    run_id: str | None = None
    model_name: str | None = None
    kl_penalty_coef: float = 0.0
    steps: set[int] = field(default_factory=set)  # every step that started a group
    trained: set[int] = field(default_factory=set)


@dataclass
class _Group:
    task: str
    trials: list[str]
    rewards: list[float] | None = None  # set when this attempt ended with every trial scored


def _kl_coef(config: dict[str, Any]) -> float:
    inner = config.get("config") if isinstance(config, dict) else None
    value = inner.get("kl_penalty_coef") if isinstance(inner, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


def select(events: Iterable[Event], steps: list[int] | None = None) -> tuple[RunFacts, list[ExportTrial]]:
    """The run's facts and its exported trials, by step, group and place in the group.
    ``steps`` None: the trained steps. Raises SelectionError for a step the run never started."""
    facts = RunFacts()
    groups: dict[tuple[int, int], _Group] = {}  # each group's latest attempt
    ended: dict[str, TrialEnded] = {}
    for event in events:
        if isinstance(event, RunStarted):
            if facts.run_id is None:  # a resumed run keeps the name of its first start
                facts.run_id, facts.model_name = event.run_id, event.model_name
                facts.kl_penalty_coef = _kl_coef(event.config)
        elif isinstance(event, GroupStarted):
            groups[(event.step, event.group)] = _Group(event.task, list(event.trials))
            facts.steps.add(event.step)
        elif isinstance(event, GroupEnded):
            group = groups.get((event.step, event.group))
            if group is not None:
                scored = event.ok and all(r is not None for r in event.rewards)
                group.rewards = [float(r) for r in event.rewards if r is not None] if scored else None
        elif isinstance(event, TrialEnded):
            ended[event.trial] = event
        elif isinstance(event, BatchEnded):
            facts.trained.add(event.step)
    wanted = sorted(facts.trained) if steps is None else sorted(set(steps))
    missing = [s for s in wanted if s not in facts.steps]
    if missing:
        have = f"its steps are {_span(facts.steps)}" if facts.steps else "it started no step"
        raise SelectionError(f"step {', '.join(map(str, missing))} is not in this run ({have})")
    out: list[ExportTrial] = []
    for (step, index), group in sorted(groups.items()):
        if step not in wanted or group.rewards is None or len(group.rewards) != len(group.trials):
            continue
        advantages = group_advantages(group.rewards)
        for trial, reward, advantage in zip(group.trials, group.rewards, advantages, strict=True):
            end = ended.get(trial)
            if end is None or not end.scored:
                continue
            out.append(
                ExportTrial(
                    trial=trial,
                    task=group.task,
                    step=step,
                    group=index,
                    reward=reward,
                    outcome=end.outcome,
                    advantage=advantage,
                    group_rewards=tuple(group.rewards),
                    trained=step in facts.trained,
                    turns=end.turns,
                    trial_dir=end.trial_dir,
                )
            )
    return facts, out


def _span(steps: set[int]) -> str:
    lo, hi = min(steps), max(steps)
    return str(lo) if lo == hi else f"{lo}–{hi}"
