"""The recipe's run: the cookbook's synchronous RL loop with Harbor groups, events and controls.

``main`` mirrors ``tinker_cookbook.rl.train.main`` for the synchronous mode the recipe uses
(same logging, resume from ``checkpoints.jsonl``, client creation, checkpoint manager, then
the cookbook's own ``do_sync_training``). We own this orchestration rather than calling the
cookbook's ``main`` because a clean stop must save a checkpoint between batches, which needs
the checkpoint manager in hand.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, cast

import chz
import tinker
from tinker_cookbook import checkpoint_utils
from tinker_cookbook.rl import train as rl_train
from tinker_cookbook.utils import ml_log

from tbconsole.common.inert import strip_ansi
from tbconsole.record.control import ControlInbox, RunControl
from tbconsole.record.enums import DropReason, LogLevel, RunStatus, TrainingMode
from tbconsole.record.events import (
    BatchEnded,
    ErrorRaised,
    EventBus,
    LogLine,
    RunEnded,
    RunStarted,
    StepMetrics,
    read_events_of,
    redact,
)
from tbconsole.record.notify import Notifier
from tbconsole.runner import expired, health
from tbconsole.runner.admission import ADMISSION_KINDS, TaskAdmissions, task_families
from tbconsole.runner.advise import AdvisoryWatcher
from tbconsole.runner.checkpoints import LatestWeightsClient, PublishingCheckpointManager, serves_older_weights
from tbconsole.runner.crashlog import log_traceback
from tbconsole.runner.dataset import HarborDataset
from tbconsole.runner.expired import ExpiryTolerantTrainingClient
from tbconsole.runner.groupbook import EARLIER_KINDS, GroupBook, abandoned_earlier
from tbconsole.runner.offpolicy import LiveLimit, trained_before
from tbconsole.runner.options import ParsedArgs, resolve_renderer_name
from tbconsole.runner.outcomes import TrialFailed
from tbconsole.runner.rollout import HarborRolloutStrategy, RunContext, StopRun
from tbconsole.runner.trainer_logprobs import (
    OFF_POLICY_KEPT_BATCHES,
    RecordingStrategy,
    RecordingTrainingClient,
    TrainerLogprobs,
)
from tbconsole.runner.trials import load_template
from tbconsole.runner.wandb_advisories import advisories_to_wandb
from tbconsole.runner.weights import PolicyWeights, VersionedSampler, VersioningTrainingClient

logger = logging.getLogger(__name__)


class EventMetricsLogger(ml_log.Logger):
    """Each cookbook metrics row (what goes to metrics.jsonl) also becomes a StepMetrics event;
    a training row (an update logged whole) is also told to ``on_update``."""

    def __init__(self, publish):
        self.publish = publish
        self.on_update: Callable[[], None] | None = None

    def log_hparams(self, config: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        step = -1 if step is None else int(step)
        row = StepMetrics(step=step, metrics=numbers)
        self.publish(row)
        if not row.evaluation_only:  # the cookbook logs a step's row once it is trained
            self.publish(BatchEnded(step=step))
            if self.on_update is not None:
                self.on_update()


class DerivedMetrics(ml_log.Logger):
    """Adds figures derived from a metrics row to the row itself, before the cookbook's own
    loggers write it (it is first among them): ``env/all/data/token_amplification``, the batch's
    trained tokens ÷ its trials' final-context tokens (the ratio of the per-trial means the
    cookbook computed from ``TrialRun.trial_reward``; ``runner.datums``)."""

    def log_hparams(self, config: Any) -> None:
        pass

    def __init__(self) -> None:
        # The difficulty ledger's figures of a trained step (``ledger/*``), once the run has one.
        self.step_figures: Callable[[int], dict[str, float]] | None = None
        # The trainer's and the sampler's log-probs by staleness (``TrainerLogprobs.take_figures``).
        self.update_figures: Callable[[], dict[str, float]] | None = None

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        trained = metrics.get("env/all/data/trained_tokens")
        context = metrics.get("env/all/data/context_tokens")
        if isinstance(trained, (int, float)) and isinstance(context, (int, float)) and context > 0:
            metrics["env/all/data/token_amplification"] = float(trained) / float(context)
        # The synchronous loops' row says progress/batch, the off-policy loop's training_client/step.
        batch = metrics.get("progress/batch", metrics.get("training_client/step"))
        if not isinstance(batch, int):
            return
        if self.step_figures is not None:
            metrics.update(self.step_figures(batch))
        if self.update_figures is not None:
            metrics.update(self.update_figures())


@dataclass
class RunResult:
    status: RunStatus
    step: int
    message: str | None = None
    sampler_path: str | None = None  # the final weights, when the run finished

    @property
    def ended_well(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.STOPPED)

    @property
    def exit_code(self) -> int:
        return 0 if self.ended_well else 1


StopCause = Callable[[RunStatus], str | None]  # why a run was stopped or aborted ("on SIGTERM"), if not by request


def _no_cause(status: RunStatus) -> str | None:
    return None


async def main(
    parsed: ParsedArgs,
    bus: EventBus,
    control: RunControl,
    decision_timeout: float | None = 0,
    stop_cause: StopCause = _no_cause,
) -> RunResult:
    """The run. ``decision_timeout``: how long an error that needs a decision waits for one
    (0: the default at once, None: for ever); ``stop_cause`` says why a stop or abort was asked
    for when the run's end message should tell (a signal). With ``harbor.notify`` set, its
    command hears of decisions, advisories of severity error and the run's end."""
    command = parsed.args.harbor.notify
    if not command:
        return await _run(parsed, bus, control, decision_timeout, stop_cause)
    log_path = Path(parsed.args.config.log_path)
    notifier = Notifier(
        command, log_path, lambda message: bus.publish(LogLine(level=LogLevel.WARNING, message=message))
    )
    unsubscribe = bus.subscribe(notifier)
    try:
        return await _run(parsed, bus, control, decision_timeout, stop_cause)
    finally:
        unsubscribe()
        await asyncio.to_thread(notifier.close)  # the run's end goes out before the process exits


