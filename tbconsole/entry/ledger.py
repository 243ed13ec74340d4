"""`tbconsole ledger LOG_PATH`: the difficulty ledger as plain text (a row per task or family,
most wasted sandbox time first), and its actions on a live run from a shell or a script:
``--drop TASK``, ``--readmit TASK``, ``--weight TASK=W`` (sent through the run's control inbox,
as an attached console sends them; they apply from the next batch).

Reads only the events the ledger needs (``events.read_events_of``): a 90 MB, 300,000-event
``events.jsonl`` takes about a second of CPU."""

from __future__ import annotations

from pathlib import Path

from tbconsole.entry.usage import UsageError

KINDS = ("run.started", "group.started", "group.ended", "trial.ended", "task.admission", "batch.started")
SORT_KEYS = {"waste": "waste", "solve": "solve rate", "name": "name", "streak": "streak"}


def register(sub) -> None:
    p = sub.add_parser(
        "ledger",
        help="the difficulty ledger of a run as text; drop, re-admit or weight a task of a live run",
        description="The difficulty ledger of the run at LOG_PATH: per task (or family) its solve rate, "
        "groups, the share of them that carried no signal, sandbox time and the part that trained "
        "nothing, its streak of constant groups and its place in the batches, with its last steps. "
        "With --drop/--readmit/--weight, sends that change to the live run (from its next batch).",
    )
    p.add_argument("log_path", type=Path, metavar="LOG_PATH", help="the run's folder (its config.log_path)")
    p.add_argument("--families", action="store_true", help="a row per family instead of per task")
    p.add_argument("--sort", choices=sorted(SORT_KEYS), default="waste", help="row order (default: waste)")
    p.add_argument(
        "--steps", type=int, default=20, metavar="N", help="how many of the newest steps to show (default 20)"
    )
    act = p.add_mutually_exclusive_group()
    act.add_argument("--drop", metavar="TASK", help="take TASK out of the batches from the next batch on")
    act.add_argument("--readmit", metavar="TASK", help="bring TASK back from the next batch on")
    act.add_argument("--weight", metavar="TASK=W", help="give TASK weight W (0-10; 2: twice the groups)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from tbconsole.record.events import read_events_of
    from tbconsole.record.runfolder import NotARun, run_events
    from tbconsole.state import reduce_all

    try:
        events = run_events(args.log_path)
    except NotARun as exc:
        raise UsageError(str(exc)) from None
    if args.steps < 1:
        raise UsageError("--steps must be 1 or more")
    state = reduce_all(read_events_of(events, KINDS) if events.is_file() else [])  # none yet: a run starting
    action = _action(args)
    if action is not None:
        return _send(events.parent, state.tasks, *action)
    print("\n".join(table(state, families=args.families, sort=SORT_KEYS[args.sort], steps=args.steps)))
    return 0


def table(state, *, families: bool, sort: str, steps: int) -> list[str]:
    """The ledger's lines: a summary, a header, a row per task or family."""
    from tbconsole.common.formatting import format_duration
    from tbconsole.common.inert import one_line
    from tbconsole.ui.present import ledger_view as lv

    ledger = state.ledger
    rows = ledger.family_rows(state.tasks) if families else ledger.rows(state.tasks)
    rows = lv.sort_rows(rows, sort)
    current = state.step
    totals = lv.summary(ledger.rows(state.tasks), current)
    seen = sorted({s for r in rows for s in r.cells})
    shown = seen[-steps:]
    lines = [
        f"{len(rows)} {_noun(len(rows), families)} · sandbox {format_duration(totals.sandbox_s)}, "
        f"{lv.percent(totals.waste_share)} of it in groups that trained nothing · out now: "
        f"{totals.dropped} dropped, {totals.skipped} skipped · pending: {totals.pending}",
    ]
    name_w = max([len("family" if families else "task"), *(len(one_line(r.name, 80)) for r in rows)])
    steps_label = f"steps {shown[0]}–{shown[-1]}" if shown else "steps"
    lines.append(
        f"{'family' if families else 'task':<{name_w}}  {'solve':>5}  {'groups':>6}  {'nosig':>5}  "
        f"{'sandbox':>8}  {'waste':>8}  {'streak':<10}  {'state':<34}  {steps_label}"
    )
    for row in rows:
        nosig = row.no_signal_groups / row.groups if row.groups else None
        streak, _tone = lv.streak_words(row, True)
        if families:
            members = [r for r in ledger.rows(state.tasks) if r.family == row.name]
            where, _tone = lv.family_words(members, current, True)
            spans: list[tuple[int, int | None]] = []
        else:
            where, _tone = lv.state_words(row.admission, current, True)
            spans = lv.out_spans([c for c in ledger.changes if c[1] == row.name], row.admission)
        marks = "".join(lv.cell_mark(row.cells.get(s), lv.is_out(spans, s))[0] for s in shown)
        lines.append(
            f"{one_line(row.name, 80):<{name_w}}  {lv.percent(row.solve_rate):>5}  {row.groups:>6}  "
            f"{lv.percent(nosig):>5}  "
            f"{format_duration(row.sandbox_s):>8}  {format_duration(row.no_signal_s):>8}  {streak:<10}  "
            f"{where:<34}  {marks}"
        )
    return lines


def _noun(n: int, families: bool) -> str:
    if families:
        return "family" if n == 1 else "families"
    return "task" if n == 1 else "tasks"


def _action(args) -> tuple[str, str] | None:
    from tbconsole.record.enums import ControlCommand

    if args.drop is not None:
        return ControlCommand.DROP_TASK, args.drop
    if args.readmit is not None:
        return ControlCommand.READMIT_TASK, args.readmit
    if args.weight is not None:
        from tbconsole.state.ledger import parse_task_weight

        try:
            parse_task_weight(args.weight)
        except ValueError as exc:
            raise UsageError(f"--weight: {exc}") from None
        return ControlCommand.WEIGHT_TASK, args.weight
    return None


def _send(log_path: Path, tasks: list[str], command: str, argument: str) -> int:
    from tbconsole.record.control import ControlClient, ControlError
    from tbconsole.record.enums import ControlCommand, RunnerState
    from tbconsole.record.lease import read_lease
    from tbconsole.state.ledger import parse_task_weight

    task = parse_task_weight(argument)[0] if command == ControlCommand.WEIGHT_TASK else argument
    if task not in tasks:
        raise UsageError(f"{task!r} is not one of the run's training tasks (held-out tasks cannot be changed)")
    lease = read_lease(log_path)
    if lease.state is not RunnerState.LIVE:
        raise UsageError(f"{log_path}: the run is not live ({lease.describe()}); a change needs its runner")
    try:
        ControlClient(log_path).send(command, argument)
    except ControlError as exc:
        raise UsageError(str(exc)) from None
    print(f"sent {command} {argument}: it applies from the run's next batch (the run's log says when)")
    return 0
