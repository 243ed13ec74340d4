"""Held-out evaluation: the current policy on tasks it never trains on, under the same Harbor
rollout as training (agent, sandbox, proxy, verifier), reported as cookbook eval metrics.

The cookbook calls a ``SamplingClientEvaluator`` every ``config.eval_every`` batches, before
that batch samples; the runner calls it once more after the last batch. Its trials go under
``<log_path>/heldout/`` (trial folders and captures). Their own events (groups, phases, model
calls, ends) are published wrapped as ``heldout.event``: the console shows them as held-out rows
of the trials grid, with transcripts, while nothing that reads training's events (rewards,
per-task stats, advisories, the timeline) ever counts them. ``evaluation.started`` /
``evaluation.ended`` mark each evaluation, and a log line reports it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from tinker_cookbook.eval.evaluators import SamplingClientEvaluator

from tbconsole.harbor.taskset import discover
from tbconsole.record.enums import LogLevel
from tbconsole.record.events import (
    CaptureLost,
    EvaluationEnded,
    EvaluationStarted,
    GroupEnded,
    GroupStarted,
    HeldOutEvent,
    LogLine,
    ProxyRequest,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.runner.dataset import HarborGroupBuilder
from tbconsole.runner.outcomes import TrialFailed
from tbconsole.runner.rollout import RunContext, run_group

PREFIX = "eval/heldout"


class HeldOutEvaluator(SamplingClientEvaluator):
    def __init__(self, ctx: RunContext, tasks_dir: Path, group_size: int):
        self.ctx = ctx
        self.tasks = discover(Path(tasks_dir).expanduser())
        self.group_size = group_size

    async def __call__(self, sampling_client) -> dict[str, float]:
        ctx = self.ctx
        # Updates behind this policy: its sampler says (every mode); else the batches begun so far.
        trained = getattr(sampling_client, "weights_version", None)
        if trained is None:
            trained = 0 if ctx.last_batch is None else ctx.last_batch + 1
        # Its groups are never trained: the run's group book does not follow them.
        quiet = dataclasses.replace(
            ctx, publish=_as_heldout(ctx.publish, trained), log_path=ctx.folder.heldout.root, _gates={}, book=None
        )
        builders = [
            HarborGroupBuilder(task_dir=task, task_index=i, batch=trained, group=i, group_size=self.group_size)
            for i, task in enumerate(self.tasks)
        ]
        ctx.publish(
            EvaluationStarted(after_updates=trained, tasks=len(builders), trials=len(builders) * self.group_size)
        )
        results = await asyncio.gather(
            *(run_group(quiet, b, sampling_client) for b in builders), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        for failure in failed:
            if not isinstance(failure, TrialFailed):
                raise failure
        scored = [b for b, r in zip(builders, results, strict=True) if not isinstance(r, BaseException)]
        rewards = [r.reward for b in scored for r in b.rewards]
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        ctx.publish(
            EvaluationEnded(
                after_updates=trained, reward=mean if rewards else None, trials=len(rewards), failed_tasks=len(failed)
            )
        )
        ctx.publish(
            LogLine(
                level=LogLevel.WARNING if failed else LogLevel.INFO,
                message=(
                    f"held-out after {trained} updates: reward {mean:.3f} over {len(rewards)} trials "
                    f"of {len(scored)} tasks" + (f"; {len(failed)} tasks not scored ({failed[0]})" if failed else "")
                ),
            )
        )
        return {
            f"{PREFIX}/reward": mean,
            f"{PREFIX}/trials": float(len(rewards)),
            f"{PREFIX}/after_updates": float(trained),
        }


# The trial-level events of a group (``rollout.run_group`` and its proxy): wrapped as held-out.
TRIAL_EVENTS = (GroupStarted, GroupEnded, TrialPhaseChanged, TrialEnded, ProxyRequest, CaptureLost)


def _as_heldout(publish, after_updates: int):
    """The held-out groups' publish: log lines as they are, trial events wrapped (``HeldOutEvent``),
    anything else dropped (the held-out groups are no batch: nothing run-level comes from them)."""

    def forward(event) -> None:
        if isinstance(event, LogLine):
            publish(event)
        elif isinstance(event, TRIAL_EVENTS):
            publish(HeldOutEvent.wrap(event, after_updates))

    return forward
