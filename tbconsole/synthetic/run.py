"""A synthetic but realistic run, as an event stream: for tests, fixtures, `--demo-events` and
the console benchmark. Deterministic for a seed; timestamps start at ``t0`` (a fake clock).

It plays what the runner emits: a run start, gateway probes, batches of groups whose trials move
through Harbor's phases concurrently, proxy requests per agent turn (some rejected), rewards, the
cookbook's per-step metrics, checkpoints, a pause after a batch, and optionally an error that
needs a decision (then retry of the group) and a clean stop. The turns' text (hostile strings
included, to test that they stay plain text) goes where a real run puts it: into capture files,
through ``captures`` (``tbconsole.synthetic.captures``), never into the events.

A run is played by ``_Player`` (one random stream, one clock per batch), one method per part of
it: a batch, a group's attempts, a trial, its turns, a failure, the gateway's probes, training.
Every update says which groups it trained (``group.trained``) and when its training began
(``training.started``). ``off_policy`` plays the off-policy mode instead (``_OffPolicy``):
samplers never wait for the trainer, groups train up to ``off_policy`` updates stale, and the
groups past that limit, or left when the run ends, are dropped with their sandbox cost.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.record.enums import (
    ControlState,
    Decision,
    DecisionBy,
    DropReason,
    FailureKind,
    LogLevel,
    RunStatus,
    TrainingMode,
    TrialOutcome,
)
from tbconsole.record.enums import TrialPhase as Phase
from tbconsole.record.events import (
    BatchEnded,
    BatchStarted,
    CaptureLost,
    CheckpointSaved,
    ControlChanged,
    DecisionMade,
    ErrorRaised,
    EvaluationEnded,
    EvaluationStarted,
    Event,
    GatewayHealth,
    GroupDropped,
    GroupEnded,
    GroupStarted,
    GroupTrained,
    HeldOutEvent,
    LogLine,
    OffPolicyLimit,
    ProxyRequest,
    RunEnded,
    RunStarted,
    StepMetrics,
    TrainingStarted,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.record.runfolder import RunFolder, trial_id
from tbconsole.synthetic.captures import SyntheticCaptures

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
TASKS = {  # task -> chance of solving
    "hello-file": 1.0,
    "count-errors": 0.6,
    "csv-column": 0.5,
    "fix-shebang": 0.8,
    "git-branch-commit": 0.3,
    "recover-lost-commit": 0.0,
    "json-active-users": 0.4,
    "rename-ext": 0.7,
}
HOSTILE = [
    "[bold red]not bold[/bold red] and [link=http://x]link[/link]",
    "\x1b[31mred?\x1b[0m \x1b[2J\x1b[H cleared?",
    "\x1b]0;pwned title\x07 \x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
    "\u202etxt.exe\u202c bell\x07 backspace\x08 cr\r done",
]
REPLIES = [
    "I'll look at the files first.\n```bash\nls -la /app\n```",
    "Let me check the script.\n```bash\ncat /app/run.sh | head -40\n```",
    "The test expects a header row. Fixing it.\n```bash\nsed -i 's/^id,/id,name,/' /app/out.csv\n```",
    "Done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
]

HELDOUT_TASKS = {"count-errors-901": 0.5, "rename-ext-902": 0.7}  # never trained on; chance of solving

SYSTEM = (
    "You are a helpful assistant that can interact with a computer. Reply with one bash command in a "
    "```bash block; its output comes back in the next message."
)


def _reply(text: str, k: int) -> dict:
    """A capture line's parsed reply: the text, with the model's reasoning on some turns."""
    reply: dict = {"text": text}
    if k % 3 == 1:
        reply["reasoning"] = f"Turn {k + 1}: check what the last command printed before going on."
    return reply


def _metrics(
    step: int, total: int, rewards: list[float], turns: int, tokens: int, duration: float, rng: random.Random
) -> dict[str, float]:
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    decay = math.exp(-step / 8)
    return {
        "progress/batch": float(step),
        "progress/done_frac": (step + 1) / max(total, 1),
        "optim/lr": 1e-6,
        "optim/kl_sample_train_v1": 0.002 + 0.004 * decay + rng.random() * 0.001,
        "optim/kl_sample_train_v2": 0.001 + 0.003 * decay + rng.random() * 0.001,
        "optim/entropy": 0.9 - 0.3 * (1 - decay) + rng.random() * 0.02,
        "loss:sum": -0.05 * mean + rng.gauss(0, 0.01),
        "grad_norm:mean": 0.5 + decay + rng.random() * 0.1,
        "env/all/reward/total": mean,
        "env/all/total_episodes": float(len(rewards)),
        "env/all/total_turns": float(turns),
        "env/all/total_ac_tokens": float(tokens),
        "env/all/turns_per_episode": turns / max(len(rewards), 1),
        "env/all/by_group/frac_mixed": 0.5,
        "time/total": duration,
    }


class _Clock:
    """Events of one batch, merged in time order."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Event]] = []
        self.seq = 0

    def add(self, event: Event) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (event.ts, self.seq, event))

    def drain(self) -> Iterator[Event]:
        while self.heap:
            yield heapq.heappop(self.heap)[2]


