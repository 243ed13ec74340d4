"""The difficulty ledger's screen (``D``), without its colours: a row per task (or family) with
one cell per step (a tasks × steps heatmap), then the run-level columns (solve rate, groups, the
share of them that carried no signal, sandbox time, the part of it that trained nothing, the
streak of constant groups, the task's place in the batches). What goes where, in which order,
in which words; ``tbconsole.ui.widgets.ledgercells`` colours it.

Pure: ``TaskRow`` lists (``tbconsole.state.ledger``) and a width in. Only the newest steps that
fit are laid out, so a 100-step run costs a row no more than a 10-step one. Tones are a
``Palette``'s field names (success, warning, error, accent, primary, muted)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tbconsole.record.enums import AdmissionBy, GroupSignal
from tbconsole.state.ledger import Admission, StepCell, TaskRow
from tbconsole.ui.present.sanitize import one_line

# The orders `o` cycles through; the first is the default. Waste first: the question the screen
# answers is which tasks are worth another hundred sandbox-hours.
SORTS: tuple[str, ...] = ("waste", "solve rate", "name", "streak")

# A cell's marks: a step whose groups carried no signal has a glyph of its own (readable without
# colour); a mixed step a bar as high as its solve rate.
ALL_SOLVED, ALL_FAILED, ONE_REWARD, NO_GROUP, OUT = "✓", "✗", "=", "·", "-"
BARS = "▁▂▃▄▅▆▇"
STREAK_WORDS = {GroupSignal.ALL_SOLVED: "solved", GroupSignal.ALL_FAILED: "failed", GroupSignal.CONSTANT: "same"}
STREAK_MARKS = {
    GroupSignal.ALL_SOLVED: ALL_SOLVED,
    GroupSignal.ALL_FAILED: ALL_FAILED,
    GroupSignal.CONSTANT: ONE_REWARD,
}
STREAK_TONES = {GroupSignal.ALL_SOLVED: "success", GroupSignal.ALL_FAILED: "error", GroupSignal.CONSTANT: "warning"}

WIDE = 110  # from this (content) width on, the columns use words (``3× solved``, ``skipped by policy …``)
MAX_CELL_W = 3  # a short run's steps get up to three characters each


@dataclass(frozen=True)
class Columns:
    """The run-level columns at one width class: (heading, width, right-aligned) each."""

    name_max: int
    fields: tuple[tuple[str, int, bool], ...]

    @property
    def width(self) -> int:
        return sum(w + 1 for _, w, _ in self.fields)


WIDE_COLUMNS = Columns(
    32,
    (
        ("solve", 5, True),
        ("grp", 4, True),
        ("nosig", 5, True),
        ("sandbox", 7, True),
        ("waste", 7, True),
        ("streak", 10, False),
        ("state", 31, False),
    ),
)
NARROW_COLUMNS = Columns(
    18,
    (
        ("solv", 4, True),
        ("grp", 3, True),
        ("nsig", 4, True),
        ("sandbx", 6, True),
        ("waste", 6, True),
        ("strk", 4, False),
        ("state", 11, False),
    ),
)


@dataclass(frozen=True)
class Layout:
    """Where things go in a line of ``width`` characters: the name, the heatmap's ``steps`` (the
    newest that fit, oldest first, ``cell_w`` characters each) and the run-level columns."""

    width: int
    name_w: int
    cell_w: int
    steps: tuple[int, ...]
    heat_w: int
    columns: Columns
    first: int  # the run's first and last step: the axis the visible steps are cut from
    last: int

    @property
    def wide(self) -> bool:
        return self.columns is WIDE_COLUMNS

    @property
    def hidden_before(self) -> int:
        """How many of the run's steps are older than the first shown."""
        return self.steps[0] - self.first if self.steps else 0


