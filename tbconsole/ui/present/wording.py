"""How the console words a run's state: labels, the header's step and progress,
and the help text behind every metric and counter (tooltips and the `?` screen read it here).

Steps count from 0 everywhere (log lines, metrics, checkpoints, folders, the header): a count of
steps is written as one ("3/20 trained"), never as a step number.

Durations, counts, sizes and values are formatted by ``tbconsole.common.formatting`` (the one home
for what people read, ``format_*``), and imported from there.

Whether the runner of an attached run is still alive is not an event: the console reads the
runner's lease (``LeaseView``, None when nobody watches one) and the functions that word the
run's state take it next to the ``RunState``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from tbconsole.common.formatting import PROG, command_line, format_count, format_duration, format_value
from tbconsole.record.enums import ControlState, LogLevel, RunCondition, RunnerState, RunStatus, TrialPhase
from tbconsole.record.lease import LeaseView
from tbconsole.runs.runlist import last_reward, run_condition, steps_trained
from tbconsole.state import RunState
from tbconsole.state.model import Advisory
from tbconsole.ui.present.sanitize import one_line

PHASE_LABELS: dict[str, str] = {
    TrialPhase.QUEUED: "queued",
    TrialPhase.ENVIRONMENT: "env",
    TrialPhase.AGENT_SETUP: "setup",
    TrialPhase.AGENT: "agent",
    TrialPhase.VERIFYING: "verify",
    TrialPhase.DONE: "done",
}

STATUS_LABELS: dict[str, str] = {
    ControlState.RUNNING: "running",
    ControlState.PAUSING: "pausing after batch",
    ControlState.PAUSED: "paused",
    ControlState.STOPPING: "stopping",
    ControlState.ABORTING: "aborting",
    ControlState.AWAITING_DECISION: "awaiting decision",
    ControlState.WAITING: "waiting for run",
    RunStatus.DONE: "done",
    RunStatus.FAILED: "failed",
    RunStatus.STOPPED: "stopped",
    RunStatus.ABORTED: "aborted",
    RunnerState.DEAD: "dead",
    RunCondition.ENDED: "ended",
}


class MetricRow(NamedTuple):
    label: str
    keys: tuple[str, ...]  # metric keys in order of preference: the cookbook's names (metrics.jsonl) first
    help: str
    optional: bool = False  # shown only once a run reports it
    unit: str = ""  # "s": a duration (3m21s); "count": a count (12.3k); "": a plain value

    def shown(self, value: float | None) -> str:
        """The value as the panel shows it, with its unit."""
        if value is None:
            return "–"
        if self.unit == "s":
            return format_duration(value)
        if self.unit == "count":
            return format_count(value)
        return format_value(value)


METRIC_ROWS: tuple[MetricRow, ...] = (
    MetricRow(
        "KL v1",
        ("optim/kl_sample_train_v1",),
        "optim/kl_sample_train_v1: KL between the sampler's and the trainer's log-probs of the sampled "
        "tokens, first-order estimate v1 (mean of sampler minus trainer log-prob). Near 0: both see the "
        "same policy; growing: the samples are off-policy or the two disagree.",
    ),
    MetricRow(
        "KL v2",
        ("optim/kl_sample_train_v2",),
        "optim/kl_sample_train_v2: the same sampler-vs-trainer KL, second-order estimate v2 (half the mean "
        "squared log-prob difference; never negative).",
    ),
    MetricRow(
        "entropy",
        ("optim/entropy",),
        "optim/entropy: the sampling policy's entropy, estimated on the sampled tokens (minus their mean "
        "log-prob). Falling fast: the policy is collapsing onto few answers.",
    ),
    MetricRow(
        "loss",
        ("loss:sum", "loss:mean", "optim/loss", "train/loss", "loss"),
        "loss:sum: the training loss of the step's update (config.loss_fn, summed over tokens). Shown only "
        "when the run logs it.",
        optional=True,
    ),
    MetricRow(
        "grad norm",
        ("grad_norm:mean", "optim/grad_norm", "grad_norm"),
        "grad_norm:mean: norm of the gradient of the step's update, before clipping.",
    ),
    MetricRow("lr", ("optim/lr",), "optim/lr: the learning rate used for the step."),
    MetricRow(
        "tokens",
        ("env/all/total_ac_tokens", "env/all/ac_tokens_per_turn"),
        "env/all/total_ac_tokens: action (sampled output) tokens the step trained on, all trials.",
        unit="count",
    ),
    MetricRow(
        "step time",
        ("time/total", "time/step", "time/train"),
        "time/total: wall-clock time of the whole step: sampling the batch (the trials) and training.",
        unit="s",
    ),
    MetricRow(
        "KL ref",
        ("kl_policy_base",),
        "kl_policy_base: KL between the policy and the reference (base) model: how far training has "
        "drifted from it. Reported when config.kl_penalty_coef > 0.",
        optional=True,
    ),
    MetricRow(
        "held-out",
        ("eval/heldout/reward",),
        "eval/heldout/reward: mean reward of the current weights on the held-out tasks "
        "(harbor.eval_tasks_dir), never trained on; scored every config.eval_every steps and after the "
        "last.",
        optional=True,
    ),
)

GATEWAY_HELP = {
    "status": "The gateway's last health probe (GET /api/v1/healthz, every few seconds during the run) and how "
    "long ago it answered. Starting: it answers 503 while it loads its model; the run waits for it "
    "(gateway.start_timeout). Down for N, retrying: the groups in flight were cancelled unscored and run "
    "again once it answers, if within gateway.outage_limit. After the run ended (or its runner died) "
    "nobody probes it.",
    "probes": "Health probes sent during the run, how many of them failed, the last one's round-trip time and "
    "a sparkline of the last 60 (a failed probe: 0). Two failures in a row (four timeouts) mark the "
    "gateway down, which cancels the groups in flight.",
    "url": "The gateway's base URL (config.base_url).",
    "model": "The base model being trained.",
    "sampler": "The weights the capture proxy samples from: a saved sampler checkpoint, or the weights after "
    "N updates (the batch of step N samples the weights after N updates).",
    "error": "The last failed probe's error, and how long ago.",
}

CAPTURE_HELP = {
    "req": "Model calls the agents made through the capture proxy.",
    "capt": "Calls captured as training samples (tokens and log-probs written to the capture folder).",
    "prompt": "Prompt tokens of the captured calls.",
    "out": "Output (sampled) tokens of the captured calls: what is trained on.",
    "rej": "Calls the proxy refused (invalid request, prompt over the context window): not trained on.",
    "lost": "Sampled turns that could not be written: the trial fails (it cannot be trained on).",
    "batch / run": "Totals of the current batch's groups / of the whole run.",
    "trained": "The latest step's training cost: datums per trial (1 when each trial's turns train as one "
    "sequence) and token amplification, trained tokens ÷ the trials' final contexts (about 1×; each turn "
    "trained as a datum of its own makes it grow with the square of the turns). Why turns began new datums "
    "is in each turn's capture line (new_datum).",
}

HEADER_HELP = {
    "step": "The step being sampled or trained, counted from 0 as in the log, metrics, checkpoints and folders; "
    "then how many of the run's steps are trained.",
    "held-out evaluation": "The current weights are being scored on the held-out tasks (before every "
    "config.eval_every-th step, and after the last); its trials are not in the grid.",
    "ETA": "Time to the last step: the mean of the last five trained steps times the steps left.",
}

ADVISORY_HELP = {
    "strip": "Under the header while advisories are active: how many per severity and the newest one; for a "
    "while after the last one clears, a quiet line that says so. v opens them all.",
    "severity": "error: act now (it costs the run); warning: look before it does; info: worth knowing.",
    "threshold": "The rule's threshold that fired (as the run's options set it) and the value it measured.",
    "where": "What it concerns: a step, a group of it, a trial, a metric. Enter jumps there.",
    "age": "How long it has been active (a rule may raise it again with a new value: it stays one line).",
    "cleared": "Cleared ones stay listed, newest first, with what cleared them.",
}

GROUP_HELP = {
    "g": "On the trials grid: the selected trial's group side by side, one column per trial. Enter opens the "
    "cursor column's transcript; esc goes back.",
    "outcome · reward · turns · tokens": "Each trial's outcome, reward, model calls and output tokens (live while "
    "it runs).",
    "advantage": "What the trial is trained with: its reward less the group's mean reward (the cookbook's rule). "
    "A group with a trial that was not scored is not trained: then none has one.",
    "turn N": "The action each trial took at that turn: its first tool call (→), the shell command in its reply "
    "($), else the reply's first line. Turns where every trial did the same are dimmed; ◆ marks the first "
    "turn where they differ.",
}

FIND_HELP = {
    "f": "On the main screen: find a word or a regular expression in the transcripts of the current step's "
    "trials (ctrl+t: every step kept in memory), in replies, reasoning, tool calls and tool output.",
    "ctrl+r": "Regular expression or plain text (both ignore case). An invalid expression says why.",
    "results": "One line per text that matches: trial, step and group, turn, where (+N: more matches in that "
    "text), the text around the first match; enter opens the trial's transcript. Stops after 500 and says so.",
}

TIMELINE_HELP = {
    "w": "The timeline (waterfall) of the current step, or of the step being replayed: [ ] move between "
    "steps, esc goes back. Live, it reads on once a second.",
    "rows": "One row per trial (group·trial, how it ended): queued, environment, agent setup, the agent "
    "(each model call's sampling drawn solid inside it), verifier; then the training rows: the "
    "held-out evaluation and the cookbook's timing spans (assemble data, forward-backward, optim step, "
    "checkpoint, sampler refresh), or, without them, training from the last group's end to the "
    "step's metrics and the checkpoints saved.",
    "shares": "What the step's wall time went to: each moment is split evenly among what ran then (each "
    "trial's phase, training, evaluation), so parallel trials are not counted many times over. "
    "sampling: the sampler answering model calls; agent: the agents' own work between calls (their "
    "commands in the sandbox); sandboxes: starting environments and setting up agents; verifier: the "
    "tests; idle: nothing known ran (trials waiting for a slot).",
}

PIPELINE_HELP = {
    "P": "Sampling and training as a pipeline over the whole run (every mode; most telling off-policy): "
    "esc goes back, m lowers max_steps_off_policy (an off-policy run that this console commands).",
    "heading": "The training mode; max_steps_off_policy now, and who lowered it from which update; groups "
    "in flight (sampling), queued (returned, waiting for an update), trained and dropped (with the sandbox "
    "time they cost); the trainer's and the samplers' idle shares of the run's time (samplers: no group "
    "in flight); and how many updates old the trained groups' weights were (+0: the update's own).",
    "lanes": "On one time axis: how many groups were in flight and queued (the most in each column; the "
    "number: the most over the run), and each update's training, from its first forward-backward "
    "(training.started) to its metrics row.",
    "updates": "The newest updates: how long each trained, and its groups by staleness (+N: sampled with "
    "weights N updates older than the update that trained them); its training on the same axis.",
    "dropped": "Groups whose trials all ran but that no update trained: stale (their weights lagged by "
    "more than max_steps_off_policy), abandoned (the run stopped first) or unfinished (the run ended "
    "before they filled a batch). Their sandbox time counts as waste in the ledger (D).",
    "grid +N · drop · wait": "In the trials grid, after a group's task: +N, an update trained it on "
    "weights N updates old (shown where the run is not synchronous, or N > 0; a trial's cell shows +N too); "
    "drop, no update will; wait, it returned and waits for an update. A transcript's turns say which "
    "weights sampled them.",
}

TOKEN_HELP = {
    "k": "In a transcript: the turn's reply as its tokens, each coloured by the sampler's log-prob on a "
    "continuous scale (no tint: certain; towards the error colour: less likely; the legend shows the scale, "
    "ticks at p=.999 … .01, and the turn's least likely token, percentiles and mean).",
    "← → / ctrl+← ctrl+→ (b w) / ↑ ↓": "Move the cursor by token, by word, by line; home/end the first/last "
    "token; a click selects a token. The line below shows its id, text, logprob, p and rank (1: least likely).",
    "n / N": "The next / previous token in order of likelihood, from the least likely on (the view opens there).",
    "[ ]": "The previous / next captured turn of the trial; esc goes back.",
    "r": "Scale: absolute (the same colour means the same p in every turn) or stretched over this turn's range.",
    "loss mask · advantage": "Whether the trial's sampled tokens were trained on (mask 1) and why not (not "
    "scored, a failed or retried group, a constant group dropped by config.remove_constant_reward_groups, "
    "a held-out evaluation trial); the advantage is the trial's reward less its group's mean (the cookbook's "
    "rule), the same for every token of the trial.",
    "m · trainer logprob": "Where the run recorded them: the trainer's log-prob of each token in the step's "
    "update and its difference from the sampler's (the per-token view of optim/kl_sample_train_*); m colours "
    "the tokens by that difference.",
}

# Everything the `?` screen explains besides keys and cells: (title, [(name, text)]).
HELP_TABLES: tuple[tuple[str, list[tuple[str, str]]], ...] = (
    ("header", list(HEADER_HELP.items())),
    ("PPO metrics", [(row.label, row.help) for row in METRIC_ROWS]),
    ("gateway", list(GATEWAY_HELP.items())),
    ("captures", list(CAPTURE_HELP.items())),
    ("timeline (w)", list(TIMELINE_HELP.items())),
    ("pipeline (P)", list(PIPELINE_HELP.items())),
    ("group side by side (g)", list(GROUP_HELP.items())),
    ("find across trials (f)", list(FIND_HELP.items())),
    ("advisories (v)", list(ADVISORY_HELP.items())),
    ("token view (k in a transcript)", list(TOKEN_HELP.items())),
)


def runner_over(runner: LeaseView | None) -> bool:
    """The run's runner has died or ended: nothing moves any more and nothing can be controlled."""
    return runner is not None and runner.state in (RunnerState.DEAD, RunnerState.ENDED)