async def _run(
    parsed: ParsedArgs, bus: EventBus, control: RunControl, decision_timeout: float | None, stop_cause: StopCause
) -> RunResult:
    """The run's composition root: every part of a run is built and wired here, in this order —
    the gateway and the run context, the metrics, the clients, the tasks and their admissions,
    the advisories — then the cookbook's loop is driven to its end. It is long on purpose: the
    whole wiring of a run reads in one place, each part built by a named step."""
    args = parsed.args
    config: rl_train.Config = args.config
    publish = bus.publish
    ctx, gateway, tokenizer, renderer_name = await _context(parsed, control, decision_timeout, publish)
    config = chz.replace(config, renderer_name=renderer_name)
    # The trainer's per-token log-probs, which the training step gets anyway, go beside the captures.
    trainer_logprobs = TrainerLogprobs(ctx.folder)
    # The recipe's rollout strategy goes straight to the loop (not into the config, which the
    # cookbook deep-copies for config.json).
    strategy = RecordingStrategy(HarborRolloutStrategy(ctx), trainer_logprobs)
    metrics = _Metrics.start(config, bus)
    resume = checkpoint_utils.get_last_checkpoint(config.log_path)
    start_batch = resume.batch if resume else 0
    clients = await _Clients.create(config, resume, publish)
    # Every call the loop and the checkpoints make on the training client: forward_backward's
    # results recorded beside the captures, and a result the gateway expired never re-sent.
    training_client: Any = ExpiryTolerantTrainingClient(
        RecordingTrainingClient(clients.training, trainer_logprobs), publish
    )
    # A gateway serving only its latest weights gets state-only checkpoints and unnamed samplers.
    latest_only, latest_found = await _latest_weights_only(parsed, clients.training)
    latest = LatestWeightsClient(training_client) if latest_only else None
    # Outermost: every sampler the loop creates says which update its weights come from.
    weights = PolicyWeights(start_batch, config.num_substeps, publish)
    training_client = VersioningTrainingClient(latest or training_client, weights)
    mode = training_mode(config)
    ctx.book = book = GroupBook(publish, lambda: weights.update)
    ctx.remove_constant_reward_groups = config.remove_constant_reward_groups

    def update_done() -> None:
        weights.end_update()
        book.update_done()

    metrics.events.on_update = update_done
    trainer_logprobs.update = lambda: weights.update
    metrics.derived.update_figures = trainer_logprobs.take_figures
    evaluators = []
    if args.harbor.eval_tasks_dir:
        from tbconsole.runner.heldout import HeldOutEvaluator

        evaluators.append(HeldOutEvaluator(ctx, Path(args.harbor.eval_tasks_dir), args.harbor.eval_group_size))
    dataset = cast(HarborDataset, (await config.dataset_builder())[0])  # the recipe's builder
    ctx.dataset = dataset
    stop_admissions = _admit_tasks(ctx, args, bus, control, metrics.derived, start_batch)
    end_batch = min(config.max_steps, len(dataset)) if config.max_steps is not None else len(dataset)
    checkpoint_mgr = PublishingCheckpointManager(
        training_client=cast(tinker.TrainingClient, training_client),
        service_client=clients.service,
        log_path=config.log_path,
        save_every=config.save_every,
        ttl_seconds=config.ttl_seconds,
        rolling_save_every=config.rolling_save_every,
        rolling_ttl_seconds=config.rolling_ttl_seconds,
        store=metrics.logger.store,
        publish=publish,
        latest=latest,
    )
    # The advisories see the run from its start; their task joins the background ones below.
    advice = AdvisoryWatcher(publish, args.advise, ctx.log_path)
    stop_advice = bus.subscribe(advice)
    ctx.on_trial_created = advice.trial_created
    off_policy = None
    if mode == TrainingMode.ASYNC:
        off_policy = _off_policy(
            ctx, config, latest_only, book, weights, dataset, trainer_logprobs, start_batch, resume
        )
    publish(_run_started(parsed, config, ctx.log_path, gateway.base_url, dataset, start_batch, end_batch))
    if latest_found is not None:
        publish(latest_found)
    if off_policy is not None:
        off_policy.announce()
    if resume:
        publish(LogLine(level=LogLevel.INFO, message=f"resuming at batch {start_batch} from {resume.state_path}"))
        _account_for_abandoned(ctx, start_batch)
        if dataset.resumed is not None:
            again = sum(1 for step, _ in dataset.resumed[1] if step < start_batch)
            publish(
                LogLine(
                    level=LogLevel.INFO,
                    message=f"off-policy resume: {again} groups drawn before the stop and never trained run "
                    "again first; groups already trained are not drawn again",
                )
            )

    # Startup imported torch, Harbor and the cookbook: freeze those objects out of the garbage
    # collector, whose full passes over them would otherwise stall every proxied request.
    gc.freeze()
    inbox = ControlInbox(ctx.log_path, control, on_error=lambda m: publish(LogLine(level=LogLevel.WARNING, message=m)))
    background = [asyncio.create_task(job) for job in (inbox.run(), gateway.run(), advice.run())]
    # Synchronous (the seed's); streaming minibatches, still on-policy, but a batch's first groups
    # train while the others still sample (config.stream_minibatch_config); or off-policy, where
    # sampling never waits for training (config.async_config). The latter two run each group in a
    # task nobody awaits: its errors reach the driver through ctx.group_errors.
    train_loop = {
        TrainingMode.SYNC: rl_train.do_sync_training,
        TrainingMode.STREAM: rl_train.do_sync_training_with_stream_minibatch,
        TrainingMode.ASYNC: rl_train.do_async_training,
    }[mode]
    if mode != TrainingMode.SYNC:
        ctx.group_errors = asyncio.get_running_loop().create_future()
    loop = train_loop(
        start_batch=start_batch,
        end_batch=end_batch,
        num_batches=end_batch,
        config=config,
        training_client=cast(tinker.TrainingClient, training_client),
        kl_reference_client=clients.kl_reference,
        # config.eval_every=0 means no evaluation in every loop (the streaming one would still
        # evaluate before its last batch).
        evaluators=evaluators if config.eval_every > 0 else [],
        dataset=dataset,
        ml_logger=metrics.logger,
        tokenizer=tokenizer,
        error_counter=None,
        strategy=strategy,
        checkpoint_mgr=checkpoint_mgr,
    )

    # The off-policy loop evaluates each new weights itself, the final ones too when their update
    # falls on config.eval_every; the synchronous loops evaluate before a batch, never after the last.
    evaluated_last = mode == TrainingMode.ASYNC and config.eval_every > 0 and end_batch % config.eval_every == 0

    async def final_evaluation(sampler_path: str | None) -> None:
        if evaluators and config.eval_every > 0 and start_batch < end_batch and not evaluated_last:
            sampling_client = checkpoint_mgr.sampling_client_of(sampler_path) if sampler_path else None
            await _final_evaluation(
                evaluators, sampling_client or clients.service, sampler_path, metrics.logger, end_batch, weights
            )

    try:
        stop_between = weights if mode == TrainingMode.ASYNC else None
        result = await _drive(
            loop, ctx, checkpoint_mgr, stop_cause, start_batch, end_batch, final_evaluation, stop_between
        )
        book.close(DropReason.UNFINISHED if result.status == RunStatus.DONE else DropReason.ABANDONED)
        if result.status == RunStatus.DONE and weights.update < end_batch:
            # Off-policy, groups dropped as stale once every batch was drawn are not drawn again:
            # the last updates never filled. Say so rather than claim the planned count.
            result = RunResult(
                RunStatus.DONE,
                weights.update,
                f"the data ran out after {weights.update} of {end_batch} updates: groups dropped as stale "
                "after every batch was drawn are not drawn again (config.async_config.max_steps_off_policy; "
                "group.dropped events)",
                result.sampler_path,
            )
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        stop_advice()
        stop_admissions()
        control.task_commands = None
        control.off_policy_limit = None
        metrics.close()
    await _close_session(clients.service, result.status)
    control.finish(RunStatus.DONE if result.ended_well else RunStatus.FAILED, result.message)
    publish(RunEnded(status=result.status, step=result.step, message=result.message))
    return result


