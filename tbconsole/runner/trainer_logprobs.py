"""The trainer's log-prob of every sampled token, recorded beside the captures when a step trains.

The cookbook's training step (``tinker_cookbook.rl.train.train_step``) already gets these back:
``forward_backward`` returns the trainer's log-prob of every target token of every datum, and the
cookbook uses them only for ``optim/kl_sample_train_*``. Here they are kept per token: the recipe's
training client is wrapped so each ``forward_backward`` result is read beside the datums it was
asked for, and each datum is matched to the trial and turns it was built from.

Matching: when a group's rollout returns, each trial's captured turns are laid out the way the
cookbook's ``trajectory_to_data`` builds datums (a turn whose prompt extends the sequence so far
joins its datum, any other starts a new one), and each datum is keyed by a digest of its target
tokens. A datum that reaches ``forward_backward`` is looked up by the same digest (identical
datums, of trials that sampled the same reply, in rollout order); its output
tokens' positions give the trainer's log-probs per turn. Groups the cookbook drops (constant
rewards, when configured) are never asked for and leave no file.

Written: ``RunFolder.trainer_logprobs_file``, one JSON line per turn,
``{"step", "turn", "logprobs": [...]}``, each trial's lines in one append.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from tinker_cookbook.rl.rollout_strategy import RolloutResult, RolloutStrategy

from tbconsole.record.runfolder import RunFolder, trial_id

logger = logging.getLogger(__name__)

# How many batches back a returned group's datums are still looked for in the off-policy mode (an
# update takes groups a few batches old at most); a synchronous update takes only its own batch's.
OFF_POLICY_KEPT_BATCHES = 16
CLIP_EPSILON = 0.2  # PPO's clip range (the cookbook's default): a ratio beyond 1 ± this stops its gradient


def _digest(tokens: Any) -> bytes:
    return hashlib.blake2b(np.asarray(tokens, dtype=np.int64).tobytes(), digest_size=16).digest()


@dataclass(frozen=True)
class DatumPlan:
    """One datum of a trial: where each of its turns' output tokens sit among its targets."""

    step: int
    group: int
    trial: str
    turns: tuple[tuple[int, int, int], ...]  # (turn, first target index, token count)
    weights: tuple[int | None, ...] = ()  # per turn: the update whose weights sampled it


def plan_datums(
    step: int,
    group: int,
    trial: str,
    turns: Sequence[tuple[Sequence[int], Sequence[int]]],
    weights: Sequence[int | None] | None = None,
):
    """(digest of target tokens, plan) per datum the cookbook builds from these (prompt, output)
    turns, mirroring ``trajectory_to_data``'s merge rule. ``weights``: each turn's sampling update."""
    out: list[tuple[bytes, DatumPlan]] = []
    full: list[int] = []
    spans: list[tuple[int, int, int]] = []
    versions: list[int | None] = []

    def close() -> None:
        if full:
            out.append((_digest(full[1:]), DatumPlan(step, group, trial, tuple(spans), tuple(versions))))

    for index, (prompt, output) in enumerate(turns):
        prompt = list(prompt)
        if full and prompt[: len(full)] == full:
            full.extend(prompt[len(full) :])
        else:
            close()
            full, spans, versions = list(prompt), [], []
        spans.append((index, len(full) - 1, len(output)))  # targets are the sequence shifted by one
        versions.append(weights[index] if weights is not None and index < len(weights) else None)
        full.extend(output)
    close()
    return out