def shown_status(state: RunState, runner: LeaseView | None = None) -> str:
    """The state badge's state: how the run ended, else ``dead``/``ended`` for a runner that is
    no more, else the control state."""
    if runner is not None and runner_over(runner) and not state.finished:
        return run_condition(state, runner)
    return state.status


def status_label(state: RunState, runner: LeaseView | None = None) -> str:
    status = shown_status(state, runner)
    return STATUS_LABELS.get(status, status)


def probes_stopped(state: RunState, runner: LeaseView | None = None) -> str | None:
    """Why nobody probes the gateway any more (None: the run is going on)."""
    if state.finished:
        return "run ended"
    if runner is not None and runner_over(runner):
        return "runner gone" if runner.state is RunnerState.DEAD else "runner ended"
    return None


def resume_command(runner: LeaseView | None, log_path: Path) -> str:
    """The command that goes on with the run: the runner's own with ``config.log_path`` set to this
    folder (the recipe resumes from the folder's last checkpoint), or a hint without one."""
    folder = f"config.log_path={Path(log_path).resolve()}"
    if runner is None or not runner.command:
        return f"the run's command with {shlex.quote(folder)}"
    args = [a for a in runner.command if not a.startswith("config.log_path=")]
    if args and args[0] == PROG:  # the lease records our command by name: spelled as it works in a new shell
        return command_line(*args[1:], folder)
    return shlex.join([*args, folder])