async def _drive(
    loop: Coroutine[Any, Any, None],
    ctx: RunContext,
    checkpoint_mgr: PublishingCheckpointManager,
    stop_cause: StopCause,
    start_batch: int,
    end_batch: int,
    final_evaluation: Callable[[str | None], Awaitable[None]],
    stop_between: PolicyWeights | None = None,
) -> RunResult:
    """The cookbook's loop to its end: done (then the final evaluation), stopped, failed, or
    cancelled by an abort. The groups still running when it ends are cancelled. With
    ``stop_between`` (the off-policy mode) a stop ends the loop between two updates."""
    control = ctx.control
    training = asyncio.create_task(_raising_group_errors(loop, ctx))
    aborted = asyncio.create_task(control.abort_requested.wait())
    stopped = asyncio.create_task(control.stop_event.wait())
    try:
        waits = {training, aborted, stopped} if stop_between is not None else {training, aborted}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if stop_between is not None and not training.done() and not aborted.done():
            result = await _stop_between_updates(training, aborted, stop_between, checkpoint_mgr, ctx, stop_cause)
            if result is not None:
                return result
        if not training.done():  # abort: cancel the trials in flight; captures/events stay
            training.cancel()
            await asyncio.gather(training, return_exceptions=True)
            return RunResult(RunStatus.ABORTED, _reached(ctx, start_batch), _aborted(stop_cause))
        result = await _finish(training, checkpoint_mgr, control, ctx, start_batch, end_batch, stop_cause)
        if result.status == RunStatus.DONE:
            await final_evaluation(result.sampler_path)
        return result
    except Exception as exc:  # noqa: BLE001 - a training-side failure ends the run with a message
        return _failed_run(exc, ctx, start_batch, ctx.publish)
    finally:
        await ctx.cancel_groups()  # siblings of a group that raised must not outlive the run
        aborted.cancel()
        stopped.cancel()
        await asyncio.gather(aborted, stopped, return_exceptions=True)