@dataclass
class TrainerLogprobs:
    folder: RunFolder
    # Digest → plans in rollout order: trials of a group often sample the very same reply, and
    # their datums (same tokens) reach the trainer in the same order.
    plans: dict[bytes, list[DatumPlan]] = field(default_factory=dict)
    step: int | None = None
    seconds: float = 0.0  # spent matching and writing, for the run's log
    kept_batches: int = 0  # batches before the newest whose datums may still train (off-policy)
    # The update being trained (``runner.weights.PolicyWeights.update``): a turn's staleness is
    # this minus the update that sampled it. None: staleness is not measured.
    update: Callable[[], int] | None = None
    # Per staleness, over the update's sampled tokens: [sum(sampler - trainer log-prob), sum of
    # importance ratios exp(trainer - sampler), tokens]; taken with each update's metrics row.
    by_staleness: dict[int, list[float]] = field(default_factory=dict)

    def add_group(
        self,
        step: int,
        group: int,
        trials: list[str],
        result: RolloutResult,
        weights: Sequence[Sequence[int | None]] | None = None,
    ) -> None:
        """The group's trials' datums, to be looked for; ``weights``: per trial, each turn's
        sampling update (in the trajectory's order)."""
        started = time.perf_counter()
        if self.step is None or step > self.step:
            # Datums of groups drawn before that never trained (dropped, constant rewards) are
            # forgotten, so an identical datum of a later group is never matched to them.
            old = step - self.kept_batches
            for digest in [d for d, plans in self.plans.items() if all(p.step < old for p in plans)]:
                del self.plans[digest]
            self.step, self.seconds = step, 0.0
        for k, (trial, trajectory) in enumerate(zip(trials, result.trajectories, strict=True)):
            turns = [(t.ob.to_ints(), t.ac.tokens) for t in trajectory.transitions]
            trial_weights = weights[k] if weights is not None and k < len(weights) else None
            for digest, plan in plan_datums(step, group, trial, turns, trial_weights):
                self.plans.setdefault(digest, []).append(plan)
        self.seconds += time.perf_counter() - started

    def record(self, data: Sequence[Any], output: Any, update: int | None = None) -> None:
        """One ``forward_backward``'s datums and result → lines beside the captures. ``update``:
        the update it was sent for (its result comes back after the update's optimizer step was
        already sent)."""
        started = time.perf_counter()
        rows: dict[tuple[int, int, str], list[bytes]] = {}
        for datum, out in zip(data, output.loss_fn_outputs, strict=False):
            digest = _digest(datum.loss_fn_inputs["target_tokens"].to_numpy())
            waiting = self.plans.get(digest)
            if not waiting:
                continue
            plan = waiting.pop(0)
            if not waiting:
                del self.plans[digest]
            logprobs = out["logprobs"].to_numpy()
            for turn, start, count in plan.turns:
                row = {"step": plan.step, "turn": turn, "logprobs": logprobs[start : start + count].tolist()}
                rows.setdefault((plan.step, plan.group, plan.trial), []).append(orjson.dumps(row) + b"\n")
            self._measure(datum, logprobs, plan, update)
        for (step, group, trial), lines in rows.items():
            path = self.folder.trainer_logprobs_file(step, group, trial)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as handle:  # whole lines, one write per trial
                handle.write(b"".join(lines))
        self.seconds += time.perf_counter() - started
        logger.info(
            "trainer log-probs: %d datums of step %s written for %d trials; %.1f ms so far this step",
            len(data),
            self.step,
            len(rows),
            self.seconds * 1000,
        )

    def _measure(self, datum: Any, trainer: np.ndarray, plan: DatumPlan, update: int | None) -> None:
        """The sampler's and the trainer's log-probs of each turn's tokens, by the turn's staleness."""
        if update is None or "logprobs" not in datum.loss_fn_inputs:
            return
        sampler = datum.loss_fn_inputs["logprobs"].to_numpy()
        for (_, start, count), version in zip(plan.turns, plan.weights, strict=False):
            if version is None:
                continue
            end = min(start + count, len(sampler), len(trainer))
            if end <= start:
                continue
            diff = sampler[start:end] - trainer[start:end]
            ratio = np.exp(np.clip(-diff, -20.0, 20.0))  # trainer ÷ sampler probability
            sums = self.by_staleness.setdefault(max(0, update - version), [0.0, 0.0, 0.0, 0.0])
            sums[0] += float(diff.sum())
            sums[1] += float(ratio.sum())
            sums[2] += end - start
            sums[3] += float(np.count_nonzero(np.abs(ratio - 1.0) > CLIP_EPSILON))

    def take_figures(self) -> dict[str, float]:
        """The update's figures by staleness (then forgotten), per staleness n (``s{n}``) and pooled
        over fresh (n = 0) and stale (n >= 1) tokens: ``offpolicy/kl_sample_train`` (the cookbook's
        v1 estimate, mean sampler minus trainer log-prob), ``offpolicy/importance_ratio`` (mean
        trainer ÷ sampler probability) and ``offpolicy/clipped_share`` (tokens whose ratio is
        outside 1 ± 0.2, where PPO's clip stops their gradient); and the stale tokens' share."""
        sums, self.by_staleness = self.by_staleness, {}
        if not sums:
            return {}
        figures: dict[str, float] = {}
        pooled = {"fresh": [0.0] * 4, "stale": [0.0] * 4}
        for staleness, row in sorted(sums.items()):
            _figures(figures, f"s{staleness}", row)
            into = pooled["fresh" if staleness == 0 else "stale"]
            for k, value in enumerate(row):
                into[k] += value
        for name, row in pooled.items():
            _figures(figures, name, row)
        figures["offpolicy/stale_token_share"] = pooled["stale"][2] / (pooled["fresh"][2] + pooled["stale"][2])
        return figures


