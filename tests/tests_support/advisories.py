"""Advisory events, constructed: a builder of a run's events in order (``Stream``, a run's real
event types with a clock the test moves), filters over what the rules published, and the finished
fixture's run with the advisories a run with rules would publish (``with_advisories``)."""

from __future__ import annotations

from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel
from tbconsole.record.events import (
    AdvisoryCleared,
    AdvisoryRaised,
    BatchEnded,
    CaptureLost,
    Event,
    GroupEnded,
    StepMetrics,
    read_events,
)

from tests_support.paths import FIXTURES

FINISHED = FIXTURES / "finished" / "events.jsonl"


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


def raised(events, rule: str | None = None) -> list[ev.AdvisoryRaised]:
    return [e for e in events if isinstance(e, ev.AdvisoryRaised) and (rule is None or e.rule == rule)]


def cleared(events, prefix: str = "") -> list[ev.AdvisoryCleared]:
    return [e for e in events if isinstance(e, ev.AdvisoryCleared) and e.key.startswith(prefix)]


KL = "optim/kl_sample_train_v1"
LOST_TRIAL = "json-active-users__00026"  # the fixture's trial whose capture was lost (step 1)


def advisory(key, severity, *, ts=0.0, **fields) -> AdvisoryRaised:
    defaults = {"rule": key.split(":")[0], "message": f"{key} fired", "threshold": "x >= 1"}
    return AdvisoryRaised(key=key, severity=severity, ts=ts, **{**defaults, **fields})


def _after(event: Event) -> list[Event]:
    """The advisories a run with rules publishes right after ``event`` (finished fixture)."""
    ts = event.ts + 0.001
    if isinstance(event, CaptureLost):
        return [
            advisory(
                f"capture-lost:{event.trial}",
                LogLevel.ERROR,
                ts=ts,
                message=f"a sampled turn of {event.trial} could not be written: the trial fails",
                threshold="captures_lost > 0",
                value=1.0,
                step=event.step,
                group=event.group,
                trial=event.trial,
            )
        ]
    if isinstance(event, GroupEnded) and (event.step, event.group) == (1, 1):
        return [
            advisory(
                "all-failed:recover-lost-commit",
                LogLevel.WARNING,
                ts=ts,
                message="recover-lost-commit: no trial solved it in step 1 (out of reach: it trains nothing)",
                threshold="solved == 0",
                value=0.0,
                step=1,
                group=1,
            )
        ]
    if isinstance(event, BatchEnded) and event.step == 1:
        return [
            advisory(
                "no-signal",
                LogLevel.WARNING,
                ts=ts,
                message="3 of 4 groups in step 1 got one reward: little to learn from",
                threshold="no_signal_share >= 0.5",
                value=0.75,
                step=1,
            )
        ]
    if isinstance(event, StepMetrics) and KL in event.metrics:
        return [
            advisory(
                "kl-drift",
                LogLevel.WARNING,
                ts=ts,
                message=f"sampler and trainer disagree: KL {event.metrics[KL]:.4f} at step {event.step}",
                threshold=f"{KL} > 0.005",
                value=float(event.metrics[KL]),
                step=event.step,
                metric=KL,
            )
        ]
    if isinstance(event, BatchEnded) and event.step == 2:
        return [
            AdvisoryCleared(key="no-signal", ts=ts, message="step 2: 1 of 4 groups got one reward (0.25 < 0.5)"),
            advisory(
                "all-solved:hello-file",
                LogLevel.INFO,
                ts=ts + 0.001,
                message="hello-file: every trial solved it in step 2 (learnt: it trains nothing)",
                threshold="solved == group_size",
                value=1.0,
                step=2,
                group=0,
            ),
        ]
    return []


def with_advisories(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        out.append(event)
        out.extend(_after(event))
    return out


def finished_with_advisories() -> list[Event]:
    return with_advisories(list(read_events(FINISHED)))


# -- the reducer --------------------------------------------------------------------------------
