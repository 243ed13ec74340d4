"""One group's trials side by side: per trial its reward, outcome, turns, tokens and advantage,
and per captured turn the action it took, aligned by turn index, with the first turn where the
trials' actions differ. Plain Python (no Textual, no files): the group screen renders what is
built here from the records ``tbconsole.ui.data.captures.GroupCaptures`` reads.

A turn's action is what the agent did with the reply: its first tool call (name and arguments),
else, for agents that write their command in the text (mini-swe-agent: a fenced ``bash`` or
``mswea_bash_command`` block), that command, else the reply's first line. Captures written before
the reply's text was recorded hold only tokens: a decoder turns them back into text.

Advantages follow the cookbook (``tinker_cookbook.rl.data_processing.compute_advantages``): a
trial's reward less its group's mean reward. A group is trained only when every trial was scored
(one that was not fails the whole group), so then no trial gets one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tbconsole.record.capturefile import CaptureRecord
from tbconsole.state import GroupState, TrialState

Decode = Callable[[tuple[int, ...]], str]

# A fenced block whose language says shell (or none): the command of a text-based agent.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)
SHELL_FENCES = {"", "bash", "sh", "shell", "console", "zsh", "mswea_bash_command"}
ACTION_LIMIT = 2000  # characters kept of one action


@dataclass(frozen=True)
class Action:
    """What one turn did. ``kind``: tool (a tool call), command (a shell block in the text),
    text (the reply's first line), empty (nothing said)."""

    turn: int
    kind: str
    text: str
    decoded: bool = False  # read back from tokens (the capture had no text)

    @property
    def key(self) -> str:
        """What is compared between trials: the action with its whitespace collapsed."""
        return f"{self.kind}:{' '.join(self.text.split())}"


def _compact_arguments(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments.strip()
    if isinstance(value, dict) and len(value) == 1:  # {"command": "ls"}: the value says it all
        only = next(iter(value.values()))
        if isinstance(only, str):
            return only
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shell_command(text: str) -> str | None:
    """The first shell-fenced block's body, or None."""
    for match in _FENCE.finditer(text):
        if match.group(1).lower() in SHELL_FENCES and match.group(2).strip():
            return match.group(2).strip()
    return None


def action_from_text(turn: int, text: str, *, decoded: bool = False) -> Action:
    command = shell_command(text)
    if command is not None:
        return Action(turn, "command", command[:ACTION_LIMIT], decoded)
    for line in text.splitlines():
        if line.strip():
            return Action(turn, "text", line.strip()[:ACTION_LIMIT], decoded)
    return Action(turn, "empty", "", decoded)


def action_of(record: CaptureRecord, decode: Decode | None = None) -> Action:
    reply = record.reply
    if reply is None:
        text = decode(record.output) if decode is not None else ""
        return action_from_text(record.turn, text, decoded=True)
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return Action(record.turn, "tool", f"{call.name} {_compact_arguments(call.arguments)}"[:ACTION_LIMIT])
    action = action_from_text(record.turn, reply.text)
    if action.kind == "empty" and reply.reasoning:  # only reasoning, no answer: say so
        return Action(record.turn, "empty", "")
    return action


@dataclass
class TrialColumn:
    trial: str
    index: int  # position in its group
    task: str
    outcome: str | None
    scored: bool | None
    reward: float | None
    turns: int
    tokens: int
    running: bool  # still going: more turns may come
    cancelled: bool
    actions: list[Action] = field(default_factory=list)
    advantage: float | None = None

    @property
    def not_scored(self) -> bool:
        return self.cancelled or (self.outcome is not None and not self.scored)


@dataclass
class GroupComparison:
    step: int
    group: int
    task: str
    columns: list[TrialColumn]
    divergence: int | None  # index into the aligned turns of the first difference (None: none seen)
    advantage_note: str
    decoded: bool = False  # some actions were read back from tokens

    @property
    def depth(self) -> int:
        """Rows of aligned turns: the longest trial's."""
        return max((len(c.actions) for c in self.columns), default=0)


def first_divergence(columns: list[TrialColumn]) -> int | None:
    """The first turn index where the trials' actions differ. A trial that ended with fewer turns
    differs from one that goes on; a trial still running that has not reached the index yet is not
    known to differ (its turn may still come)."""
    if len(columns) < 2:
        return None
    depth = max((len(c.actions) for c in columns), default=0)
    for i in range(depth):
        keys = {c.actions[i].key for c in columns if i < len(c.actions)}
        if len(keys) > 1:
            return i
        short = [c for c in columns if i >= len(c.actions)]
        if any(c.running for c in short):
            return None  # the rest is not known yet
        if short:
            return i
    return None


def advantages(columns: list[TrialColumn]) -> str:
    """Fill each column's advantage as the cookbook computes it; return a note on what they are."""
    for c in columns:
        c.advantage = None
    if not columns:
        return "no trials"
    unscored = [c for c in columns if c.not_scored]
    if unscored:
        which = ", ".join(f"trial {c.index + 1}" for c in unscored)
        return f"not trained: {which} not scored (a trial that is not scored fails its group)"
    if any(c.reward is None for c in columns):
        waiting = sum(1 for c in columns if c.reward is None)
        return f"advantages when every trial is scored ({waiting} to go)"
    mean = sum(c.reward or 0.0 for c in columns) / len(columns)
    for c in columns:
        c.advantage = (c.reward or 0.0) - mean
    if all(abs(c.advantage or 0.0) < 1e-12 for c in columns):
        return f"advantage = reward − group mean {mean:g}: all rewards equal, the group trains nothing"
    return f"advantage = reward − group mean {mean:g}"


def actions_of(records: Iterable[CaptureRecord], decode: Decode | None = None) -> list[Action]:
    """A trial's actions in turn order."""
    return [action_of(r, decode) for r in sorted(records, key=lambda r: r.turn)]


def compare_group(
    group: GroupState, trials: dict[str, TrialState], actions: dict[str, list[Action]]
) -> GroupComparison:
    """The side-by-side of ``group`` from the state's trials and each trial's actions
    (``actions_of`` its capture records)."""
    columns: list[TrialColumn] = []
    decoded = False
    for index, trial_id in enumerate(group.trials):
        t = trials.get(trial_id)
        reward = t.reward if t is not None else None
        if reward is None and group.rewards is not None and index < len(group.rewards):
            reward = group.rewards[index]
        acts = actions.get(trial_id, [])
        decoded = decoded or any(a.decoded for a in acts)
        columns.append(
            TrialColumn(
                trial=trial_id,
                index=t.index if t is not None else index,
                task=t.task if t is not None else group.task,
                outcome=t.outcome if t is not None else None,
                scored=t.scored if t is not None else None,
                reward=None if t is not None and t.scored is False else reward,
                turns=t.live_turns if t is not None else len(acts),
                tokens=t.live_tokens if t is not None else 0,
                running=t is not None and not (t.done or t.cancelled),
                cancelled=t is not None and t.cancelled,
                actions=list(acts),
            )
        )
    note = advantages(columns)
    return GroupComparison(
        step=group.step,
        group=group.group,
        task=group.task,
        columns=columns,
        divergence=first_divergence(columns),
        advantage_note=note,
        decoded=decoded,
    )