def heldout_evaluation(
    after_updates: int,
    now: float,
    rng: random.Random,  # its own: a run with evaluations trains on the same draws as one without
    *,
    group_size: int = 2,
    captures: SyntheticCaptures | None = None,
) -> Iterator[Event]:
    """One held-out evaluation as the runner publishes it (``runner.heldout``): its start, each
    held-out task's group with its trials' events wrapped (``HeldOutEvent``, step = updates
    behind the weights), its end and log line. ``captures``: the turns' lines, under the run
    folder's ``heldout/`` as the held-out proxy writes them."""
    trials = len(HELDOUT_TASKS) * group_size
    yield EvaluationStarted(ts=now, after_updates=after_updates, tasks=len(HELDOUT_TASKS), trials=trials)
    evaluation = _HeldOut(after_updates, rng, group_size, captures)
    rewards: list[float] = []
    end = now
    for g, (task, chance) in enumerate(HELDOUT_TASKS.items()):
        group_rewards, g_end = evaluation.group(g, task, chance, now + 0.05 * g)
        rewards += group_rewards
        end = max(end, g_end + 0.02)
    yield from evaluation.clock.drain()
    mean = sum(rewards) / len(rewards)
    yield EvaluationEnded(ts=end, after_updates=after_updates, reward=mean, trials=len(rewards), failed_tasks=0)
    yield LogLine(
        ts=end,
        level=LogLevel.INFO,
        message=f"held-out after {after_updates} updates: reward {mean:.3f} over {len(rewards)} trials "
        f"of {len(HELDOUT_TASKS)} tasks",
    )


class _HeldOut:
    """One held-out evaluation while it is played: its events merged in time order (each wrapped
    as held-out), drawn from its own random stream in a fixed order (a trial's start, its turns,
    its end and reward, trial after trial), so that a seed gives the same evaluation."""

    def __init__(
        self, after_updates: int, rng: random.Random, group_size: int, captures: SyntheticCaptures | None
    ) -> None:
        self.step = after_updates  # a held-out group's step: the updates behind the weights
        self.rng = rng
        self.group_size = group_size
        self.captures = captures
        self.clock = _Clock()

    def add(self, event: Event) -> None:
        self.clock.add(HeldOutEvent.wrap(event, self.step))

    def group(self, g: int, task: str, chance: float, start: float) -> tuple[list[float], float]:
        """Group ``g`` of ``task``: its trials' rewards, and when its last trial ended."""
        names = [trial_id(task, self.step, g, k) for k in range(self.group_size)]
        self.add(
            GroupStarted(ts=start, step=self.step, group=g, task=task, trials=names, proxy_url="http://127.0.0.1:41000")
        )
        rewards: list[float] = []
        end = start
        for k, name in enumerate(names):
            t, reward = self.trial(g, task, chance, name, start, start + 0.01 * k)
            rewards.append(reward)
            end = max(end, t)
        self.add(GroupEnded(ts=end + 0.01, step=self.step, group=g, rewards=list(rewards), ok=True))
        return rewards, end

    def trial(self, g: int, task: str, chance: float, name: str, group_start: float, t: float) -> tuple[float, float]:
        """One trial queued at ``t``: when it ended, and its reward (1 with the task's chance)."""
        step = self.step
        self.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.QUEUED, task=task))
        t += self.rng.uniform(0.5, 2.0)
        self.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT, task=task))
        t, n_turns, out_tokens = self.turns(g, task, name, t)
        t += self.rng.uniform(0.5, 1.5)
        reward = 1.0 if self.rng.random() < chance else 0.0
        self.add(
            TrialEnded(
                ts=t,
                step=step,
                group=g,
                trial=name,
                outcome=TrialOutcome.SUBMITTED,
                scored=True,
                reward=reward,
                turns=n_turns,
                output_tokens=out_tokens,
                trial_dir=None,
                timings={"total": t - group_start},
            )
        )
        self.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.DONE, task=task))
        return t, reward

    def turns(self, g: int, task: str, name: str, t: float) -> tuple[float, int, int]:
        """A trial's one to three model calls from ``t``: when the last ended, how many, and
        their output tokens."""
        n_turns = self.rng.randint(1, 3)
        out_tokens = 0
        for turn in range(n_turns):
            t += self.rng.uniform(1.0, 4.0)
            otoks = self.rng.randint(40, 300)
            request = ProxyRequest(
                ts=t,
                step=self.step,
                group=g,
                trial=name,
                api="openai",
                stream=False,
                status=200,
                captured=True,
                turn=turn,
                prompt_tokens=800 + 300 * turn,
                output_tokens=otoks,
                stop_reason="stop",
                sample_ms=otoks * 4.0,
                total_ms=otoks * 4.0 + 12,
            )
            self.add(request)
            out_tokens += otoks
            if self.captures is not None:
                self._capture(self.captures, request, task, turn)
        return t, n_turns, out_tokens

    def _capture(self, captures: SyntheticCaptures, request: ProxyRequest, task: str, turn: int) -> None:
        """The turn's capture line, in the file the held-out proxy writes under the run folder's heldout/."""
        content = f"Task {task}: make the tests pass." if turn == 0 else f"<output>step {turn}</output>"
        captures.add(request, [{"role": "user", "content": content}], _reply(REPLIES[turn], turn))
        pending = captures.pending.get((request.trial, turn))
        if pending is not None:
            pending.path = captures.folder.heldout.capture_file(self.step, request.group, request.trial)


