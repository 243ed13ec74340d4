"""One group = one capture proxy + group_size Harbor trials → cookbook trajectories.

This is the cookbook ``RolloutStrategy`` the recipe installs as ``rollout_error_tolerance``:
the cookbook calls ``execute`` once per group with the current policy; we run the group's
trials under Harbor (at most ``max_parallel_trials_per_group`` at once), let every model call
go through a fresh proxy that samples from that policy and records tokens, then turn each
trial's captured turns into a ``Trajectory`` and its verifier reward into the group's reward.

A trial that must not be scored (see ``outcomes``) cancels the group's other trials; the
decision hook then chooses between stopping the run (the recipe's behaviour, and the
headless default) and retrying the whole group. A gateway that stops answering (the run's
``GatewayWatch``) cancels every group in flight the same way, before any trial is scored. A
trial whose capture is lost (the proxy could not persist a turn) is stopped at once
(``cancel``): it can never be scored, and its agent would otherwise retry the refused call
until its own timeout.

Each attempt of a group (first run, retry, a resumed step) claims names no earlier attempt
used: trial ids, trial folders and the capture folder, so nothing is appended to or written
beside another attempt's files, and a step's training data comes from exactly one attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tinker
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.rl.rollout_strategy import RolloutResult, RolloutStrategy
from tinker_cookbook.rl.types import Trajectory, Transition

from tbconsole.common.formatting import format_duration
from tbconsole.record import runfolder
from tbconsole.record.control import RunControl
from tbconsole.record.enums import Decision, FailureKind, LogLevel, TrialPhase
from tbconsole.record.events import (
    BatchStarted,
    ErrorRaised,
    Event,
    GroupEnded,
    GroupStarted,
    LogLine,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.runner.admission import TaskAdmissions
from tbconsole.runner.cancel import TrialCancel, TrialStopped
from tbconsole.runner.dataset import HarborGroupBuilder, PlaceholderEnv, TrialReward
from tbconsole.runner.datums import DatumStats, conversation_order, datum_stats
from tbconsole.runner.harbor_trial import TrialNotCreated, run_harbor_trial
from tbconsole.runner.health import GatewayWatch
from tbconsole.runner.outcomes import Capture, Outcome, TrialFailed, failure, judge
from tbconsole.runner.replies import instruction_digest, read_trial
from tbconsole.runner.trials import TrialTemplate

if TYPE_CHECKING:  # the proxy is imported when a group runs (run_group)
    from tbconsole.proxy import CaptureProxy
    from tbconsole.proxy.sampling import Sampler
    from tbconsole.runner.groupbook import GroupBook


class StopRun(Exception):
    """Raised at a batch boundary when a stop or abort was requested: no new batch starts."""


@dataclass
class RunContext:
    """What every group needs from the run; shared by all groups of all batches."""

    publish: Callable[[Event], None]
    control: RunControl
    log_path: Path
    renderer: Any
    tokenizer: Any
    template: TrialTemplate
    max_tokens: int
    reward_key: str = "reward"
    listen_host: str = "127.0.0.1"
    advertised_host: str = "127.0.0.1"
    max_parallel_trials: int = 4
    decision_timeout: float | None = 0  # 0: headless (take the default at once)
    dataset: Any = None  # HarborDataset, to announce each batch's groups
    gateway: GatewayWatch | None = None  # None: nobody watches (tests with scripted samplers)
    token_continuity: bool = True  # harbor.token_continuity: sampled tokens kept in later prompts
    remove_constant_reward_groups: bool = False  # config's: such groups are never trained
    # (trial id, Harbor's Trial) as each trial is created: the advisories learn its agent timeout.
    on_trial_created: Callable[[str, Any], None] | None = None
    # The difficulty ledger's changes to the tasks' places (``runner.admission``); None: none.
    admissions: TaskAdmissions | None = None
    _gates: dict[int, asyncio.Future] = field(default_factory=dict)
    _plans: dict[int, list[Path]] = field(default_factory=dict)  # batch -> each group's task, as opened
    _groups: set[asyncio.Task] = field(default_factory=set)  # groups running now (any batch)
    # Streaming loops run each group in a task nobody awaits: the first error a group raises (a
    # failed group, a stop at the batch boundary) is handed to the loop's driver here instead.
    group_errors: asyncio.Future | None = None
    # Every group whose trials ran, until an update trains or drops it (``runner.groupbook``).
    book: GroupBook | None = None
    # Off-policy mode on a gateway serving only its latest weights: each turn samples from the
    # latest weights (``runner.weights.PolicyWeights.current``), not the group's sampler.
    latest_sampler: Callable[[], Any] | None = None
    # Off-policy mode: a stop lets the run cancel the loop at the update boundary (groups in
    # flight are abandoned there), so a group at a closed batch gate waits instead of raising.
    stop_at_update: bool = False
    # Off-policy mode: the updates applied so far (what an early end reports as its step).
    updates: Callable[[], int] | None = None

    @property
    def folder(self) -> runfolder.RunFolder:
        return runfolder.RunFolder(self.log_path)

    async def cancel_groups(self, timeout: float = 120) -> None:
        """Cancel the groups still running and wait for them (their sandboxes stop), bounded.
        The cookbook gathers a batch's groups without cancelling the others when one raises;
        left alone they would run on after the run ended."""
        current = asyncio.current_task()
        pending = [t for t in self._groups if t is not current and not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def batch_gate(self, builder: HarborGroupBuilder) -> None:
        """The first group of a batch waits at the boundary (pause); the others share its answer.
        Past it, the group runs the task the batch was opened with: the cookbook made its
        builders before the boundary, and a task dropped or weighted meanwhile (while paused,
        say) changes the batch still."""
        batch = builder.batch
        gate = self._gates.get(batch)
        if gate is None:
            gate = asyncio.ensure_future(self._open_batch(batch))
            self._gates[batch] = gate
        if not await asyncio.shield(gate):
            if self.stop_at_update:
                await asyncio.Future()  # cancelled with the loop once the update in progress is done
            raise StopRun(f"no new batch after {batch - 1}: {self.control.state}")
        plan = self._plans.get(batch)
        if plan is not None and builder.group < len(plan) and builder.task_dir != plan[builder.group]:
            builder.task_dir = plan[builder.group]
            builder.task_index = self.dataset.tasks.index(builder.task_dir)

    @property
    def last_batch(self) -> int | None:
        """The newest batch that reached its boundary (None before the first)."""
        return max(self._gates, default=None)

    async def _open_batch(self, batch: int) -> bool:
        if not await self.control.batch_boundary():
            return False
        if self.admissions is not None:
            self.admissions.open_batch(batch)
        groups = self.dataset.batch_groups(batch) if self.dataset is not None else []
        self._plans = {b: plan for b, plan in self._plans.items() if b >= batch - 1}
        self._plans[batch] = [g.task_dir for g in groups]
        self.publish(
            BatchStarted(
                step=batch, groups=[{"group": g.group, "task": g.task_name, "trials": g.group_size} for g in groups]
            )
        )
        return True


@dataclass(frozen=True, eq=False)
class HarborRolloutStrategy(RolloutStrategy):
    ctx: RunContext

    async def execute(self, env_group_builder, policy) -> RolloutResult:
        builder: HarborGroupBuilder = env_group_builder
        task = asyncio.current_task()
        assert task is not None  # the cookbook runs each group in its own task
        self.ctx._groups.add(task)
        try:
            return await self._execute(builder, policy)
        except Exception as exc:
            errors = self.ctx.group_errors
            if errors is None:
                raise
            if not errors.done():
                errors.set_exception(exc)
            # Nobody awaits this task: wait here to be cancelled with the run's other groups.
            await asyncio.Future()
            raise AssertionError("unreachable") from None
        finally:
            self.ctx._groups.discard(task)

    async def _execute(self, builder: HarborGroupBuilder, policy) -> RolloutResult:
        await self.ctx.batch_gate(builder)
        if not hasattr(policy, "sampling_client"):
            raise TypeError("the recipe samples through a Tinker sampling client (TinkerTokenCompleter)")
        sampling_client = policy.sampling_client
        attempt = 0
        while True:
            try:
                return await run_group(self.ctx, builder, sampling_client, attempt)
            except TrialFailed as failed:
                if await self._gateway_outage(failed):
                    if not await self._ride_out(builder, failed):
                        raise
                    attempt += 1
                    continue
                decision = await self._decide(builder, failed)
                if decision != Decision.RETRY_GROUP:
                    raise
                attempt += 1
                gateway = self.ctx.gateway
                if gateway is not None and gateway.down.is_set():
                    self.ctx.publish(
                        LogLine(
                            level=LogLevel.WARNING,
                            message=(
                                f"step {builder.batch} group {builder.group}: retry waits for the gateway to answer"
                            ),
                        )
                    )
                    await gateway.wait_up()

    async def _gateway_outage(self, failed: TrialFailed) -> bool:
        """The group failed because the gateway is down (the watch said so, or a model call
        failed and the watch, asked at once, finds it down), and outages are ridden out
        (gateway.outage_limit > 0). A frozen gateway fails a model call before four probes have
        timed out: the verdict is waited for, not guessed."""
        gateway = self.ctx.gateway
        if gateway is None or gateway.outage_limit <= 0:
            return False
        if failed.exception_type == FailureKind.GATEWAY_DOWN:
            return True
        return failed.exception_type == FailureKind.MODEL_CALL_FAILED and await gateway.confirm_down()

    async def _ride_out(self, builder: HarborGroupBuilder, failed: TrialFailed) -> bool:
        """Wait for the gateway within the outage limit: True when the group may run again (its
        trials were cancelled unscored; the next attempt gets fresh trials and capture files)."""
        gateway = self.ctx.gateway
        assert gateway is not None
        where = f"step {builder.batch} group {builder.group}"
        limit = format_duration(gateway.outage_limit)
        self.ctx.publish(
            LogLine(
                level=LogLevel.WARNING,
                message=f"{where}: the gateway is down ({gateway.error or failed.message}); its trials were "
                f"cancelled unscored, and it runs again once the gateway answers (riding out up to "
                f"{limit} of outage: gateway.outage_limit)",
            )
        )
        began = time.monotonic() - gateway.down_for()
        if await gateway.ride_out():
            self.ctx.publish(
                LogLine(
                    level=LogLevel.INFO,
                    message=f"{where}: the gateway answers again after {format_duration(time.monotonic() - began)}"
                    " of outage; the group runs again",
                )
            )
            return True
        failed.message += (
            f" The gateway stayed down for more than {limit} (gateway.outage_limit), so the run stops; "
            "resume it once the gateway is back."
        )
        self.ctx.publish(
            ErrorRaised(
                step=builder.batch, group=builder.group, trial=failed.trial, exception_type=failed.exception_type,
                message=failed.message, trial_dir=failed.trial_dir, decision_needed=False,
            )
        )  # fmt: skip
        return False

    async def _decide(self, builder: HarborGroupBuilder, failed: TrialFailed) -> str:
        ctx = self.ctx
        ctx.publish(
            ErrorRaised(
                step=builder.batch,
                group=builder.group,
                trial=failed.trial,
                exception_type=failed.exception_type,
                message=failed.message,
                trial_dir=failed.trial_dir,
                decision_needed=ctx.decision_timeout != 0,
            )
        )
        return await ctx.control.ask(builder.batch, builder.group, default=Decision.ABORT, timeout=ctx.decision_timeout)


@dataclass
class TrialRun:
    trial_id: str
    outcome: Outcome | None = None
    trial_dir: str | None = None
    turns: list = field(default_factory=list)
    started: float | None = None  # monotonic, once it holds a slot of its group
    seconds: float | None = None  # its wall time, once it ended
    replies: list = field(default_factory=list)  # (turn, reply) as captured: what the hacking watch reads
    data: DatumStats = field(default_factory=DatumStats)  # what its turns cost to train
    cancel: TrialCancel = field(default_factory=TrialCancel)  # stops it: the user, a lost capture

    def trial_reward(self) -> TrialReward:
        """The cookbook's reward and metrics of this (scored) trial: its exit status, and its
        training cost (``data/*``: the cookbook averages them over the batch's trials, and
        ``train.DerivedMetrics`` turns the token means into ``data/token_amplification``)."""
        assert self.outcome is not None and self.outcome.reward is not None, "only a scored trial has a reward"
        metrics = {f"exit_status/{self.outcome.status}": 1.0}
        if self.turns:  # a trial that made no model call (an oracle) trains nothing: no figures
            metrics["data/datums"] = float(self.data.datums)
            metrics["data/trained_tokens"] = float(self.data.trained_tokens)
            metrics["data/context_tokens"] = float(self.data.context_tokens)
        return TrialReward(self.outcome.reward, metrics)

    def sandbox_seconds(self, now: float) -> float:
        if self.seconds is not None:
            return self.seconds
        return now - self.started if self.started is not None else 0.0

    @property
    def weights(self) -> list[int]:
        """The updates whose weights sampled its turns, oldest first."""
        return sorted({t.weights for t in self.turns if t.weights is not None})


async def run_group(
    ctx: RunContext, builder: HarborGroupBuilder, sampling_client: Sampler, attempt: int = 0
) -> RolloutResult:
    """One attempt of a group: its trials run behind a capture proxy of their own, and their
    captured turns become the group's trajectories. A failed trial fails the group (TrialFailed)."""
    capture_dir, trial_ids = claim_attempt(ctx, builder, attempt)
    runs = [TrialRun(t) for t in trial_ids]
    sampler = ctx.latest_sampler or sampling_client
    proxy = _group_proxy(ctx, builder, sampler, capture_dir, runs)
    key = (builder.batch, builder.group, runfolder.attempt_of(trial_ids[0]))
    book = ctx.book
    if book is not None:
        book.started(*key, started_with=getattr(sampling_client, "weights_version", 0))
        builder.on_trained = lambda: book.trained(key)
    await proxy.start()
    try:
        _announce_group(ctx, builder, proxy, runs)
        trial_rewards = await _run_trials(ctx, builder, proxy, runs)
    except asyncio.CancelledError:
        if book is not None:
            now = time.monotonic()
            book.abandon(key, sum(run.sandbox_seconds(now) for run in runs))
        raise
    except BaseException:
        if book is not None:
            book.failed(key)
        raise
    finally:
        await proxy.stop()

    if book is not None:
        rewards = [r.reward for r in trial_rewards]
        book.returned(
            key,
            weights=[w for run in runs for w in run.weights],
            trials=len(runs),
            sandbox_seconds=sum(run.seconds or 0.0 for run in runs),
            datums=sum(run.data.datums for run in runs),
            trainable=not (ctx.remove_constant_reward_groups and len(set(rewards)) <= 1),
        )
    builder.rewards = trial_rewards
    # Each transition's sampling update, in the trajectories' order (the trainer log-probs' staleness).
    builder.transition_weights = [[t.weights for t in conversation_order(run.turns)] for run in runs]
    trajectories = [to_trajectory(run.turns) for run in runs]
    return RolloutResult(trajectories=trajectories, envs=[PlaceholderEnv() for _ in runs], errors=[])


def _group_proxy(
    ctx: RunContext,
    builder: HarborGroupBuilder,
    sampling_client: Sampler | Callable[[], Any],
    capture_dir: Path,
    runs: list[TrialRun],
) -> CaptureProxy:
    """The group's capture proxy (not started): a sampler error makes the gateway suspect, and a
    trial with a turn it could not capture is stopped."""
    from tbconsole.proxy import CaptureProxy

    gateway = ctx.gateway
    loop = asyncio.get_running_loop()

    def stop_lost(trial: str, reason: str) -> None:
        # A trial with a turn it could not capture can never be scored: stop it now rather
        # than let its agent retry the refused call until its timeout (sandbox time for nothing).
        for run in runs:
            if run.trial_id == trial:
                run.cancel.request(failure(FailureKind.CAPTURE_LOST, f"{reason} (the trial was stopped at once)"))

    def capture_lost(trial: str, reason: str) -> None:  # from the proxy's threads
        loop.call_soon_threadsafe(stop_lost, trial, reason)

    return CaptureProxy(
        renderer=ctx.renderer,
        tokenizer=ctx.tokenizer,
        sampler=sampling_client,
        default_max_tokens=ctx.max_tokens,
        capture_dir=capture_dir,
        publish=ctx.publish,
        step=builder.batch,
        group=builder.group,
        listen_host=ctx.listen_host,
        advertised_host=ctx.advertised_host,
        on_sampler_error=(lambda _trial, _exc: gateway.suspect()) if gateway is not None else None,
        on_capture_lost=capture_lost,
        continuity=ctx.token_continuity,
    )


def _announce_group(ctx: RunContext, builder: HarborGroupBuilder, proxy: CaptureProxy, runs: list[TrialRun]) -> None:
    """GroupStarted, then each trial queued."""
    step, group = builder.batch, builder.group
    ctx.publish(
        GroupStarted(
            step=step,
            group=group,
            task=builder.task_name,
            trials=[run.trial_id for run in runs],
            proxy_url=proxy.url,
            instruction=instruction_digest(str(builder.task_dir)),
        )
    )
    for run in runs:
        ctx.publish(
            TrialPhaseChanged(
                step=step, group=group, trial=run.trial_id, phase=TrialPhase.QUEUED, task=builder.task_name
            )
        )


async def _run_trials(
    ctx: RunContext, builder: HarborGroupBuilder, proxy: CaptureProxy, runs: list[TrialRun]
) -> list[TrialReward]:
    """The trials, at most ``max_parallel_trials`` at once, while the gateway is watched; the
    first that fails cancels the rest and is raised. GroupEnded says how the group went."""
    step, group = builder.batch, builder.group
    limit = asyncio.Semaphore(ctx.max_parallel_trials)
    try:
        async with asyncio.TaskGroup() as tasks:  # first TrialFailed cancels the rest
            watch = tasks.create_task(_fail_when_gateway_down(ctx, builder))
            trials = [tasks.create_task(_run_trial(ctx, builder, proxy, run, limit)) for run in runs]
            await asyncio.wait(trials)
            watch.cancel()
    except* TrialFailed as failures:
        first = failures.exceptions[0]
        rewards = [r.outcome.reward if r.outcome else None for r in runs]
        ctx.publish(GroupEnded(step=step, group=group, rewards=rewards, ok=False, error=str(first)))
        raise first from None
    trial_rewards = [run.trial_reward() for run in runs]  # no trial raised: all were scored
    ctx.publish(GroupEnded(step=step, group=group, rewards=[r.reward for r in trial_rewards], ok=True))
    return trial_rewards


def claim_attempt(ctx: RunContext, builder: HarborGroupBuilder, attempt: int = 0) -> tuple[Path, list[str]]:
    """The capture folder and trial ids of a new attempt of this group: the first attempt number
    (from ``attempt`` on) whose capture folder and trial folders do not exist yet. The capture
    folder is created here, exclusively, so two attempts can never share it (a resumed step, a
    retried group, another run writing to the same ``trials_dir``)."""
    step, group = builder.batch, builder.group
    folder = ctx.folder
    folder.capture_step(step).mkdir(parents=True, exist_ok=True)
    trials_dir = ctx.template.trials_dir(folder.trials(step))
    for n in itertools.count(attempt):
        trial_ids = [runfolder.trial_id(builder.task_name, step, group, k, n) for k in range(builder.group_size)]
        if any((trials_dir / t).exists() for t in trial_ids):
            continue
        capture_dir = folder.capture_group(step, group, n)
        try:
            capture_dir.mkdir()
        except FileExistsError:
            continue
        return capture_dir, trial_ids
    raise AssertionError("unreachable")


async def _fail_when_gateway_down(ctx: RunContext, builder: HarborGroupBuilder) -> None:
    """Raise (cancelling the group's trials) once the gateway is marked down: a trial whose model
    calls cannot be answered must not run on to an agent timeout and a score."""
    if ctx.gateway is None:
        return
    await ctx.gateway.down.wait()
    raise TrialFailed(
        f"{builder.task_name}.s{builder.batch}g{builder.group}",
        FailureKind.GATEWAY_DOWN,
        ctx.gateway.reason + " The group's trials were cancelled; none was scored.",
        None,
    )


async def _run_trial(
    ctx: RunContext, builder: HarborGroupBuilder, proxy, run: TrialRun, limit: asyncio.Semaphore
) -> None:
    """One trial, queued for a slot of its group, then run; the user may cancel it at any point
    (``RunControl.cancel_trial``): it then ends as cancelled and its group raises."""
    cancel = run.cancel
    queued = time.monotonic()
    with ctx.control.trial_running(run.trial_id, cancel.request):
        try:
            await cancel.run(limit.acquire())
            try:
                await _run_admitted(ctx, builder, proxy, run, cancel)
            finally:
                limit.release()
        except TrialStopped as stopped:
            raise _failed(ctx, builder, run, stopped.outcome, queued) from None


async def _run_admitted(
    ctx: RunContext, builder: HarborGroupBuilder, proxy, run: TrialRun, cancel: TrialCancel
) -> None:
    """The trial, holding a slot of its group: run in Harbor, then judged."""
    step, group = builder.batch, builder.group
    cred = proxy.register_trial(
        run.trial_id, context_window=ctx.template.proxy.context_window, temperature=ctx.template.proxy.temperature
    )
    config = ctx.template.config_for(
        builder.task_dir.resolve(),
        run.trial_id,
        cred.proxy_url,
        cred.api_key,
        default_trials_dir=ctx.folder.trials(step),
    )
    run.trial_dir = str(Path(config.trials_dir) / run.trial_id)
    started = run.started = time.monotonic()

    async def on_phase(phase: TrialPhase) -> None:
        ctx.publish(
            TrialPhaseChanged(
                step=step,
                group=group,
                trial=run.trial_id,
                phase=phase,
                task=builder.task_name,
                trial_dir=run.trial_dir,
            )
        )

    try:
        created = ctx.on_trial_created
        on_created = None if created is None else (lambda trial: created(run.trial_id, trial))
        result = await cancel.run(run_harbor_trial(config, on_phase, on_created))
    except TrialStopped as stopped:
        raise _failed(ctx, builder, run, stopped.outcome, started) from None
    except TrialNotCreated as exc:
        raise _failed(ctx, builder, run, failure(exc.exception_type, str(exc)), started) from None
    except Exception as exc:  # noqa: BLE001 - e.g. Harbor cannot write the trial folder (a full disk)
        # Whatever escapes Harbor is the trial's infrastructure failing: one TrialFailed like
        # any other (never scored), not a raw error that would end the run as an ExceptionGroup.
        raise _failed(ctx, builder, run, failure(type(exc).__name__, str(exc)), started) from exc
    if cancel.outcome is not None:  # Harbor swallowed the cancel while it stopped the sandbox, and returned
        raise _failed(ctx, builder, run, cancel.outcome, started)

    run.turns = proxy.turns(run.trial_id)
    run.replies = proxy.replies(run.trial_id)
    run.data = datum_stats(run.turns)
    capture = Capture(
        stats=proxy.stats(run.trial_id),
        turns=run.turns,
        lost=proxy.lost_reason(run.trial_id),
        calls_model=ctx.template.calls_proxy,
    )
    run.outcome = outcome = judge(result, ctx.reward_key, capture)
    if not outcome.scored:
        raise _failed(ctx, builder, run, outcome, started)
    _publish_end(ctx, builder, run, outcome, started)


def _failed(
    ctx: RunContext, builder: HarborGroupBuilder, run: TrialRun, outcome: Outcome, started: float
) -> TrialFailed:
    _publish_end(ctx, builder, run, outcome, started)
    return TrialFailed(run.trial_id, outcome.exception_type or outcome.status, outcome.message or "", run.trial_dir)


def _publish_end(ctx: RunContext, builder: HarborGroupBuilder, run: TrialRun, outcome: Outcome, started: float) -> None:
    # The reward-hacking watch reads the trial's replies here, where they are (the advisories
    # get only the event): the verifier's files its commands touched, and its replies' fingerprint.
    reading = read_trial(run.replies, builder.task_dir)
    run.seconds = time.monotonic() - started
    ctx.publish(
        TrialEnded(
            step=builder.batch,
            group=builder.group,
            trial=run.trial_id,
            outcome=outcome.status,
            scored=outcome.scored,
            reward=outcome.reward,
            turns=len(run.turns),
            output_tokens=sum(len(t.output_tokens) for t in run.turns),
            trial_dir=run.trial_dir,
            timings={"total": run.seconds},
            exception_type=outcome.exception_type,
            exception_message=outcome.message,
            datums=run.data.datums if run.turns else None,
            trained_tokens=run.data.trained_tokens if run.turns else None,
            context_tokens=run.data.context_tokens if run.turns else None,
            new_datum=dict(run.data.new_datum),
            verifier_touches=[t.to_json() for t in reading.touches],
            reply_digest=reading.digest,
            reply_chars=reading.chars,
            reply_text=reading.text,
            weights=run.weights,
        )
    )


def to_trajectory(turns: list) -> Trajectory:
    """Captured turns → one cookbook trajectory (reward comes from the group, not per step).
    The cookbook merges consecutive transitions into one datum when a prompt extends the
    previous prompt + output exactly, and starts a new datum otherwise; the turns are taken
    conversation by conversation (``datums.conversation_order``), so that an agent's side
    requests do not split its main conversation. The reward and advantage are the trial's, the
    same for every transition, so the order changes nothing else."""
    ordered = conversation_order(turns)
    transitions = [
        Transition(
            ob=tinker.ModelInput.from_ints(list(turn.prompt_tokens)),
            ac=TokensWithLogprobs(
                tokens=list(turn.output_tokens), maybe_logprobs=list(turn.logprobs), stop_reason=turn.stop_reason
            ),
            reward=0.0,
            episode_done=index == len(ordered) - 1,
        )
        for index, turn in enumerate(ordered)
    ]
    return Trajectory(transitions=transitions, final_ob=tinker.ModelInput.empty())
