"""A trial's transcript as a document: sections (instruction, one per turn, rejected requests,
verifier, agent logs), each a list of small pieces of styled plain text. No Textual here: the
view (``tbconsole.ui.widgets.transcript_view``) lays pieces out and renders only those on screen.

Where each part comes from, first found wins:

- a turn: its capture line (``tbconsole.record.capturefile``): the messages new since the previous
  turn (tool output, user text) and the reply (reasoning, text, tool calls). A line written
  before text was recorded has tokens only: the reply is decoded from them (``TokenDecoder``)
  and the messages come from Harbor's ATIF ``trajectory.json`` once the trial has written it;
- a rejected request (never captured): the proxy's event, kept in the reducer's ``Turn``;
- no capture file at all: the ATIF trajectory's steps;
- instruction, verifier output, rewards, exception, agent logs: the trial's files.

Every string from a model or a tool passes through ``sanitize.plain``: it is shown, never
interpreted. Long texts are cut into pieces of at most ``PIECE_LINES`` lines, so that drawing
the part of a 64 KB tool output that is on screen never wraps all of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tbconsole.common.formatting import format_seconds
from tbconsole.common.inert import strip_ansi
from tbconsole.record.capturefile import CaptureRecord, MessageText, ToolCallText
from tbconsole.state import TrialState, Turn
from tbconsole.ui.present.sanitize import one_line, plain
from tbconsole.ui.present.token_text import TokenDecoder
from tbconsole.ui.present.trial_outputs import AtifStep, TrialFiles

PIECE_LINES = 40  # source lines per piece of a long text
PIECE_CHARS = 4000  # characters per piece of a long text (a text may be one very long line)
TEXT_LIMIT = 64 * 1024  # characters shown of any one text

# A span's style names palette roles (primary, accent, success, warning, error, muted, fg) and
# Rich attributes (bold, italic): resolved when drawn, so a theme change needs no rebuild.
Span = tuple[str, str]


@dataclass(frozen=True)
class Piece:
    kind: str  # "text" | "rule" (a horizontal rule titled by its spans) | "gap" (a blank line)
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Section:
    key: str  # "instruction", "turn3", "request7", "atif4", "verifier", "agentlog"
    pieces: tuple[Piece, ...]
    turn: int | None = None  # the captured turn's index (for the token view)

    @property
    def is_turn(self) -> bool:
        return self.key.startswith(("turn", "atif", "request"))


GAP = Piece("gap")


def _size(piece: Piece) -> tuple[int, int]:
    return sum(len(t) for t, _ in piece.spans), sum(t.count("\n") for t, _ in piece.spans) + 1


def coalesce(pieces: Iterable[Piece]) -> tuple[Piece, ...]:
    """Neighbouring short texts as one piece: a label and its few lines are drawn in one go (each
    piece drawn costs a fixed overhead), while a long text stays cut into ``PIECE_LINES`` parts."""
    out: list[Piece] = []
    size = (0, 0)
    for piece in pieces:
        if piece.kind == "text" and out and out[-1].kind == "text":
            chars, lines = _size(piece)
            if size[0] + chars <= PIECE_CHARS and size[1] + lines <= PIECE_LINES:
                out[-1] = Piece("text", (*out[-1].spans, ("\n", ""), *piece.spans))
                size = (size[0] + chars + 1, size[1] + lines)
                continue
        out.append(piece)
        size = _size(piece) if piece.kind == "text" else (0, 0)
    return tuple(out)


def rule(*spans: Span) -> Piece:
    return Piece("rule", tuple(spans))


def line(*spans: Span) -> Piece:
    return Piece("text", tuple(spans))


def texts(value: str | None, style: str = "", limit: int = TEXT_LIMIT, terminal: bool = False) -> list[Piece]:
    """A model's or tool's text as pieces of plain text (cut at ``limit`` characters).
    ``terminal``: a program's output meant for a terminal (an agent's log, the verifier's): its
    colour and cursor codes are dropped. A model's text keeps them, shown as ␛: it is what the
    model saw or wrote."""
    value = strip_ansi(value or "") if terminal else value
    s = plain(value or "", limit).rstrip("\n")  # a file's last newline is no line of its own
    if not s:
        return []
    out: list[Piece] = []
    lines = s.split("\n")
    for start in range(0, len(lines), PIECE_LINES):
        chunk = "\n".join(lines[start : start + PIECE_LINES])
        for at in range(0, max(len(chunk), 1), PIECE_CHARS):
            out.append(Piece("text", ((chunk[at : at + PIECE_CHARS], style),)))
    return out


def _calls(calls: Iterable[ToolCallText | tuple[str, str]]) -> list[Piece]:
    out: list[Piece] = []
    for call in calls:
        name, args = (call.name, call.arguments) if isinstance(call, ToolCallText) else call
        out.append(line(("→ ", "accent"), (one_line(name, 80), "bold accent"), (" " + plain(args, 4000), "")))
    return out


def _message(m: MessageText) -> list[Piece]:
    if m.role == "tool":
        label = "tool output" + (f" · {one_line(m.name, 60)}" if m.name else "")
    else:
        label = one_line(m.role, 20)
    out = [line((f"{label} ›", "bold accent"))]
    out += texts(m.content)
    out += _calls(m.tool_calls)
    return out


@dataclass(frozen=True)
class Options:
    """What changes how turns are drawn, besides their text."""

    logprobs: bool = False  # colour the reply's tokens by their probability
    decoder: TokenDecoder | None = None  # for lines without text, and for ``logprobs``


def _token_spans(record: CaptureRecord, decoder: TokenDecoder) -> list[Piece]:
    spans: list[Span] = []
    for i, token in enumerate(record.output):
        lp = record.logprobs[i] if i < len(record.logprobs) else None
        prob = math.exp(lp) if lp is not None else 1.0
        style = "" if prob >= 0.9 else ("warning" if prob >= 0.5 else "bold error")
        spans.append((plain(decoder.piece(token)), style))
    # Cut into pieces at newlines, as texts() does, so a long reply still draws in parts.
    out: list[Piece] = []
    current: list[Span] = []
    newlines = 0
    for span in spans:
        current.append(span)
        newlines += span[0].count("\n")
        if newlines >= PIECE_LINES and span[0].endswith("\n"):
            out.append(Piece("text", tuple(current)))
            current, newlines = [], 0
    if current:
        out.append(Piece("text", tuple(current)))
    return out


def weights_words(weights: int, trained: int | None) -> tuple[str, str]:
    """(words, palette role) for the weights that sampled a turn: ``weights 3`` (the weights
    after 3 updates), ``weights 3 (+1)`` when the update that trained it came 1 update later."""
    stale = trained - weights if trained is not None and trained > weights else 0
    return f"weights {weights}" + (f" (+{stale})" if stale else ""), "warning" if stale else "muted"


def turn_weights(t: TrialState | None, sync: bool) -> dict[int, tuple[int, int | None]]:
    """Per captured turn: the update whose weights sampled it and the update that trained the
    trial, where the proxy recorded them. A synchronous run's turns, sampled by the weights of
    their own step and trained by its update, say nothing new: none there unless stale."""
    if t is None:
        return {}
    out: dict[int, tuple[int, int | None]] = {}
    for turn in t.transcript:
        if turn.turn is None or turn.weights is None:
            continue
        if sync and turn.weights == t.step and (t.update is None or t.update == turn.weights):
            continue
        out[turn.turn] = (turn.weights, t.update)
    return out


def turn_section(
    record: CaptureRecord,
    options: Options,
    messages_from_atif: Sequence[tuple[str, str]] = (),
    weights: tuple[int, int | None] | None = None,
) -> Section:
    """One captured turn: what was new in the request, then the reply. ``weights``: the update
    whose weights sampled it, and the one that trained it (``turn_weights``)."""
    title: list[Span] = [(f"turn {record.turn + 1}", "bold primary")]
    meta = f"  {record.prompt_len}→{len(record.output)} tokens"
    if record.stop_reason:
        meta += f"  stop: {one_line(record.stop_reason, 20)}"
    if record.sample_ms is not None:
        meta += f"  {format_seconds(record.sample_ms / 1000)}"
    title.append((meta, "muted"))
    if weights is not None:
        words, role = weights_words(*weights)
        title.append(("  " + words, role))
    if record.restarted:
        title.append(("  history rewritten: the whole conversation", "warning"))
    pieces = [rule(*title)]
    for m in record.messages:
        pieces += _message(m)
    if not record.has_text:
        for label, content in messages_from_atif:
            pieces.append(line((f"{label} ›", "bold accent"), ("  (from trajectory.json)", "muted")))
            pieces += texts(content)
    reply = record.reply
    if reply is not None and reply.reasoning:
        pieces.append(line(("reasoning ›", "bold muted")))
        pieces += texts(reply.reasoning, "italic muted")
    decoder = options.decoder
    if options.logprobs and decoder is not None and record.output:
        pieces.append(line(("assistant ›", "bold primary"), ("  tokens coloured by probability", "muted")))
        pieces += _token_spans(record, decoder)
    elif reply is not None:
        pieces.append(line(("assistant ›", "bold primary")))
        if reply.parse_error:
            pieces.append(line((f"(not parsed: {one_line(reply.parse_error, 200)}; raw text)", "warning")))
        pieces += texts(reply.text)
    elif decoder is not None:
        pieces.append(line(("assistant ›", "bold primary"), ("  (decoded from its tokens)", "muted")))
        pieces += texts(decoder.decode(record.output))
    else:
        pieces.append(line(("assistant ›", "bold primary"), ("  (decoding its tokens…)", "muted")))
    if reply is not None:
        pieces += _calls(reply.tool_calls)
    pieces.append(GAP)
    return Section(f"turn{record.turn}", coalesce(pieces), turn=record.turn)


def request_section(turn: Turn) -> Section:
    """A request the proxy answered without sampling (rejected, or failed): nothing was captured."""
    pieces = [rule((f"request {turn.index + 1}", "bold warning"), (f"  not captured (HTTP {turn.status})", "warning"))]
    if turn.error:
        pieces += texts(turn.error, "error", 4000)
    pieces.append(GAP)
    return Section(f"request{turn.index}", coalesce(pieces))


def missing_section(turn: Turn) -> Section:
    """A captured turn the proxy reported whose line is not (yet) in the capture file."""
    title = (f"turn {turn.turn + 1 if turn.turn is not None else '?'}", "bold primary")
    meta = (f"  {turn.prompt_tokens}→{turn.output_tokens} tokens", "muted")
    note = line(("(its capture line is not readable here: no text for this turn)", "muted"))
    return Section(f"turn{turn.turn}", (rule(title, meta), note, GAP), turn=turn.turn)


def atif_section(step: AtifStep) -> Section:
    colour = {"agent": "primary", "user": "accent", "system": "muted"}.get(step.source, "fg")
    title: list[Span] = [(f"{step.step_id} · {one_line(step.source, 20)}", f"bold {colour}")]
    if step.completion_tokens is not None:
        title.append((f"  {step.prompt_tokens or 0}→{step.completion_tokens} tokens", "muted"))
    pieces = [rule(*title)]
    if step.reasoning:
        pieces += texts(step.reasoning, "italic muted")
    pieces += texts(step.message)
    pieces += _calls(step.tool_calls)
    for obs in step.observations:
        pieces.append(line(("tool output", "bold muted")))
        pieces += texts(obs)
    pieces.append(GAP)
    return Section(f"atif{step.step_id}", coalesce(pieces))


def atif_messages(steps: Sequence[AtifStep]) -> dict[int, list[tuple[str, str]]]:
    """Per captured turn, the messages ATIF says came before it: the system and user steps
    before the first agent step for turn 0, then each agent step's tool output for the next."""
    out: dict[int, list[tuple[str, str]]] = {0: []}
    turn = 0
    for step in steps:
        if step.source == "agent":
            turn += 1
            out[turn] = [("tool output", obs) for obs in step.observations]
        elif turn == 0:
            out[0].append((step.source, step.message))
    return out