@dataclass(frozen=True)
class RunShape:
    """What a synthetic run looks like: ``synthetic_run``'s options (its docstring says each)."""

    steps: int = 3
    groups: int = 4
    group_size: int = 4
    seed: int = 0
    t0: float = T0
    turns: tuple[int, int] = (2, 6)
    error_at: tuple[int, int] | None = None
    decision: str | None = Decision.RETRY_GROUP
    pause_after: int | None = None
    stop_after: int | None = None
    hostile: bool = True
    text: bool = True
    end: bool = True
    log_path: str = "/tmp/tbconsole-demo"
    trials_dir: str | None = None
    prompt_step: int = 400
    tool_output: Callable[[int], str] | None = None
    heldout_at: tuple[int, ...] = ()
    off_policy: int | None = None  # max_steps_off_policy: the off-policy mode (None: synchronous)
    lower_at: tuple[int, int] | None = None  # off-policy: (update, limit) lowered live from the console


def synthetic_run(*, captures: SyntheticCaptures | None = None, **shape: Any) -> Iterator[Event]:
    """Yield a run's events in order; ``shape``: the fields of ``RunShape``. ``error_at=(step,
    group)`` raises an error needing a decision in that group (``decision`` None leaves it
    pending and ends the stream there); ``pause_after`` pauses after that step's batch for a
    while; ``stop_after`` stops cleanly after that step; ``end`` False leaves the run unfinished
    (a live run's file). ``captures`` receives each captured turn's text (``text`` False:
    token-only lines, as older runs wrote): ``tool_output(k)`` what the k-th turn's command
    printed (None: one short line), while each turn's prompt grows by ``prompt_step`` tokens in
    its ``proxy.request``. ``heldout_at``: the numbers of updates after which a held-out
    evaluation runs, as the runner runs them (before that step's batch; ``steps``: after the
    last), its trials' events wrapped as held-out. ``off_policy=K``: the off-policy mode with
    max_steps_off_policy K (``steps`` updates; no error, pause, stop or held-out evaluation there),
    ``lower_at=(update, limit)`` lowering it live."""
    return _Player(RunShape(**shape), captures).events()


@dataclass
class _Batch:
    """One step's batch while it is played: its events in time order and its running totals."""

    step: int
    start: float
    clock: _Clock = field(default_factory=_Clock)
    end: float = 0.0  # when its last group ended
    rewards: list[float] = field(default_factory=list)
    turns: int = 0
    tokens: int = 0
    ended_run: bool = False  # an error left pending, or an abort: the stream ends with this batch
    trained: list[int] = field(default_factory=list)  # the groups that returned with every trial scored


@dataclass
class _Group:
    """One attempt at a group: its trials, when it started, and what they scored."""

    index: int
    task: str
    names: list[str]
    start: float
    failing: bool  # the attempt the error is raised in
    end: float = 0.0
    rewards: list[float | None] = field(default_factory=list)
    fail_ts: float | None = None