async def _stop_between_updates(
    training: asyncio.Task,
    aborted: asyncio.Task,
    weights: PolicyWeights,
    checkpoint_mgr: PublishingCheckpointManager,
    ctx: RunContext,
    stop_cause: StopCause,
) -> RunResult | None:
    """The off-policy mode's clean stop (``training`` was still running, so a stop was asked for):
    the update in progress is finished, no other begins, the loop is cancelled with its groups
    (abandoned: ``group.dropped``, their tasks drawn again on resume), and a checkpoint at the
    updates applied lets the same command resume. None: the loop ended or an abort came first."""
    held = asyncio.create_task(weights.hold_updates())
    await asyncio.wait({training, aborted, held}, return_when=asyncio.FIRST_COMPLETED)
    if not held.done():
        held.cancel()
        return None
    updates = held.result()
    training.cancel()
    await asyncio.gather(training, return_exceptions=True)
    if not checkpoint_mgr.should_save_periodic(updates):
        await checkpoint_mgr.save_periodic_async(step=updates, loop_state={"batch": updates})
    await checkpoint_mgr.finalize_async()
    why = f" {stop_cause(RunStatus.STOPPED)}," if stop_cause(RunStatus.STOPPED) else ""
    return RunResult(
        RunStatus.STOPPED,
        updates,
        f"stopped{why} cleanly with {updates} updates applied; the groups in flight were abandoned "
        "and run again when the run resumes",
    )