def instruction_section(files: TrialFiles, records: Sequence[CaptureRecord]) -> Section:
    instruction = files.instruction
    if instruction is None and records:
        instruction = next((m.content for m in records[0].messages if m.role == "user"), None)
    body = texts(instruction) if instruction else [line(("(not known yet)", "muted"))]
    return Section("instruction", coalesce([rule(("instruction", "bold primary")), *body, GAP]))


def verifier_section(t: TrialState | None, files: TrialFiles) -> Section:
    pieces = [rule(("verifier", "bold primary"))]
    if files.rewards:
        rewards = ", ".join(f"{k}={v}" for k, v in files.rewards.items())
        pieces.append(line(("rewards " + one_line(rewards, 300), "bold success")))
    elif t is not None and t.reward is not None:
        pieces.append(line((f"reward {t.reward:g}", "bold success")))
    if files.exception:
        pieces.append(line(("exception", "bold error")))
        pieces += texts(files.exception)
    elif t is not None and t.exception_type:
        pieces += texts(f"{t.exception_type}: {t.exception_message or ''}", "error")
    for name, content in (("test-stdout.txt", files.verifier_stdout), ("test-stderr.txt", files.verifier_stderr)):
        if content:
            pieces.append(line((name, "bold muted")))
            pieces += texts(content, terminal=True)
    if len(pieces) == 1:
        pieces.append(line(("(no verifier output)", "muted")))
    pieces.append(GAP)
    return Section("verifier", coalesce(pieces))