class _Player:
    """Plays one run in time order from one random stream: every draw happens in the order the
    original single-function player made it, so a seed gives the same run as it always has."""

    def __init__(self, shape: RunShape, captures: SyntheticCaptures | None) -> None:
        self.shape = shape
        self.captures = captures
        self.rng = random.Random(shape.seed)
        self.tasks = list(TASKS)
        self.now = shape.t0
        self.sampler: str | None = None
        self.trial_serial = 0
        self.weights = 0  # the update whose weights sample the groups started now

    def events(self) -> Iterator[Event]:
        s = self.shape
        if s.off_policy is not None:
            yield from _OffPolicy(self).events()
            return
        yield self._run_started()
        yield ControlChanged(ts=self.now, state=ControlState.RUNNING)
        for step in range(s.steps):
            if step in s.heldout_at:
                yield from self._heldout(step, 0.2)
            if (yield from self._batch(step)):
                return
        if s.steps in s.heldout_at:  # the final weights, after the last step
            yield from self._heldout(s.steps, 0.5)
        if s.end:
            yield ControlChanged(ts=self.now + 1, state=RunStatus.DONE)
            yield RunEnded(ts=self.now + 1, status=RunStatus.DONE, step=s.steps - 1)

    def _run_started(self) -> RunStarted:
        s = self.shape
        return RunStarted(
            ts=self.now,
            run_id=f"demo-{s.seed}",
            log_path=s.log_path,
            model_name="Qwen/Qwen3-4B-Instruct-2507",
            base_url="http://127.0.0.1:10613",
            renderer_name="qwen3",
            total_steps=s.steps,
            groups_per_batch=s.groups,
            group_size=s.group_size,
            tasks=self.tasks,
            config={"learning_rate": 1e-6, "loss_fn": "ppo", "api_key": "***"},
            training_mode=TrainingMode.SYNC if s.off_policy is None else TrainingMode.ASYNC,
            max_steps_off_policy=s.off_policy,
        )

    def _heldout(self, after_updates: int, delay: float) -> Iterator[Event]:
        rng = random.Random(f"{self.shape.seed}:{after_updates}")
        for event in heldout_evaluation(after_updates, self.now + delay, rng, captures=self.captures):
            yield event
            self.now = max(self.now, event.ts)

    def _batch(self, step: int) -> Generator[Event, None, bool]:
        """One step: its groups' events merged in time, then its training. True: the run ended."""
        s = self.shape
        batch = _Batch(step, start=self.now + 0.5)
        batch.end = batch.start
        self.weights = step
        picked = [self.tasks[(step * s.groups + g) % len(self.tasks)] for g in range(s.groups)]
        batch.clock.add(
            BatchStarted(
                ts=batch.start,
                step=step,
                groups=[{"group": g, "task": picked[g], "trials": s.group_size} for g in range(s.groups)],
            )
        )
        for g, task in enumerate(picked):
            g_start = self._group(batch, g, task)
            if batch.ended_run:
                break
            if self.rng.random() < 0.3:
                batch.clock.add(LogLine(ts=g_start + 1, level=LogLevel.INFO, message=f"group {g}: {task} running"))
        self._probes(batch)
        if step == s.pause_after:
            batch.clock.add(
                ControlChanged(ts=batch.start + 2.0, state=ControlState.PAUSING, reason="pause after the current batch")
            )
        if step == s.stop_after:
            batch.clock.add(
                ControlChanged(
                    ts=batch.start + 2.0, state=ControlState.STOPPING, reason="stop after the current batch is trained"
                )
            )
        events = list(batch.clock.drain())
        yield from events
        if batch.ended_run:
            if s.decision == Decision.ABORT:
                last = events[-1].ts
                yield RunEnded(ts=last + 1, status=RunStatus.ABORTED, step=step, message="aborted after CaptureLost")
                yield ControlChanged(ts=last + 1.01, state=RunStatus.FAILED, reason="aborted")
            return True
        return (yield from self._trained(batch))

    def _group(self, batch: _Batch, g: int, task: str) -> float:
        """A group's attempts (two when its error is retried); returns the last one's start."""
        s = self.shape
        attempts = 2 if (s.error_at == (batch.step, g) and s.decision == Decision.RETRY_GROUP) else 1
        g_start = batch.start + 0.05 * g
        for attempt in range(attempts):
            names = []
            for _ in range(s.group_size):
                self.trial_serial += 1
                names.append(f"{task}__{self.trial_serial:05d}")
            batch.clock.add(
                GroupStarted(
                    ts=g_start,
                    step=batch.step,
                    group=g,
                    task=task,
                    trials=names,
                    proxy_url=f"http://127.0.0.1:{40000 + g}",
                )
            )
            group = _Group(g, task, names, g_start, failing=s.error_at == (batch.step, g) and attempt == 0)
            group.end = g_start
            for i, name in enumerate(names):
                self._trial(batch, group, i, name)
            if group.failing:
                resumed = self._failed(batch, group)
                if resumed is None:
                    batch.ended_run = True
                    break
                g_start = resumed
                continue
            batch.clock.add(GroupEnded(ts=group.end + 0.01, step=batch.step, group=g, rewards=group.rewards, ok=True))
            batch.end = max(batch.end, group.end + 0.02)
            batch.trained.append(g)
        return g_start

    def _trial(self, batch: _Batch, group: _Group, i: int, name: str) -> None:
        """One trial's phases, turns and end (in a failing attempt: the second trial's capture is
        lost, the others are cancelled when the failure is raised). It is long because its events
        are written out in the order a trial lives them, most lines their fields."""
        rng, add = self.rng, batch.clock.add
        step, g, task = batch.step, group.index, group.task
        tdir = f"{self.shape.trials_dir}/{name}" if self.shape.trials_dir else None
        t = group.start + 0.01 * i
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.QUEUED, task=task))
        t += rng.uniform(0.2, 1.5)
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.ENVIRONMENT, task=task, trial_dir=tdir))
        t += rng.uniform(0.5, 2.0)
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT_SETUP, task=task))
        t += rng.uniform(0.3, 1.0)
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT, task=task))
        t, n_turns, out_tokens = self._turns(batch, group, name, t)
        if group.failing and i == 1:
            group.fail_ts = fail_ts = t + 0.5
            lost = "capture write failed: No space left on device"
            add(CaptureLost(ts=fail_ts - 0.1, step=step, group=g, trial=name, error=lost))
            add(
                TrialEnded(
                    ts=fail_ts,
                    step=step,
                    group=g,
                    trial=name,
                    outcome=TrialOutcome.AGENT_ERROR,
                    scored=False,
                    reward=None,
                    turns=n_turns,
                    output_tokens=out_tokens,
                    trial_dir=tdir,
                    timings={"agent": t - group.start},
                    exception_type=FailureKind.CAPTURE_LOST,
                    exception_message=lost,
                )
            )
            group.rewards.append(None)
            group.end = max(group.end, fail_ts)
            return
        if group.failing:
            return  # cancelled when the failure is raised
        t += rng.uniform(0.2, 0.6)
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.VERIFYING, task=task))
        t += rng.uniform(0.5, 2.0)
        reward = 1.0 if rng.random() < TASKS[task] else 0.0
        outcome = TrialOutcome.SUBMITTED if rng.random() < 0.9 else TrialOutcome.TIME_LIMIT
        add(
            TrialEnded(
                ts=t,
                step=step,
                group=g,
                trial=name,
                outcome=outcome,
                scored=True,
                reward=reward,
                turns=n_turns,
                output_tokens=out_tokens,
                trial_dir=tdir,
                timings={"environment": 1.2, "agent_setup": 0.6, "agent": t - group.start - 3, "verifier": 1.0},
                weights=[self.weights],
            )
        )
        add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.DONE, task=task))
        group.rewards.append(reward)
        batch.rewards.append(reward)
        batch.turns += n_turns
        batch.tokens += out_tokens
        group.end = max(group.end, t)

    def _turns(self, batch: _Batch, group: _Group, name: str, t: float) -> tuple[float, int, int]:
        """A trial's agent turns through the proxy (some rejected); returns the time after them,
        their number and the output tokens captured."""
        s, rng = self.shape, self.rng
        n_turns = rng.randint(*s.turns)
        out_tokens = 0
        captured = 0
        for k in range(n_turns):
            t += rng.uniform(1.0, 6.0)
            rejected = rng.random() < 0.05
            otoks = 0 if rejected else rng.randint(40, 600)
            ptoks = 0 if rejected else 800 + s.prompt_step * k + rng.randint(0, 200)
            reply, messages = self._turn_text(group.task, k) if s.text and not rejected else (None, None)
            request = ProxyRequest(
                ts=t,
                step=batch.step,
                group=group.index,
                trial=name,
                api="openai",
                stream=False,
                status=400 if rejected else 200,
                captured=not rejected,
                turn=None if rejected else captured,
                prompt_tokens=ptoks,
                output_tokens=otoks,
                stop_reason=None if rejected else "stop",
                sample_ms=None if rejected else otoks * 4.0,
                total_ms=5.0 if rejected else otoks * 4.0 + 12,
                error="prompt + max_tokens exceed the context window" if rejected else None,
                weights=self.weights,
            )
            batch.clock.add(request)
            if self.captures is not None and not rejected:
                self.captures.add(request, messages, _reply(reply, k) if reply is not None else None)
            if not rejected:
                captured += 1
                out_tokens += otoks
        return t, n_turns, out_tokens

    def _turn_text(self, task: str, k: int) -> tuple[str, list[dict[str, str]]]:
        """The k-th turn's reply (sometimes with hostile text) and the messages it answered."""
        s = self.shape
        reply = REPLIES[k % len(REPLIES)]
        if s.hostile and self.rng.random() < 0.3:
            reply = reply + "\n" + HOSTILE[self.rng.randrange(len(HOSTILE))]
        printed = (
            s.tool_output(k)
            if s.tool_output is not None
            else f"<returncode>0</returncode>\n<output>step {k} output\n"
            f"{HOSTILE[k % len(HOSTILE)] if s.hostile else ''}</output>"
        )
        content = f"Task {task}: make the tests pass." if k == 0 else printed
        messages = [{"role": "user", "content": content}]
        if k == 0:
            messages.insert(0, {"role": "system", "content": SYSTEM})
        return reply, messages

    def _failed(self, batch: _Batch, group: _Group) -> float | None:
        """As the runner: the failure cancels the group's other trials (they send no trial.ended),
        the group ends unscored, then the error asks for a decision. Returns when the retried
        attempt starts; None when the stream ends here (no decision yet, or an abort)."""
        s, clock, step, g = self.shape, batch.clock, batch.step, group.index
        fail_ts = group.fail_ts
        assert fail_ts is not None  # set at the group's second trial
        doomed = set(group.names)
        clock.heap = [
            item for item in clock.heap if not (getattr(item[2], "trial", None) in doomed and item[0] > fail_ts)
        ]
        heapq.heapify(clock.heap)
        clock.add(
            GroupEnded(
                ts=fail_ts + 0.1,
                step=step,
                group=g,
                rewards=[None] * len(group.names),
                ok=False,
                error=f"trial {group.names[1]}: CaptureLost: capture write failed",
            )
        )
        clock.add(
            ErrorRaised(
                ts=fail_ts + 0.2,
                step=step,
                group=g,
                trial=group.names[1],
                exception_type=FailureKind.CAPTURE_LOST,
                message="capture write failed: No space left on device",
                trial_dir=f"{s.trials_dir}/{group.names[1]}" if s.trials_dir else None,
                decision_needed=True,
            )
        )
        clock.add(
            ControlChanged(
                ts=fail_ts + 0.21,
                state=ControlState.AWAITING_DECISION,
                reason=f"an error needs a decision: {Decision.ABORT} or {Decision.RETRY_GROUP}",
            )
        )
        if s.decision is None:
            return None
        clock.add(DecisionMade(ts=fail_ts + 4.0, step=step, group=g, decision=s.decision, by=DecisionBy.CONSOLE))
        if s.decision == Decision.ABORT:
            clock.add(ControlChanged(ts=fail_ts + 4.01, state=ControlState.ABORTING, reason="abort requested"))
            return None
        clock.add(ControlChanged(ts=fail_ts + 4.01, state=ControlState.RUNNING))
        return fail_ts + 4.1

    def _probes(self, batch: _Batch) -> None:
        """Gateway probes every 5 s through the batch."""
        probe = batch.start
        horizon = max(batch.end, batch.start + 1)
        while probe < horizon:
            ok = self.rng.random() > 0.03
            batch.clock.add(
                GatewayHealth(
                    ts=probe,
                    base_url="http://127.0.0.1:10613",
                    ok=ok,
                    latency_ms=self.rng.uniform(3, 25) if ok else None,
                    error=None if ok else "connection refused",
                    sampler_path=self.sampler,
                )
            )
            probe += 5.0

    def _trained(self, batch: _Batch) -> Generator[Event, None, bool]:
        """The batch's training: its metrics, a checkpoint every other step, then a stop or a
        pause when asked for. True: the run stopped here."""
        s, step = self.shape, batch.step
        self.now = batch.end
        yield BatchEnded(ts=self.now, step=step)
        for g in batch.trained:
            yield GroupTrained(ts=self.now, step=step, group=g, update=step, weights=[step])
        yield TrainingStarted(ts=self.now + 0.01, update=step)
        self.now += self.rng.uniform(3, 8)  # training
        metrics = _metrics(step, s.steps, batch.rewards, batch.turns, batch.tokens, self.now - batch.start, self.rng)
        yield StepMetrics(ts=self.now, step=step, metrics=metrics)
        self.sampler = f"tinker://demo-{s.seed}/sampler_weights/{step + 1:06d}"
        if (step + 1) % 2 == 0 or step == s.stop_after:
            yield CheckpointSaved(
                ts=self.now + 0.5,
                step=step,
                name=f"{step + 1:06d}",
                state_path=f"tinker://demo-{s.seed}/weights/{step + 1:06d}",
                sampler_path=self.sampler,
            )
        if step == s.stop_after:
            yield ControlChanged(ts=self.now + 1, state=RunStatus.DONE, reason="stopped")
            yield RunEnded(ts=self.now + 1, status=RunStatus.STOPPED, step=step)
            return True
        if step == s.pause_after:
            yield ControlChanged(ts=self.now + 0.6, state=ControlState.PAUSED, reason="paused after the batch")
            self.now += 30
            yield ControlChanged(ts=self.now, state=ControlState.RUNNING)
        return False


