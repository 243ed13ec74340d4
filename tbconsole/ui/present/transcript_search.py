"""Find a string or a regular expression across a run's transcripts, in the capture files: the
model's replies (text, reasoning, tool calls) and what came back to it (tool output, and the
observations text-based agents get as user messages). Plain Python (no Textual).

The task prompt (system and first user message, the same for every trial of a task) is not
searched: it would match every trial. A text that matches is listed once, with its first match
and how many more it holds; the list stops after ``limit`` entries and says so.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tbconsole.record.capturefile import CaptureRecord
from tbconsole.state import RunState

MATCH_LIMIT = 500  # results listed: one per text (a reply, a tool output) that matches
PER_TEXT_COUNT = 1000  # matches counted in any one text (a log line repeated a million times)
SNIPPET_BEFORE = 30
SNIPPET_AFTER = 60


@dataclass(frozen=True)
class TrialRef:
    trial: str
    step: int
    group: int
    index: int  # position in its group
    task: str


@dataclass(frozen=True)
class Match:
    trial: TrialRef
    turn: int  # captured turn index
    where: str  # reply | reasoning | tool call | tool output | user
    snippet: str  # one line around the first match in this text
    start: int  # that match's span within the snippet
    end: int
    more: int = 0  # further matches in the same text


@dataclass
class SearchResult:
    query: str
    matches: list[Match] = field(default_factory=list)
    error: str | None = None  # the query could not be compiled
    truncated: bool = False  # stopped at the limit: there are more
    trials: int = 0  # trials searched
    turns: int = 0  # captured turns searched
    no_text: int = 0  # turns without text (older captures): not searchable

    @property
    def summary(self) -> str:
        if self.error:
            return self.error
        n = len(self.matches)
        hits = len({m.trial.trial for m in self.matches})
        more = "+" if self.truncated else ""
        out = f"{n}{more} result{'s' if n != 1 else ''} in {hits} trial{'s' if hits != 1 else ''}"
        out += f" (searched {self.turns} turns of {self.trials} trials)"
        if self.truncated:
            out += f"; stopped after {n}: narrow the search"
        if self.no_text:
            out += f"; {self.no_text} turns have no text (captured before text was recorded)"
        return out


def compile_query(query: str, regex: bool, ignore_case: bool = True) -> re.Pattern[str] | str:
    """The pattern, or the reason it is not one (an invalid regular expression)."""
    if not query:
        return "type something to find"
    flags = re.IGNORECASE if ignore_case else 0
    if not regex:
        return re.compile(re.escape(query), flags)
    try:
        return re.compile(query, flags)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"


def trials_to_search(state: RunState, all_steps: bool) -> list[TrialRef]:
    """The current step's trials, or those of every step the state keeps; in step, group,
    position order."""
    refs = [
        TrialRef(t.trial, t.step, t.group, t.index, t.task)
        for t in state.trials.values()
        if all_steps or t.step == state.step
    ]
    return sorted(refs, key=lambda r: (r.step, r.group, r.index, r.trial))


def searchable_texts(record: CaptureRecord) -> Iterator[tuple[str, str]]:
    """(where, text) for everything of one turn that is searched."""
    messages = record.messages
    if record.turn == 0 or record.restarted:  # the prompt again: only what follows the last reply
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=None)
        messages = messages[last + 1 :] if last is not None else ()
    for m in messages:
        if m.role == "tool":
            yield "tool output", m.content
        elif m.role == "user":
            yield "user", m.content
    reply = record.reply
    if reply is not None:
        if reply.reasoning:
            yield "reasoning", reply.reasoning
        if reply.text:
            yield "reply", reply.text
        for call in reply.tool_calls:
            yield "tool call", f"{call.name} {call.arguments}"


def snippet(text: str, start: int, end: int) -> tuple[str, int, int]:
    """One line around text[start:end], and the match's span within it."""
    lo = max(0, start - SNIPPET_BEFORE)
    hi = min(len(text), end + SNIPPET_AFTER)
    head = ("…" if lo > 0 else "") + text[lo:start]
    body = text[start:end]
    tail = text[end:hi] + ("…" if hi < len(text) else "")

    def flat(s: str) -> str:  # one character for one: spans stay where they were
        return s.replace("\n", "⏎").replace("\t", " ").replace("\r", " ")

    head, body, tail = flat(head), flat(body), flat(tail)
    return head + body + tail, len(head), len(head) + len(body)


def search_records(
    pattern: re.Pattern[str], ref: TrialRef, records: Iterable[CaptureRecord], result: SearchResult, limit: int
) -> bool:
    """Add the matches of one trial's records; False once the limit is reached."""
    for record in records:
        result.turns += 1
        if not record.has_text:
            result.no_text += 1
            continue
        for where, text in searchable_texts(record):
            found = [m for m in itertools.islice(pattern.finditer(text), PER_TEXT_COUNT) if m.end() > m.start()]
            if not found:  # (an empty match, as ``a*`` finds everywhere, is nothing worth listing)
                continue
            if len(result.matches) >= limit:
                result.truncated = True
                return False
            line, start, end = snippet(text, found[0].start(), found[0].end())
            result.matches.append(Match(ref, record.turn, where, line, start, end, more=len(found) - 1))
    return True