async def _raising_group_errors(loop: Coroutine[Any, Any, None], ctx: RunContext) -> None:
    """The loop, ended by the first error a group raised where nobody awaits it (the streaming
    loop's groups, ``RunContext.group_errors``), raised here as the synchronous loop raises it."""
    if ctx.group_errors is None:
        return await loop
    training = asyncio.ensure_future(loop)
    try:
        await asyncio.wait({training, ctx.group_errors}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # an abort, a stop between updates: the loop goes with us
        training.cancel()
        await asyncio.gather(training, return_exceptions=True)
        raise
    if training.done():
        return training.result()
    training.cancel()
    await asyncio.gather(training, return_exceptions=True)
    raise ctx.group_errors.exception()  # type: ignore[misc]


async def _latest_weights_only(parsed: ParsedArgs, training_client: Any) -> tuple[bool, LogLine | None]:
    """gateway.latest_weights_only as given; left unset, the gateway is asked (publish twice,
    sample the older): one that refuses would fail the run at its first named checkpoint, or
    its off-policy groups at their first turn after an update. With what to tell, once found."""
    configured = parsed.args.gateway.latest_weights_only
    if "gateway.latest_weights_only" in parsed.explicit or configured:
        return configured, None
    if await serves_older_weights(training_client) is not False:
        return False, None
    found = LogLine(
        level=LogLevel.WARNING,
        message="the gateway refused to sample weights published before its newest: it serves only its latest "
        "weights, so checkpoints save the training state only and every sampler is the latest weights "
        "(gateway.latest_weights_only=true; give it either way to skip this check)",
    )
    return True, found


def _account_for_abandoned(ctx: RunContext, start_batch: int) -> None:
    """Groups an earlier run left in flight without a word (it was killed) are dropped as abandoned
    now, with their sandbox time, so the ledger counts what they cost."""
    events = ctx.folder.events
    if not events.exists():
        return
    for dropped in abandoned_earlier(read_events_of(events, EARLIER_KINDS), start_batch):
        ctx.publish(dropped)


def training_mode(config: rl_train.Config) -> TrainingMode:
    if config.async_config is not None:
        return TrainingMode.ASYNC
    if config.stream_minibatch_config is not None:
        return TrainingMode.STREAM
    return TrainingMode.SYNC


def _off_policy(
    ctx: RunContext,
    config: rl_train.Config,
    latest_only: bool,
    book: GroupBook,
    weights: PolicyWeights,
    dataset: HarborDataset,
    trainer_logprobs: TrainerLogprobs,
    start_batch: int,
    resume: Any,
) -> LiveLimit:
    """The off-policy mode's wiring: stops at the update boundary, the latest weights per turn on
    a gateway serving only those, the live limit, and a resumed run's untrained groups."""
    ctx.stop_at_update = True
    ctx.updates = lambda: weights.update
    trainer_logprobs.kept_batches = OFF_POLICY_KEPT_BATCHES
    if latest_only:  # in-flight updates: the group's first sampler stops answering
        ctx.latest_sampler = weights.current
    limit = LiveLimit(config.async_config, book, weights, ctx.publish)
    ctx.control.off_policy_limit = limit.lower
    if resume:
        dataset.resume_untrained(start_batch, trained_before(ctx.folder.events, start_batch))
    return limit


async def _context(
    parsed: ParsedArgs, control: RunControl, decision_timeout: float | None, publish: Callable[[Any], None]
) -> tuple[RunContext, health.GatewayWatch, Any, str]:
    """The gateway checked, the renderer chosen, and the context every group of the run shares;
    with the gateway's watch, the tokenizer and the renderer's name."""
    config, harbor = parsed.args.config, parsed.args.harbor
    log_path = Path(config.log_path)
    log_path.mkdir(parents=True, exist_ok=True)
    template = load_template(Path(harbor.trial_config))
    renderer_name = resolve_renderer_name(config)
    base_url = health.resolve_base_url(config.base_url)
    options = parsed.args.gateway
    await health.wait_until_ready(base_url, publish, options.start_timeout)

    from tinker_cookbook.renderers import get_renderer
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    tokenizer = get_tokenizer(config.model_name)
    renderer = get_renderer(renderer_name, tokenizer)
    gateway = health.GatewayWatch(base_url, publish, outage_limit=options.outage_limit)
    ctx = RunContext(
        publish=publish,
        control=control,
        log_path=log_path,
        renderer=renderer,
        tokenizer=tokenizer,
        template=template,
        max_tokens=config.max_tokens,
        reward_key=harbor.reward_key,
        listen_host=harbor.listen_host,
        advertised_host=harbor.advertised_host,
        max_parallel_trials=harbor.max_parallel_trials_per_group,
        decision_timeout=decision_timeout,
        gateway=gateway,
        token_continuity=harbor.token_continuity,
    )
    _announce_continuity(publish, renderer, renderer_name, harbor.token_continuity)
    return ctx, gateway, tokenizer, renderer_name


@dataclass
class _Metrics:
    """Where the loop's metrics go: the cookbook's loggers (metrics.jsonl, W&B), the derived
    figures first and the run's events last; and the advisories, when the metrics go to W&B."""

    logger: Any  # the cookbook's ml_log logger
    derived: DerivedMetrics
    events: EventMetricsLogger
    stop_wandb: Callable[[], None]

    @classmethod
    def start(cls, config: rl_train.Config, bus: EventBus) -> _Metrics:
        ml_logger = ml_log.setup_logging(
            log_dir=config.log_path, wandb_project=config.wandb_project, config=config, wandb_name=config.wandb_name
        )
        loggers = cast(ml_log.MultiplexLogger, ml_logger).loggers
        derived = DerivedMetrics()
        loggers.insert(0, derived)
        events = EventMetricsLogger(bus.publish)
        loggers.append(events)
        stop_wandb = advisories_to_wandb(ml_logger, bus)
        _quiet_console_logging()
        return cls(ml_logger, derived, events, stop_wandb)

    def close(self) -> None:
        self.stop_wandb()
        self.logger.close()


@dataclass
class _Clients:
    """The run's Tinker clients: the service, the policy's training client (resumed, loaded or
    new) and, with a KL penalty, a sampler of the reference model."""

    service: tinker.ServiceClient
    training: Any
    kl_reference: Any | None

    @classmethod
    async def create(cls, config: rl_train.Config, resume: Any, publish: Callable[[Any], None]) -> _Clients:
        service = tinker.ServiceClient(base_url=config.base_url)

        async def create_training() -> Any:
            if resume:
                return await service.create_training_client_from_state_with_optimizer_async(resume.state_path)
            if config.load_checkpoint_path:
                return await service.create_training_client_from_state_async(config.load_checkpoint_path)
            return await service.create_lora_training_client_async(config.model_name, rank=config.lora_rank)

        # A model whose creation's result expired (HTTP 410) exists on the gateway but cannot be
        # named: create another (nothing has trained yet, so nothing is applied twice).
        training = await expired.resend("create_model", create_training, expired.warn(publish))
        kl_reference = None
        if config.kl_penalty_coef > 0:  # as the cookbook's main: a sampler of the reference model
            reference = config.kl_reference_config
            assert reference is not None, "config.kl_reference_config is required with config.kl_penalty_coef > 0"
            kl_reference = await _ready(
                service.create_sampling_client(
                    base_model=reference.base_model, model_path=reference.load_checkpoint_path
                )
            )
        return cls(service, training, kl_reference)


def _admit_tasks(
    ctx: RunContext, args: Any, bus: EventBus, control: RunControl, derived: DerivedMetrics, start_batch: int
) -> Callable[[], None]:
    """The task admissions (the ledger's retire/restore): a resumed run's earlier changes and
    groups (the events before this start) are replayed, then every new one is observed. Returns
    the unsubscribe."""
    dataset = ctx.dataset
    assert dataset is not None
    admissions = TaskAdmissions(
        [p.name for p in dataset.tasks], dataset.schedule, args.ledger, bus.publish, next_batch=start_batch
    )
    stop_admissions, earlier_end = bus.subscribe_after_file(admissions.observe)
    if earlier_end > 0 and bus.path is not None:
        admissions.replay(read_events_of(bus.path, ADMISSION_KINDS, end=earlier_end))
    ctx.admissions = admissions
    control.task_commands = admissions.request
    derived.step_figures = admissions.ledger.step_figures
    return stop_admissions


def _run_started(
    parsed: ParsedArgs,
    config: rl_train.Config,
    log_path: Path,
    base_url: str,
    dataset: HarborDataset,
    start_batch: int,
    end_batch: int,
) -> RunStarted:
    args = parsed.args
    return RunStarted(
        run_id=uuid.uuid4().hex[:12],
        log_path=str(log_path),
        model_name=config.model_name,
        base_url=base_url,
        renderer_name=config.renderer_name,
        total_steps=end_batch,
        start_step=start_batch,
        groups_per_batch=dataset.groups_per_batch,
        group_size=dataset.group_size,
        tasks=[p.name for p in dataset.tasks],
        task_families=task_families(dataset.tasks, args.ledger.family_pattern),
        training_mode=training_mode(config),
        max_steps_off_policy=config.async_config.max_steps_off_policy if config.async_config else None,
        config=redact(
            {
                "config": _plain(args.config),
                "harbor": _plain(args.harbor),
                "advise": asdict(args.advise),
                "ledger": _plain(args.ledger),
            }
        ),
    )


def _aborted(stop_cause: StopCause) -> str:
    return f"aborted {stop_cause(RunStatus.ABORTED) or 'by request'}"


async def _finish(training, checkpoint_mgr, control, ctx, start_batch, end_batch, stop_cause: StopCause) -> RunResult:
    try:
        training.result()
    except StopRun:
        batch = ctx.last_batch
        if control.abort_requested.is_set():
            return RunResult(RunStatus.ABORTED, batch, _aborted(stop_cause))
        # Stop: batch-1 was trained; checkpoint so a rerun of the same command resumes at `batch`.
        if not checkpoint_mgr.should_save_periodic(batch):
            await checkpoint_mgr.save_periodic_async(step=batch, loop_state={"batch": batch})
        await checkpoint_mgr.finalize_async()
        why = f" {stop_cause(RunStatus.STOPPED)}," if stop_cause(RunStatus.STOPPED) else ""
        return RunResult(RunStatus.STOPPED, batch, f"stopped{why} cleanly before batch {batch}")
    except TrialFailed as failure:
        return RunResult(RunStatus.FAILED, _reached(ctx, start_batch), str(failure))
    sampler_path = None
    if start_batch < end_batch:
        paths = await checkpoint_mgr.save_final_async(loop_state={"batch": end_batch})
        sampler_path = paths.get("sampler_path")
    else:
        await checkpoint_mgr.finalize_async()
    return RunResult(RunStatus.DONE, end_batch, None, sampler_path)


def _reached(ctx: RunContext, start_batch: int) -> int:
    """The step a run that ended early had reached: the updates applied where it is off-policy (its
    batches drawn run ahead of them), else the newest batch begun."""
    if ctx.updates is not None:
        return ctx.updates()
    return ctx.last_batch if ctx.last_batch is not None else start_batch


def _failed_run(exc: Exception, ctx: RunContext, start_batch: int, publish) -> RunResult:
    """A failure outside the trials (a training call the gateway did not answer after the SDK's
    retries, a checkpoint that could not be written): one error event and a message that says
    what to do; the traceback goes to the run's logs.log only."""
    log_file = log_traceback(ctx.log_path, exc)
    step = _reached(ctx, start_batch)
    reason = f"{type(exc).__name__}: {str(exc)[:500]}"
    if _is_connection_error(exc):
        hint = (
            f"the gateway at {ctx.gateway.base_url if ctx.gateway else 'config.base_url'} stopped answering "
            "during training. Start it again, then rerun the same command: the run resumes from its "
            "last checkpoint."
        )
    else:
        hint = f"see {log_file} for the traceback; rerun the same command to resume from the last checkpoint."
    publish(
        ErrorRaised(
            step=step,
            group=None,
            trial=None,
            exception_type=type(exc).__name__,
            message=f"{reason} — {hint}",
            trial_dir=None,
            decision_needed=False,
        )
    )
    return RunResult(RunStatus.FAILED, step, f"{reason}: {hint}")


async def _close_session(service_client: tinker.ServiceClient, status: RunStatus, timeout: float = 5) -> None:
    """Finish the run's session, so the gateway can let go of its live state (the local engine
    deletes its journal). Bounded: a dead gateway must not hold the run's end."""
    reasons: dict[RunStatus, Literal["success", "errored", "interrupted"]] = {
        RunStatus.DONE: "success",
        RunStatus.STOPPED: "success",
        RunStatus.ABORTED: "interrupted",
    }
    reason = reasons.get(status, "errored")
    try:
        await asyncio.wait_for(_ready(service_client.close(reason, detail=f"run {status}")), timeout)
    except Exception as exc:  # noqa: BLE001 - the run has ended either way
        logger.info("closing the session failed: %s", exc)


def _is_connection_error(exc: BaseException) -> bool:
    import aiohttp

    return isinstance(
        exc, (tinker.APIConnectionError, tinker.APITimeoutError, aiohttp.ClientConnectionError, ConnectionError)
    )


def _announce_continuity(publish, renderer: Any, renderer_name: str, enabled: bool) -> None:
    """Say once, at the start, when the proxy will not keep sampled tokens in later prompts: every
    turn of a multi-turn trial then trains as a datum of its own (docs/recipe.md, *Token continuity*)."""
    from tbconsole.proxy.render import supports_incremental

    if not enabled:
        publish(
            LogLine(
                level=LogLevel.INFO,
                message="token continuity is off (harbor.token_continuity=false): prompts are the renderer's own "
                "history form, and a turn trains in the same datum as the one before only where that form "
                "happens to extend it",
            )
        )
        return
    stops = renderer.get_stop_sequences()
    if not supports_incremental(renderer) or not all(isinstance(s, int) for s in stops):
        publish(
            LogLine(
                level=LogLevel.WARNING,
                message=f"renderer {renderer_name} cannot keep sampled tokens in later prompts (it renders "
                "whole conversations or stops on text): each turn of a multi-turn trial trains as its own datum",
            )
        )


async def _final_evaluation(evaluators, client, sampler_path, ml_logger, end_batch, weights: PolicyWeights) -> None:
    """The cookbook evaluates before a batch samples, so the last update is never evaluated:
    score the final weights too (a metrics row without progress/batch: no new training step).
    ``client``: the service client, or already the final weights' sampling client."""
    if sampler_path is None:
        return
    if isinstance(client, tinker.ServiceClient):
        client = await _ready(client.create_sampling_client(model_path=sampler_path))
    sampling_client = VersionedSampler(client, weights.update)  # the final weights: every update applied
    metrics = {}
    for evaluator in evaluators:
        metrics.update(await evaluator(sampling_client))
    ml_logger.log_metrics(metrics, step=end_batch)


async def _ready(client_or_future: Any) -> Any:
    """The SDK hands clients back as awaitable futures in newer versions, directly in older."""
    return await client_or_future if inspect.isawaitable(client_or_future) else client_or_future


class _WithoutTraceback(logging.Formatter):
    """A console handler's formatter that writes a record's message but not its traceback (a
    library logging an error with ``exc_info``, e.g. Harbor when a full disk stops a download):
    the person reads what went wrong; logs.log keeps the traceback. Written to anything but a
    terminal (a file, a pipe), it drops the colour codes libraries put in their lines."""

    def __init__(self, inner: logging.Formatter | None, to_terminal: bool):
        super().__init__()
        self._inner = inner or logging.Formatter()
        self._to_terminal = to_terminal

    def format(self, record: logging.LogRecord) -> str:
        bare = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None})
        text = self._inner.format(bare)
        return text if self._to_terminal else strip_ansi(text)


def _not_a_warning(record: logging.LogRecord) -> bool:
    return record.name != "py.warnings"


def _quiet_console_logging() -> None:
    """The cookbook logs every trajectory at INFO to the console; the run's own progress log
    (or the console UI) is the readable view, and logs.log keeps the full text. Libraries'
    Python warnings (the SDK's DEPRECATED notices) go to logs.log only; console handlers of
    libraries' own loggers (litellm's) are treated like the root's."""
    logging.captureWarnings(True)
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.Logger.manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.FileHandler) or isinstance(handler.formatter, _WithoutTraceback):
                continue
            handler.setLevel(logging.WARNING)
            stream = getattr(handler, "stream", None)
            to_terminal = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
            handler.setFormatter(_WithoutTraceback(handler.formatter, to_terminal))
            handler.addFilter(_not_a_warning)


def _plain(obj: Any) -> Any:
    """A JSON-friendly view of a chz config (for the RunStarted event)."""
    if hasattr(obj, "__chz_fields__"):
        return {name: _plain(getattr(obj, name)) for name in obj.__chz_fields__}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return repr(obj)