def _checkpoint_text(state: RunState) -> str | None:
    last = state.checkpoints[-1] if state.checkpoints else None
    return f"checkpoint {last.name} at step {last.step}" if last is not None else None


def runner_notice(state: RunState, runner: LeaseView | None, log_path: Path) -> str | None:
    """The line under the header of an attached run that nobody runs any more: how to resume it
    (None while it runs, once it is done, and when no lease is watched)."""
    if runner is None or runner.state is RunnerState.NONE or state.end_status == RunStatus.DONE:
        return None
    if not runner_over(runner) and not (state.finished and runner.state is not RunnerState.LIVE):
        return None
    checkpoint = _checkpoint_text(state)
    return f"not running · resume: {resume_command(runner, log_path)}" + (
        f"  (goes on from {checkpoint})" if checkpoint else ""
    )


def exit_summary(state: RunState, runner: LeaseView, log_path: Path) -> str:
    """What the terminal shows when the console closes: the run, where it stands, and the
    command to come back to it (or to resume it, when nobody runs it any more)."""
    condition = run_condition(state, runner)
    parts = [runner.describe() if condition == RunnerState.DEAD else condition]
    parts.append(f"{steps_trained(state)}/{state.total_steps or '?'} trained")
    reward = last_reward(state)
    if reward is not None:
        parts.append(f"reward {format_value(reward)}")
    evaluation = state.last_evaluation
    if evaluation is not None and evaluation.reward is not None:
        parts.append(f"held-out {format_value(evaluation.reward)}")
    checkpoint = _checkpoint_text(state)
    if checkpoint:
        parts.append(checkpoint)
    attach = command_line("attach", Path(log_path))
    if condition in (RunCondition.LIVE, RunCondition.PAUSED):
        then = f"the run goes on; re-attach: {attach}"
    elif condition == RunCondition.UNKNOWN:
        then = f"re-attach: {attach}"
    elif condition == RunStatus.DONE:
        then = f"replay: {attach}"
    else:
        then = f"resume: {resume_command(runner, log_path)}"
    return f"{log_path}: {' · '.join(parts)}\n  {then}"