def layout(width: int, names: Iterable[str], first: int | None, last: int | None, back: int = 0) -> Layout:
    """The layout of rows named ``names`` over steps ``first``..``last``, ``back`` steps before
    the newest (0: the newest steps that fit)."""
    columns = WIDE_COLUMNS if width >= WIDE else NARROW_COLUMNS
    longest = max((len(one_line(n, 80)) for n in names), default=4)
    name_w = max(6, min(columns.name_max, longest + 1))
    heat_w = max(4, width - name_w - 1 - columns.width)
    if first is None or last is None:
        return Layout(width, name_w, 1, (), heat_w, columns, 0, -1)
    count = last - first + 1
    cell_w = max(1, min(MAX_CELL_W, heat_w // max(1, count)))
    fit = max(1, heat_w // cell_w)
    back = max(0, min(back, count - fit))
    end = last - back
    start = max(first, end - fit + 1)
    used = (end - start + 1) * cell_w  # the columns follow the newest step, not the width left
    return Layout(width, name_w, cell_w, tuple(range(start, end + 1)), max(4, used), columns, first, last)


def step_span(steps: Iterable[int], current: int | None) -> tuple[int | None, int | None]:
    """The run's steps as an axis: from the first with a group to the current one (or the last
    with a group)."""
    seen = [*steps, *([current] if current is not None else [])]
    return (min(seen), max(seen)) if seen else (None, None)


def axis_labels(lay: Layout) -> str:
    """The step numbers over the heatmap, at every fifth step (every tenth when a step is one
    character wide) and the first, where they fit without touching."""
    axis = [" "] * lay.heat_w
    every = 5 if lay.cell_w >= 2 else 10
    for i, step in enumerate(lay.steps):
        label = str(step)
        x = i * lay.cell_w
        if (step % every and i) or x + len(label) > lay.heat_w:
            continue
        if all(c == " " for c in axis[max(0, x - 1) : x + len(label) + 1]):
            axis[x : x + len(label)] = label
    return "".join(axis)


# -- sorting -----------------------------------------------------------------------------------


def sort_rows(rows: list[TaskRow], by: str) -> list[TaskRow]:
    """``waste``: most sandbox time that trained nothing first (no signal, or dropped); ``solve
    rate``: highest first (rows without a scored trial last); ``name``; ``streak``: longest run of
    constant groups first."""
    if by == "solve rate":
        return sorted(rows, key=lambda r: (r.solve_rate is None, -(r.solve_rate or 0.0), r.name))
    if by == "name":
        return sorted(rows, key=lambda r: r.name)
    if by == "streak":
        return sorted(rows, key=lambda r: (-r.streak, -r.wasted_s, r.name))
    return sorted(rows, key=lambda r: (-r.wasted_s, -r.sandbox_s, r.name))


# -- a task's place in the batches -------------------------------------------------------------


def pending(admission: Admission, current: int | None) -> bool:
    """The change applies from a batch that has not started yet."""
    return admission.since is not None and (current is None or admission.since > current)


def out_now(admission: Admission, current: int | None) -> bool:
    """Out of the batches now (not a pending drop; not a policy skip that has ended)."""
    if admission.weight > 0 or pending(admission, current):
        return False
    return admission.until is None or current is None or current < admission.until


def state_words(admission: Admission, current: int | None, wide: bool) -> tuple[str, str]:
    """A task's place in the batches, in words (wide) or a few characters, and its tone."""
    w = admission.weight
    if pending(admission, current):
        since = admission.since
        if w == 0:
            return (f"drop from step {since} (pending)" if wide else f"→out @{since}"), "accent"
        if w == 1:
            return (f"back in from step {since} (pending)" if wide else f"→in @{since}"), "accent"
        return (f"weight {w:g} from step {since} (pending)" if wide else f"→w{w:g} @{since}"), "accent"
    if out_now(admission, current):
        if admission.by == AdmissionBy.POLICY:
            if admission.until is not None:
                return (
                    f"skipped by policy until step {admission.until}" if wide else f"skip→{admission.until}"
                ), "warning"
            return ("skipped by policy" if wide else "skipped"), "warning"
        return ("dropped by user" if wide else "dropped"), "error"
    if w not in (0, 1):
        return f"weight {w:g}", "primary"
    return "in", "muted"


def family_words(members: list[TaskRow], current: int | None, wide: bool) -> tuple[str, str]:
    """A family's place: how many of its tasks are out, and how many changes are pending."""
    out = sum(out_now(m.admission, current) for m in members)
    waiting = sum(pending(m.admission, current) for m in members)
    if not out and not waiting:
        return "in", "muted"
    parts = [f"{out} of {len(members)} out" if wide else f"{out}/{len(members)} out"] if out else []
    parts += [f"{waiting} pending" if wide else f"{waiting} pend."] if waiting else []
    return " · ".join(parts), "warning" if out else "accent"


def out_spans(changes: Iterable[tuple[int, str, float, str]], admission: Admission) -> list[tuple[int, int | None]]:
    """The steps ``[start, end)`` a task was out of the batches (``end`` None: still out), from
    its admission changes (``Ledger.changes``, this task's); the last span ends at a policy
    skip's ``until``."""
    spans: list[tuple[int, int | None]] = []
    start: int | None = None
    for step, _task, weight, _by in sorted(changes, key=lambda c: c[0]):
        if weight == 0 and start is None:
            start = step
        elif weight > 0 and start is not None:
            spans.append((start, step))
            start = None
    if start is not None:
        spans.append((start, admission.until if admission.weight == 0 else None))
    return spans


def is_out(spans: list[tuple[int, int | None]], step: int) -> bool:
    return any(a <= step and (b is None or step < b) for a, b in spans)


# -- what a cell and a column say --------------------------------------------------------------


def cell_mark(cell: StepCell | None, out: bool) -> tuple[str, str | float]:
    """A step's glyph and its tone (a solve rate for a mixed step: its colour is a blend): no
    group that step (``·``, or ``-`` when the task was out), all solved ``✓``, all failed ``✗``,
    one partial reward ``=``, else a bar as high as the step's solve rate."""
    if cell is None or not cell.groups:
        return (OUT, "error") if out else (NO_GROUP, "muted")
    if cell.no_signal == cell.groups:
        if cell.solved == cell.scored:
            return ALL_SOLVED, "success"
        if cell.solved == 0 and cell.reward_sum <= 0:
            return ALL_FAILED, "error"
        return ONE_REWARD, "warning"
    rate = cell.solve_rate or 0.0
    return cell_mark_bar(rate), rate


def cell_mark_bar(rate: float) -> str:
    """A mixed step's bar: as high as its solve rate."""
    return BARS[max(0, min(len(BARS) - 1, round(rate * (len(BARS) - 1))))]


def streak_words(row: TaskRow, wide: bool) -> tuple[str, str]:
    """``3× solved`` (wide) or ``3×✓``: the constant groups in a row up to the newest."""
    kind = row.streak_signal
    if not row.streak or kind is None:
        return "", "muted"
    words = STREAK_WORDS.get(kind, str(kind)) if wide else STREAK_MARKS.get(kind, "?")
    return f"{row.streak}×{' ' if wide else ''}{words}", STREAK_TONES.get(kind, "warning")


def percent(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


@dataclass(frozen=True)
class Summary:
    """The run in figures: sandbox seconds (all, and those of groups that trained nothing: no
    signal, or dropped by the off-policy mode), the tasks out of the batches now (dropped by a
    user, skipped by the policy), changes pending."""

    sandbox_s: float
    no_signal_s: float
    dropped: int
    skipped: int
    pending: int
    dropped_groups: int = 0  # groups no update trained (group.dropped)
    dropped_s: float = 0.0

    @property
    def wasted_s(self) -> float:
        return self.no_signal_s + self.dropped_s

    @property
    def waste_share(self) -> float | None:
        return self.wasted_s / self.sandbox_s if self.sandbox_s > 0 else None


def summary(rows: list[TaskRow], current: int | None) -> Summary:
    return Summary(
        sandbox_s=sum(r.sandbox_s for r in rows),
        no_signal_s=sum(r.no_signal_s for r in rows),
        dropped=sum(out_now(r.admission, current) and r.admission.by != AdmissionBy.POLICY for r in rows),
        skipped=sum(out_now(r.admission, current) and r.admission.by == AdmissionBy.POLICY for r in rows),
        pending=sum(pending(r.admission, current) for r in rows),
        dropped_groups=sum(r.dropped_groups for r in rows),
        dropped_s=sum(r.dropped_s for r in rows),
    )
