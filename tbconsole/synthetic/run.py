"""A synthetic but realistic run, as an event stream: for tests, fixtures, `--demo-events` and
the console benchmark. Deterministic for a seed; timestamps start at ``t0`` (a fake clock).

It plays what the runner emits: a run start, gateway probes, batches of groups whose trials move
through Harbor's phases concurrently, proxy requests per agent turn (some rejected), rewards, the
cookbook's per-step metrics, checkpoints, a pause after a batch, and optionally an error that
needs a decision (then retry of the group) and a clean stop. The turns' text (hostile strings
included, to test that they stay plain text) goes where a real run puts it: into capture files,
through ``captures`` (``tbconsole.synthetic.captures``), never into the events.

(Over 400 lines: ``synthetic_run`` plays one run in time order from one clock and one set of
counters; cut into pieces, that state would travel between them.)
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from tbconsole.record.enums import ControlState, Decision, DecisionBy, FailureKind, LogLevel, RunStatus, TrialOutcome
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
    GroupEnded,
    GroupStarted,
    HeldOutEvent,
    LogLine,
    ProxyRequest,
    RunEnded,
    RunStarted,
    StepMetrics,
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
    clock = _Clock()
    step, rewards, end = after_updates, [], now

    def add(event: Event) -> None:
        clock.add(HeldOutEvent.wrap(event, after_updates))

    for g, (task, chance) in enumerate(HELDOUT_TASKS.items()):
        names = [trial_id(task, step, g, k) for k in range(group_size)]
        g_start = now + 0.05 * g
        add(GroupStarted(ts=g_start, step=step, group=g, task=task, trials=names, proxy_url="http://127.0.0.1:41000"))
        group_rewards: list[float | None] = []
        g_end = g_start
        for k, name in enumerate(names):
            t = g_start + 0.01 * k
            add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.QUEUED, task=task))
            t += rng.uniform(0.5, 2.0)
            add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT, task=task))
            n_turns = rng.randint(1, 3)
            out_tokens = 0
            for turn in range(n_turns):
                t += rng.uniform(1.0, 4.0)
                otoks = rng.randint(40, 300)
                request = ProxyRequest(
                    ts=t,
                    step=step,
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
                add(request)
                out_tokens += otoks
                if captures is not None:
                    content = f"Task {task}: make the tests pass." if turn == 0 else f"<output>step {turn}</output>"
                    captures.add(request, [{"role": "user", "content": content}], _reply(REPLIES[turn], turn))
                    pending = captures.pending.get((name, turn))
                    if pending is not None:  # the held-out proxy writes under the run folder's heldout/
                        pending.path = captures.folder.heldout.capture_file(step, g, name)
            t += rng.uniform(0.5, 1.5)
            reward = 1.0 if rng.random() < chance else 0.0
            add(
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
                    timings={"total": t - g_start},
                )
            )
            add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.DONE, task=task))
            group_rewards.append(reward)
            rewards.append(reward)
            g_end = max(g_end, t)
        add(GroupEnded(ts=g_end + 0.01, step=step, group=g, rewards=group_rewards, ok=True))
        end = max(end, g_end + 0.02)
    yield from clock.drain()
    mean = sum(rewards) / len(rewards)
    yield EvaluationEnded(ts=end, after_updates=after_updates, reward=mean, trials=len(rewards), failed_tasks=0)
    yield LogLine(
        ts=end,
        level=LogLevel.INFO,
        message=f"held-out after {after_updates} updates: reward {mean:.3f} over {len(rewards)} trials "
        f"of {len(HELDOUT_TASKS)} tasks",
    )


def synthetic_run(
    *,
    steps: int = 3,
    groups: int = 4,
    group_size: int = 4,
    seed: int = 0,
    t0: float = T0,
    turns: tuple[int, int] = (2, 6),
    error_at: tuple[int, int] | None = None,
    decision: str | None = Decision.RETRY_GROUP,
    pause_after: int | None = None,
    stop_after: int | None = None,
    hostile: bool = True,
    text: bool = True,
    end: bool = True,
    log_path: str = "/tmp/tbconsole-demo",
    trials_dir: str | None = None,
    captures: SyntheticCaptures | None = None,
    prompt_step: int = 400,
    tool_output: Callable[[int], str] | None = None,
    heldout_at: tuple[int, ...] = (),
) -> Iterator[Event]:
    """Yield a run's events in order. ``error_at=(step, group)`` raises an error needing a
    decision in that group (``decision`` None leaves it pending and ends the stream there);
    ``pause_after`` pauses after that step's batch for a while; ``stop_after`` stops cleanly
    after that step; ``end`` False leaves the run unfinished (a live run's file). ``captures``
    receives each captured turn's text (``text`` False: token-only lines, as older runs wrote):
    ``tool_output(k)`` what the k-th turn's command printed (None: one short line), while each
    turn's prompt grows by ``prompt_step`` tokens in its ``proxy.request``. ``heldout_at``: the
    numbers of updates after which a held-out evaluation runs, as the runner runs them (before
    that step's batch; ``steps``: after the last), its trials' events wrapped as held-out."""
    rng = random.Random(seed)
    tasks = list(TASKS)
    now = t0
    yield RunStarted(
        ts=now,
        run_id=f"demo-{seed}",
        log_path=log_path,
        model_name="Qwen/Qwen3-4B-Instruct-2507",
        base_url="http://127.0.0.1:10613",
        renderer_name="qwen3",
        total_steps=steps,
        groups_per_batch=groups,
        group_size=group_size,
        tasks=tasks,
        config={"learning_rate": 1e-6, "loss_fn": "ppo", "api_key": "***"},
    )
    yield ControlChanged(ts=now, state=ControlState.RUNNING)
    sampler = None
    trial_serial = 0
    for step in range(steps):
        if step in heldout_at:
            for event in heldout_evaluation(step, now + 0.2, random.Random(f"{seed}:{step}"), captures=captures):
                yield event
                now = max(now, event.ts)
        clock = _Clock()
        start = now + 0.5
        picked = [tasks[(step * groups + g) % len(tasks)] for g in range(groups)]
        clock.add(
            BatchStarted(
                ts=start,
                step=step,
                groups=[{"group": g, "task": picked[g], "trials": group_size} for g in range(groups)],
            )
        )
        batch_end = start
        all_rewards: list[float] = []
        total_turns = 0
        total_tokens = 0
        pending_end = False
        for g in range(groups):
            task = picked[g]
            attempts = 2 if (error_at == (step, g) and decision == Decision.RETRY_GROUP) else 1
            g_start = start + 0.05 * g
            for attempt in range(attempts):
                names = []
                for _ in range(group_size):
                    trial_serial += 1
                    names.append(f"{task}__{trial_serial:05d}")
                clock.add(
                    GroupStarted(
                        ts=g_start,
                        step=step,
                        group=g,
                        task=task,
                        trials=names,
                        proxy_url=f"http://127.0.0.1:{40000 + g}",
                    )
                )
                failing = error_at == (step, g) and attempt == 0
                rewards: list[float | None] = []
                g_end = g_start
                fail_ts = None
                for i, name in enumerate(names):
                    tdir = f"{trials_dir}/{name}" if trials_dir else None
                    t = g_start + 0.01 * i
                    clock.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.QUEUED, task=task))
                    t += rng.uniform(0.2, 1.5)
                    clock.add(
                        TrialPhaseChanged(
                            ts=t, step=step, group=g, trial=name, phase=Phase.ENVIRONMENT, task=task, trial_dir=tdir
                        )
                    )
                    t += rng.uniform(0.5, 2.0)
                    clock.add(
                        TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT_SETUP, task=task)
                    )
                    t += rng.uniform(0.3, 1.0)
                    clock.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.AGENT, task=task))
                    n_turns = rng.randint(*turns)
                    out_tokens = 0
                    captured = 0
                    for k in range(n_turns):
                        t += rng.uniform(1.0, 6.0)
                        rejected = rng.random() < 0.05
                        otoks = 0 if rejected else rng.randint(40, 600)
                        ptoks = 0 if rejected else 800 + prompt_step * k + rng.randint(0, 200)
                        reply = None
                        messages = None
                        if text and not rejected:
                            reply = REPLIES[k % len(REPLIES)]
                            if hostile and rng.random() < 0.3:
                                reply = reply + "\n" + HOSTILE[rng.randrange(len(HOSTILE))]
                            printed = (
                                tool_output(k)
                                if tool_output is not None
                                else f"<returncode>0</returncode>\n<output>step {k} output\n"
                                f"{HOSTILE[k % len(HOSTILE)] if hostile else ''}</output>"
                            )
                            content = f"Task {task}: make the tests pass." if k == 0 else printed
                            messages = [{"role": "user", "content": content}]
                            if k == 0:
                                messages.insert(0, {"role": "system", "content": SYSTEM})
                        request = ProxyRequest(
                            ts=t,
                            step=step,
                            group=g,
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
                        )
                        clock.add(request)
                        if captures is not None and not rejected:
                            captures.add(request, messages, _reply(reply, k) if reply is not None else None)
                        if not rejected:
                            captured += 1
                            out_tokens += otoks
                    if failing and i == 1:
                        fail_ts = t + 0.5
                        clock.add(
                            CaptureLost(
                                ts=fail_ts - 0.1,
                                step=step,
                                group=g,
                                trial=name,
                                error="capture write failed: No space left on device",
                            )
                        )
                        clock.add(
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
                                timings={"agent": t - g_start},
                                exception_type=FailureKind.CAPTURE_LOST,
                                exception_message="capture write failed: No space left on device",
                            )
                        )
                        rewards.append(None)
                        g_end = max(g_end, fail_ts)
                        continue
                    if failing:
                        continue  # cancelled when the failure is raised
                    t += rng.uniform(0.2, 0.6)
                    clock.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.VERIFYING, task=task))
                    t += rng.uniform(0.5, 2.0)
                    reward = 1.0 if rng.random() < TASKS[task] else 0.0
                    outcome = TrialOutcome.SUBMITTED if rng.random() < 0.9 else TrialOutcome.TIME_LIMIT
                    clock.add(
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
                            timings={"environment": 1.2, "agent_setup": 0.6, "agent": t - g_start - 3, "verifier": 1.0},
                        )
                    )
                    clock.add(TrialPhaseChanged(ts=t, step=step, group=g, trial=name, phase=Phase.DONE, task=task))
                    rewards.append(reward)
                    all_rewards.append(reward)
                    total_turns += n_turns
                    total_tokens += out_tokens
                    g_end = max(g_end, t)
                if failing:
                    assert fail_ts is not None  # set at the group's second trial
                    # As the runner: the failure cancels the group's other trials (they send no
                    # trial.ended), the group ends unscored, then the error asks for a decision.
                    doomed = set(names)
                    clock.heap = [
                        item
                        for item in clock.heap
                        if not (getattr(item[2], "trial", None) in doomed and item[0] > fail_ts)
                    ]
                    heapq.heapify(clock.heap)
                    clock.add(
                        GroupEnded(
                            ts=fail_ts + 0.1,
                            step=step,
                            group=g,
                            rewards=[None] * len(names),
                            ok=False,
                            error=f"trial {names[1]}: CaptureLost: capture write failed",
                        )
                    )
                    clock.add(
                        ErrorRaised(
                            ts=fail_ts + 0.2,
                            step=step,
                            group=g,
                            trial=names[1],
                            exception_type=FailureKind.CAPTURE_LOST,
                            message="capture write failed: No space left on device",
                            trial_dir=f"{trials_dir}/{names[1]}" if trials_dir else None,
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
                    if decision is None:
                        pending_end = True
                        break
                    clock.add(
                        DecisionMade(ts=fail_ts + 4.0, step=step, group=g, decision=decision, by=DecisionBy.CONSOLE)
                    )
                    if decision == Decision.ABORT:
                        clock.add(
                            ControlChanged(ts=fail_ts + 4.01, state=ControlState.ABORTING, reason="abort requested")
                        )
                        pending_end = True
                        break
                    clock.add(ControlChanged(ts=fail_ts + 4.01, state=ControlState.RUNNING))
                    g_start = fail_ts + 4.1
                    continue
                clock.add(GroupEnded(ts=g_end + 0.01, step=step, group=g, rewards=rewards, ok=True))
                batch_end = max(batch_end, g_end + 0.02)
            if pending_end:
                break
            if rng.random() < 0.3:
                clock.add(LogLine(ts=g_start + 1, level=LogLevel.INFO, message=f"group {g}: {task} running"))
        # gateway probes every 5 s through the batch
        probe = start
        horizon = max(batch_end, start + 1)
        while probe < horizon:
            ok = rng.random() > 0.03
            clock.add(
                GatewayHealth(
                    ts=probe,
                    base_url="http://127.0.0.1:10613",
                    ok=ok,
                    latency_ms=rng.uniform(3, 25) if ok else None,
                    error=None if ok else "connection refused",
                    sampler_path=sampler,
                )
            )
            probe += 5.0
        if step == pause_after:
            clock.add(
                ControlChanged(ts=start + 2.0, state=ControlState.PAUSING, reason="pause after the current batch")
            )
        if step == stop_after:
            clock.add(
                ControlChanged(
                    ts=start + 2.0, state=ControlState.STOPPING, reason="stop after the current batch is trained"
                )
            )
        events = list(clock.drain())
        yield from events
        if pending_end:
            if decision == Decision.ABORT:
                last = events[-1].ts
                yield RunEnded(ts=last + 1, status=RunStatus.ABORTED, step=step, message="aborted after CaptureLost")
                yield ControlChanged(ts=last + 1.01, state=RunStatus.FAILED, reason="aborted")
            return
        now = batch_end
        yield BatchEnded(ts=now, step=step)
        now += rng.uniform(3, 8)  # training
        yield StepMetrics(
            ts=now, step=step, metrics=_metrics(step, steps, all_rewards, total_turns, total_tokens, now - start, rng)
        )
        sampler = f"tinker://demo-{seed}/sampler_weights/{step + 1:06d}"
        if (step + 1) % 2 == 0 or step == stop_after:
            yield CheckpointSaved(
                ts=now + 0.5,
                step=step,
                name=f"{step + 1:06d}",
                state_path=f"tinker://demo-{seed}/weights/{step + 1:06d}",
                sampler_path=sampler,
            )
        if step == stop_after:
            yield ControlChanged(ts=now + 1, state=RunStatus.DONE, reason="stopped")
            yield RunEnded(ts=now + 1, status=RunStatus.STOPPED, step=step)
            return
        if step == pause_after:
            yield ControlChanged(ts=now + 0.6, state=ControlState.PAUSED, reason="paused after the batch")
            now += 30
            yield ControlChanged(ts=now, state=ControlState.RUNNING)
    if steps in heldout_at:  # the final weights, after the last step
        for event in heldout_evaluation(steps, now + 0.5, random.Random(f"{seed}:{steps}"), captures=captures):
            yield event
            now = max(now, event.ts)
    if end:
        yield ControlChanged(ts=now + 1, state=RunStatus.DONE)
        yield RunEnded(ts=now + 1, status=RunStatus.DONE, step=steps - 1)


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
        if captures is not None and isinstance(event, ProxyRequest):
            captures.write(event)
        elif captures is not None and isinstance(event, HeldOutEvent):
            inner = event.unwrap()
            if isinstance(inner, ProxyRequest):
                captures.write(inner)
        bus.publish(dataclasses.replace(event, ts=_time.time()) if retime else event)
        if isinstance(event, ErrorRaised) and event.decision_needed:
            waited = _time.monotonic()
            choice = await control.ask(event.step, event.group, default=Decision.ABORT, timeout=None)
            started += _time.monotonic() - waited
            if choice == Decision.ABORT:
                aborted = True
                break
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