def progress_text(state: RunState, now: float) -> str:
    """The header's place in the run: ``step 3 · 3/20 trained`` (the step in flight, then the
    steps trained so far), or ``held-out evaluation 42s · 20/20 trained`` while it runs."""
    trained = f"{state.trained_steps}/{state.total_steps or '?'} trained"
    since = state.heldout_running_since()
    if since is not None:
        return f"held-out evaluation {format_duration(now - since)} · {trained}"
    return f"step {'–' if state.step is None else state.step} · {trained}"


def span_text(first: int, last: int) -> str:
    """``1–3``, or ``1`` for a range of one (never ``1–1``)."""
    return str(first) if first == last else f"{first}–{last}"


def counted_span(noun: str, first: int, last: int) -> str:
    """``turn 1`` or ``turns 1–3``: the noun in the plural only for a range of more than one."""
    return f"{noun} {first}" if first == last else f"{noun}s {first}–{last}"


def number_ranges(values: Iterable[int]) -> str:
    """``0–3, 5, 7–8``: every number of ``values``, runs of consecutive ones as ranges."""
    ordered = sorted(set(values))
    runs: list[tuple[int, int]] = []
    for v in ordered:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return ", ".join(span_text(lo, hi) for lo, hi in runs)


# -- groups with one reward -------------------------------------------------------------------