def agent_log_section(files: TrialFiles) -> Section | None:
    if not files.agent_logs:
        return None
    pieces = [rule(("agent log", "bold primary"), ("  the agent's own output, its end", "muted"))]
    for name, content in files.agent_logs:
        pieces.append(line((one_line(name, 200), "bold muted")))  # a file name: as it is on disk
        pieces += texts(content, terminal=True)
    pieces.append(GAP)
    return Section("agentlog", coalesce(pieces))


class TranscriptBuilder:
    """Builds a trial's sections; a turn's section is built once per (line, options) and reused
    while the transcript grows."""

    def __init__(self) -> None:
        self._turns: dict[tuple[int, int, Options, bool, tuple[int, int | None] | None], Section] = {}

    def build(
        self,
        t: TrialState | None,
        records: Sequence[CaptureRecord],
        files: TrialFiles,
        options: Options,
        weights: dict[int, tuple[int, int | None]] | None = None,
    ) -> list[Section]:
        """``weights``: per captured turn, the weights that sampled it (``turn_weights``)."""
        weights = weights or {}
        out = [instruction_section(files, records)]
        by_turn = {r.turn: r for r in records}
        from_atif = atif_messages(files.steps) if files.steps else {}
        requests = list(t.transcript) if t is not None else []
        if not records and not any(r.captured for r in requests) and files.steps:
            out += [atif_section(step) for step in files.steps]  # nothing captured here: Harbor's record
        else:
            shown: set[int] = set()

            def upto(turn: int) -> None:
                for r in records:
                    if r.turn <= turn and r.turn not in shown:
                        shown.add(r.turn)
                        out.append(self._turn(r, options, from_atif.get(r.turn, ()), weights.get(r.turn)))

            for request in requests:
                if request.captured and request.turn is not None:
                    upto(request.turn)
                    if request.turn not in by_turn and request.turn not in shown:
                        shown.add(request.turn)
                        out.append(missing_section(request))
                elif not request.captured:
                    out.append(request_section(request))
            upto(max(by_turn, default=-1))
        if t is None or t.done or files.verifier_stdout or files.rewards or files.exception:
            out.append(verifier_section(t, files))
        log = agent_log_section(files)
        if log is not None:
            out.append(log)
        return out

    def _turn(
        self,
        record: CaptureRecord,
        options: Options,
        atif: Sequence[tuple[str, str]],
        weights: tuple[int, int | None] | None = None,
    ) -> Section:
        key = (record.turn, id(record), options, bool(atif), weights)
        section = self._turns.get(key)
        if section is None:
            section = self._turns[key] = turn_section(record, options, atif, weights)
        return section

    def forget(self) -> None:
        self._turns.clear()