def _figures(into: dict[str, float], name: str, row: list[float]) -> None:
    diff, ratio, tokens, clipped = row
    if tokens:
        into[f"offpolicy/kl_sample_train/{name}"] = diff / tokens
        into[f"offpolicy/importance_ratio/{name}"] = ratio / tokens
        into[f"offpolicy/clipped_share/{name}"] = clipped / tokens


def attempt_trials(folder: RunFolder, task: str, step: int, group: int, size: int) -> list[str]:
    """The trial ids of a group's attempt that returned: its newest capture folder's."""
    attempt = 0
    while folder.capture_group(step, group, attempt + 1).exists():
        attempt += 1
    return [trial_id(task, step, group, k, attempt) for k in range(size)]


@dataclass(frozen=True, eq=False)
class RecordingStrategy(RolloutStrategy):
    """The recipe's rollout strategy, noting each returned group's turns for the recorder."""

    inner: RolloutStrategy
    recorder: TrainerLogprobs

    @property
    def catches_group_errors(self) -> bool:
        return self.inner.catches_group_errors

    async def execute(self, env_group_builder, policy) -> RolloutResult:
        result = await self.inner.execute(env_group_builder, policy)
        b = env_group_builder
        try:
            trials = attempt_trials(self.recorder.folder, b.task_name, b.batch, b.group, len(result.trajectories))
            self.recorder.add_group(b.batch, b.group, trials, result, getattr(b, "transition_weights", None))
        except Exception as exc:  # noqa: BLE001 - a view's data must never fail the run
            logger.warning("trainer log-probs: step %s group %s not recorded: %s", b.batch, b.group, exc)
        return result


class _RecordingFuture:
    def __init__(self, future: Any, data: Sequence[Any], recorder: TrainerLogprobs, update: int | None):
        self._future, self._data, self._recorder, self._update = future, data, recorder, update

    async def result_async(self, *args: Any, **kwargs: Any) -> Any:
        result = await self._future.result_async(*args, **kwargs)
        try:
            self._recorder.record(self._data, result, self._update)
        except Exception as exc:  # noqa: BLE001 - a view's data must never fail the run
            logger.warning("trainer log-probs not recorded: %s", exc)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)


class RecordingTrainingClient:
    """The training client, with each ``forward_backward_async`` result also given to the
    recorder; everything else goes straight to the client."""

    def __init__(self, client: Any, recorder: TrainerLogprobs):
        self._client, self._recorder = client, recorder

    async def forward_backward_async(self, data, loss_fn, loss_fn_config=None):
        update = self._recorder.update() if self._recorder.update is not None else None
        future = await self._client.forward_backward_async(data, loss_fn=loss_fn, loss_fn_config=loss_fn_config)
        return _RecordingFuture(future, list(data), self._recorder, update)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