def _advise_options(state: RunState) -> dict | None:
    """The run's ``advise.*`` options as its run.started recorded them (None: a run without them)."""
    advise = state.config.get("advise")
    return advise if isinstance(advise, dict) else None


def solved_reward(state: RunState) -> float:
    """The reward that counts as solved: the run's ``advise.solved_reward``, else 1."""
    value = (_advise_options(state) or {}).get("solved_reward", 1.0)
    return float(value) if isinstance(value, (int, float)) else 1.0


def advises_on(state: RunState, rule: str) -> bool:
    """The run publishes ``rule``'s advisories: its options have the rule on, or one was seen. Then
    the console leaves that warning to the advisory stream instead of inventing its own."""
    if any(a.rule == rule for a in state.advisory_log):
        return True
    advise = _advise_options(state)
    if advise is None:
        return False
    off = advise.get("off") or ""
    return rule not in {name.strip() for name in str(off).split(",")}


def uniform_kind(reward: float, solved: float = 1.0) -> str:
    """What a group whose trials all got ``reward`` means: ``solved`` (learnt: success, not a
    problem), ``failed`` (out of reach) or ``same`` (one partial reward). None of them trains."""
    return "solved" if reward >= solved else "failed" if reward <= 0.0 else "same"


UNIFORM_FLAGS = {"solved": "✓all", "failed": "✗all", "same": "=all"}  # the grid's group flag
UNIFORM_WORDS = {"solved": "all solved", "failed": "all failed", "same": "all same"}


