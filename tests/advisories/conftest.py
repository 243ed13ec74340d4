"""Event streams for the advisory rules: the recorded demo run, and a builder for constructed
ones (a run's real event types, with a clock the test moves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbconsole.record import events as ev
from tbconsole.record.events import read_events

RECORDED = Path(__file__).resolve().parents[1] / "ui" / "fixtures" / "demo-run" / "events.jsonl"


@pytest.fixture(scope="session")
def recorded() -> list[ev.Event]:
    """A real 2-step demo run's events (recorded; 2 groups × 4 trials per step)."""
    return list(read_events(RECORDED))


class Stream:
    """Builds a run's events in order, each stamped with the builder's clock."""

    def __init__(self, t0: float = 1_000_000.0):
        self.now = t0
        self.items: list = []

    def wait(self, seconds: float) -> Stream:
        self.now += seconds
        return self

    def add(self, item):
        self.items.append(item)
        return item

    def event(self, cls, **fields):
        return self.add(cls(ts=self.now, **fields))

    def run_started(self, total_steps: int = 10, **config) -> Stream:
        self.event(
            ev.RunStarted,
            run_id="r",
            log_path="/run",
            model_name="m",
            base_url=None,
            renderer_name=None,
            total_steps=total_steps,
            groups_per_batch=2,
            group_size=4,
            tasks=["a", "b"],
            config={"config": config},
        )
        return self

    def group(
        self,
        step: int,
        group: int,
        rewards: list[float | None],
        *,
        outcomes: list[str] | None = None,
        turns: int = 2,
        output_tokens: int = 100,
        prompt_tokens: int = 1000,
        stop_reason: str = "stop",
        agent_s: float = 60.0,
        ok: bool = True,
        attempt: str = "",
        task: str | None = None,
        instruction: str | None = None,
        ended: list[dict] | None = None,
    ) -> list[str]:
        """A whole group: queued → environment → agent (turns captured) → verifying → ended.
        ``task`` (default ``task<group>``) and its ``instruction`` digest; ``ended``: more fields
        of each trial's trial.ended (what the runner read of its replies)."""
        task = task or f"task{group}"
        trials = [f"{task}.s{step}g{group}t{k}{attempt}" for k in range(len(rewards))]
        self.event(
            ev.GroupStarted,
            step=step,
            group=group,
            task=task,
            trials=trials,
            proxy_url="http://p",
            instruction=instruction,
        )
        for trial in trials:
            self.event(ev.TrialPhaseChanged, step=step, group=group, trial=trial, phase="queued")
        for trial in trials:
            self.event(ev.TrialPhaseChanged, step=step, group=group, trial=trial, phase="environment")
        self.wait(2)
        for trial in trials:
            self.event(ev.TrialPhaseChanged, step=step, group=group, trial=trial, phase="agent")
        for turn in range(turns):
            self.wait(agent_s / turns)
            for trial in trials:
                self.event(
                    ev.ProxyRequest,
                    step=step,
                    group=group,
                    trial=trial,
                    api="openai",
                    stream=False,
                    status=200,
                    captured=True,
                    turn=turn,
                    prompt_tokens=prompt_tokens,
                    output_tokens=output_tokens,
                    stop_reason=stop_reason,
                )
        for k, trial in enumerate(trials):
            self.event(ev.TrialPhaseChanged, step=step, group=group, trial=trial, phase="verifying")
            self.wait(1)
            outcome = (outcomes or ["Submitted"] * len(trials))[k]
            scored = rewards[k] is not None
            self.event(
                ev.TrialEnded,
                step=step,
                group=group,
                trial=trial,
                outcome=outcome if scored else "AgentError",
                scored=scored,
                reward=rewards[k],
                turns=turns,
                output_tokens=turns * output_tokens,
                trial_dir=None,
                timings={},
                **(ended[k] if ended else {}),
            )
        self.event(ev.GroupEnded, step=step, group=group, rewards=list(rewards), ok=ok)
        return trials

    def step_end(self, step: int, metrics: dict[str, float] | None = None) -> Stream:
        """The step's metrics row (with the training data's totals computed from the proxy's
        captured turns of its ok groups, unless given) and batch.ended."""
        totals = {"env/all/total_turns": 0.0, "env/all/total_ob_tokens": 0.0, "env/all/total_ac_tokens": 0.0}
        trained = set()
        for item in self.items:
            if isinstance(item, ev.GroupStarted) and item.step == step:
                members = item.trials
            if isinstance(item, ev.GroupEnded) and item.step == step and item.ok:
                trained.update(members)
        for item in self.items:
            if isinstance(item, ev.ProxyRequest) and item.captured and item.trial in trained:
                totals["env/all/total_turns"] += 1
                totals["env/all/total_ob_tokens"] += item.prompt_tokens
                totals["env/all/total_ac_tokens"] += item.output_tokens
        row = {**totals, **(metrics or {})}
        self.event(ev.StepMetrics, step=step, metrics=row)
        self.event(ev.BatchEnded, step=step)
        return self


@pytest.fixture
def stream() -> Stream:
    return Stream()


def raised(events, rule: str | None = None) -> list[ev.AdvisoryRaised]:
    return [e for e in events if isinstance(e, ev.AdvisoryRaised) and (rule is None or e.rule == rule)]


def cleared(events, prefix: str = "") -> list[ev.AdvisoryCleared]:
    return [e for e in events if isinstance(e, ev.AdvisoryCleared) and e.key.startswith(prefix)]


@pytest.fixture
def advisories():
    """(raised, cleared) filters over a list of advisory events."""
    return raised, cleared