@dataclass
class _Flight:
    """An off-policy group from its start to its return: the weights that sampled it, its rewards."""

    step: int
    group: int
    task: str
    weights: int
    start: float
    end: float
    rewards: list[float | None]
    trials: int
    turns: int = 0
    tokens: int = 0


class _OffPolicy:
    """The off-policy mode played on a ``_Player``'s stream and trial makers: ``1.5 × groups`` samplers
    each take the next group drawn as soon as their last returned, with the weights of the update
    current then; the trainer takes the first ``groups`` groups returned (a group whose weights lag
    by more than max_steps_off_policy is dropped as stale, as the cookbook does) and trains for a
    few seconds; then the next update's weights sample the groups started from there on. A slow
    sandbox holds some groups back, so that staleness reaches the limit and a group or two passes
    it. When the last update is trained, the groups still waiting are dropped (unfinished)."""

    def __init__(self, player: _Player) -> None:
        self.p = player
        s = player.shape
        assert s.off_policy is not None
        self.limit = s.off_policy
        self.clock = _Clock()
        self.update = 0
        self.drawn = 0  # groups drawn so far, in the dataset's order
        self.opened: set[int] = set()  # steps whose batch.started is out
        self.batches: dict[int, _Batch] = {}

    def events(self) -> Iterator[Event]:
        p, s = self.p, self.p.shape
        yield p._run_started()
        yield OffPolicyLimit(ts=p.now, max_steps_off_policy=self.limit, from_update=0, by="config")
        yield ControlChanged(ts=p.now, state=ControlState.RUNNING)
        now = p.now + 0.5
        start = now
        flights: list[_Flight] = [self._launch(now + 0.05 * k) for k in range(s.groups + s.groups // 2)]
        returned: list[_Flight] = []
        while self.update < s.steps:
            # Groups return until enough wait for an update (each sampler starting the next group).
            while len(returned) < s.groups and flights:
                flight = min(flights, key=lambda f: f.end)
                flights.remove(flight)
                now = max(now, flight.end)
                if self.update - flight.weights > self.limit:  # stale on return: dropped at once
                    self._drop(flight, DropReason.STALE, now)
                else:
                    returned.append(flight)
                if len(returned) + len(flights) <= (s.steps - self.update) * s.groups:  # one spare at most
                    flights.append(self._launch(now + 0.1))
            if len(returned) < s.groups:
                break  # nothing left to sample: the run ends short of its updates
            now = self._train(returned[: s.groups], now, start)
            del returned[: s.groups]
            self.update += 1
            p.weights = self.update
            if s.lower_at is not None and s.lower_at[0] == self.update:
                self.limit = s.lower_at[1]
                self.clock.add(
                    OffPolicyLimit(
                        ts=now + 0.02, max_steps_off_policy=self.limit, from_update=self.update, by="console"
                    )
                )
            for flight in [f for f in returned if self.update - f.weights > self.limit]:
                returned.remove(flight)
                self._drop(flight, DropReason.STALE, now + 0.03)
        end = max([now, *(f.end for f in flights)]) + 0.5
        for flight in flights:  # the last ones sampled return; no update takes them
            returned.append(flight)
        for flight in returned:
            self._drop(flight, DropReason.UNFINISHED, end)
        self._probes(start, end)
        yield from self.clock.drain()
        p.now = end
        if s.end:
            yield ControlChanged(ts=end + 1, state=RunStatus.DONE)
            yield RunEnded(ts=end + 1, status=RunStatus.DONE, step=self.update - 1)

    def _launch(self, at: float) -> _Flight:
        """The next group drawn starts at ``at`` with the weights current then."""
        p, s = self.p, self.p.shape
        step, g = divmod(self.drawn, s.groups)
        self.drawn += 1
        task = p.tasks[(step * s.groups + g) % len(p.tasks)]
        batch = self.batches.get(step)
        if batch is None:
            batch = self.batches[step] = _Batch(step, start=at, clock=self.clock)
        if step not in self.opened:
            self.opened.add(step)
            picked = [p.tasks[(step * s.groups + k) % len(p.tasks)] for k in range(s.groups)]
            self.clock.add(
                BatchStarted(
                    ts=at,
                    step=step,
                    groups=[{"group": k, "task": picked[k], "trials": s.group_size} for k in range(s.groups)],
                )
            )
        names = []
        for _ in range(s.group_size):
            p.trial_serial += 1
            names.append(f"{task}__{p.trial_serial:05d}")
        self.clock.add(
            GroupStarted(ts=at, step=step, group=g, task=task, trials=names, proxy_url=f"http://127.0.0.1:{40000 + g}")
        )
        # Now and then a group waits for a sandbox a while: it returns an update or two later.
        delay = 12.0 if self.drawn % 9 == 4 else 0.0
        group = _Group(g, task, names, at + delay, failing=False)
        group.end = at
        turns, tokens = batch.turns, batch.tokens
        for i, name in enumerate(names):
            p._trial(batch, group, i, name)
        self.clock.add(GroupEnded(ts=group.end + 0.01, step=step, group=g, rewards=group.rewards, ok=True))
        return _Flight(
            step,
            g,
            task,
            p.weights,
            at,
            group.end + 0.01,
            list(group.rewards),
            len(names),
            batch.turns - turns,
            batch.tokens - tokens,
        )

    def _train(self, taken: list[_Flight], now: float, start: float) -> float:
        """One update over ``taken``: its groups trained, its training, metrics and checkpoint."""
        p, s, add = self.p, self.p.shape, self.clock.add
        for flight in taken:
            add(
                GroupTrained(ts=now, step=flight.step, group=flight.group, update=self.update, weights=[flight.weights])
            )
        add(TrainingStarted(ts=now + 0.01, update=self.update))
        now += p.rng.uniform(3, 8)
        rewards = [r for f in taken for r in f.rewards if r is not None]
        turns, tokens = sum(f.turns for f in taken), sum(f.tokens for f in taken)
        add(
            StepMetrics(
                ts=now,
                step=self.update,
                metrics=_metrics(self.update, s.steps, rewards, turns, tokens, now - start, p.rng),
            )
        )
        add(BatchEnded(ts=now, step=self.update))
        p.sampler = f"tinker://demo-{s.seed}/sampler_weights/{self.update + 1:06d}"
        if (self.update + 1) % 2 == 0:
            add(
                CheckpointSaved(
                    ts=now + 0.5,
                    step=self.update,
                    name=f"{self.update + 1:06d}",
                    state_path=f"tinker://demo-{s.seed}/weights/{self.update + 1:06d}",
                    sampler_path=p.sampler,
                )
            )
        return now + 0.01

    def _drop(self, flight: _Flight, reason: DropReason, at: float) -> None:
        self.clock.add(
            GroupDropped(
                ts=at,
                step=flight.step,
                group=flight.group,
                reason=reason,
                weights=[flight.weights],
                update=self.update,
                trials=flight.trials,
                sandbox_seconds=round(flight.trials * (flight.end - flight.start), 3),
                datums=flight.trials,
            )
        )

    def _probes(self, start: float, end: float) -> None:
        probe = start
        while probe < end:
            ok = self.p.rng.random() > 0.03
            self.clock.add(
                GatewayHealth(
                    ts=probe,
                    base_url="http://127.0.0.1:10613",
                    ok=ok,
                    latency_ms=self.p.rng.uniform(3, 25) if ok else None,
                    error=None if ok else "connection refused",
                    sampler_path=self.p.sampler,
                )
            )
            probe += 5.0


def write_jsonl(events, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for event in events:
            handle.write(event.to_json() + "\n")
    return path


def flood(n: int, *, seed: int = 1) -> Iterator[Event]:
    """At least ``n`` events of a long synthetic run (for the benchmark and flood tests)."""
    count = 0
    steps = max(3, n // 500 + 2)
    for event in synthetic_run(steps=steps, groups=8, group_size=8, seed=seed, turns=(4, 12), end=True):
        yield event
        count += 1
        if count >= n:
            return


async def play(
    bus,
    control,
    events: list[Event],
    *,
    speed: float = float("inf"),
    retime: bool = True,
    captures: SyntheticCaptures | None = None,
) -> RunStatus:
    """Publish a synthetic run on ``bus`` as a runner would, obeying ``control`` (a RunControl):
    batches start only past ``control.batch_boundary()`` (pause/stop), an error needing a
    decision waits on ``control.ask`` (abort ends the run), abort ends it at once. Control and
    decision events in ``events`` are skipped: the RunControl emits its own. ``speed``:
    synthetic seconds per real second (inf: as fast as possible, yielding to the loop).
    ``captures``: each captured turn's line is written just before its event, as the proxy does.
    Returns the end status (done | stopped | aborted)."""
    import asyncio
    import dataclasses
    import time as _time

    first = events[0].ts if events else 0.0
    started = _time.monotonic()
    step = 0
    aborted = False
    for n, event in enumerate(events):
        if control.abort_requested.is_set():
            break
        if isinstance(event, (ControlChanged, DecisionMade, RunEnded)):
            continue
        if isinstance(event, BatchStarted):
            waited = _time.monotonic()
            if not await control.batch_boundary():
                break
            started += _time.monotonic() - waited  # time paused does not count
            step = event.step
        if speed != float("inf"):
            delay = (event.ts - first) / speed - (_time.monotonic() - started)
            if delay > 0:
                await asyncio.sleep(delay)
        elif n % 50 == 0:
            await asyncio.sleep(0)
        if captures is not None:
            _write_capture(captures, event)
        bus.publish(dataclasses.replace(event, ts=_time.time()) if retime else event)
        if isinstance(event, ErrorRaised) and event.decision_needed:
            waited = _time.monotonic()
            choice = await control.ask(event.step, event.group, default=Decision.ABORT, timeout=None)
            started += _time.monotonic() - waited
            if choice == Decision.ABORT:
                aborted = True
                break
    return _end_played_run(bus, control, step, aborted)


def _write_capture(captures: SyntheticCaptures, event: Event) -> None:
    """The capture line of a model call's event (a held-out one's too), if it has one pending."""
    if isinstance(event, ProxyRequest):
        captures.write(event)
    elif isinstance(event, HeldOutEvent):
        inner = event.unwrap()
        if isinstance(inner, ProxyRequest):
            captures.write(inner)


def _end_played_run(bus, control, step: int, aborted: bool) -> RunStatus:
    """How the played run ended (aborted, stopped with a checkpoint, or done), said on ``bus``."""
    if aborted or control.abort_requested.is_set():
        status = RunStatus.ABORTED
    elif control.stop_requested:
        status = RunStatus.STOPPED
        bus.publish(CheckpointSaved(step=step, name=f"{step + 1:06d}", state_path=None, sampler_path=None))
    else:
        status = RunStatus.DONE
    control.finish(RunStatus.FAILED if status == RunStatus.ABORTED else RunStatus.DONE, status)
    bus.publish(RunEnded(status=status, step=step))
    return status


def record_run(log_path: str | Path, **kwargs) -> list[Event]:
    """A synthetic run recorded in a run folder as a real one is: ``events.jsonl`` and a capture
    file per trial attempt with its turns' text. Returns the events."""
    captures = SyntheticCaptures(log_path)
    events = list(synthetic_run(log_path=str(log_path), captures=captures, **kwargs))
    write_jsonl(events, RunFolder(log_path).events)
    captures.write_all()
    return events