def uniform_groups(state: RunState, step: int | None) -> dict[str, int]:
    """How many of the step's groups got one reward, by ``uniform_kind`` (only kinds that have any)."""
    counts: dict[str, int] = {}
    solved = solved_reward(state)
    for g in state.batch_groups(step):
        reward = g.uniform_reward(state.trials)
        if reward is not None:
            kind = uniform_kind(reward, solved)
            counts[kind] = counts.get(kind, 0) + 1
    return counts


# -- advisories -------------------------------------------------------------------------------

_ERROR, _WARNING, _INFO = LogLevel.ERROR, LogLevel.WARNING, LogLevel.INFO
SEVERITY_ORDER: tuple[str, ...] = (_ERROR, _WARNING, _INFO)  # most severe first
SEVERITY_MARKS: dict[str, str] = {_ERROR: "✗", _WARNING: "⚠", _INFO: "•"}
SEVERITY_PLURALS: dict[str, str] = {_ERROR: "errors", _WARNING: "warnings", _INFO: "info"}
ADVISORY_FRESH_S = 60.0  # a raise older than this when it arrives is catch-up (attach), not news
ADVISORY_CLEARED_SHOWN_S = 120.0  # the strip says that the last advisory cleared, this long


def severity_rank(severity: str) -> int:
    """Sort key: errors first; a severity this console does not know counts as a warning."""
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else 1


def severity_mark(severity: str) -> str:
    return SEVERITY_MARKS.get(severity, "⚠")


def severity_count_label(severity: str, n: int) -> str:
    """``1 error``, ``2 warnings``, ``3 info``."""
    if n == 1:
        return f"1 {one_line(severity, 20)}"
    return f"{n} {SEVERITY_PLURALS.get(severity, one_line(severity, 20))}"


def sorted_active(state: RunState) -> list[Advisory]:
    """The active advisories, most severe first, then the most recently raised."""
    return sorted(state.advisories.values(), key=lambda a: (severity_rank(a.severity), -a.updated))


def advisory_where(a: Advisory) -> str:
    """``step 3 · group 2 · trial x`` / ``metric optim/entropy`` / ``run`` (as plain text)."""
    parts = []
    if a.step is not None:
        parts.append(f"step {a.step}")
    if a.group is not None:
        parts.append(f"group {a.group}")
    if a.trial:
        parts.append(f"trial {one_line(a.trial, 120)}")
    if a.metric:
        parts.append(f"metric {one_line(a.metric, 120)}")
    return " · ".join(parts) or "run"


def advisory_threshold(a: Advisory) -> str:
    """The threshold that fired and the value measured: ``no_signal_share >= 0.5 (0.75)``."""
    value = f" ({format_value(a.value)})" if a.value is not None else ""
    return f"{a.threshold or a.rule}{value}"


def advisory_age(a: Advisory, now: float) -> str:
    """Active: how long since it was first raised; cleared: how long since it cleared."""
    if a.cleared is not None:
        return f"cleared {format_duration(max(0.0, now - a.cleared))} ago"
    return f"{format_duration(max(0.0, now - a.raised))} ago"


def advisory_target(a: Advisory) -> str | None:
    """Where Enter jumps: ``trial``, ``group`` or ``metric`` (None: it concerns the whole run)."""
    if a.trial:
        return "trial"
    if a.group is not None and a.step is not None:
        return "group"
    if a.metric:
        return "metric"
    return None
