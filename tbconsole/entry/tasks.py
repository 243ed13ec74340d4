"""`tbconsole tasks [TASKS_DIR]`: the task folders of a task set, one line each."""

from __future__ import annotations

from pathlib import Path

from tbconsole.entry.usage import UsageError


def register(sub) -> None:
    p = sub.add_parser(
        "tasks",
        help="list the tasks under a tasks dir (default: the bundled set)",
        description="List every task folder under TASKS_DIR (folders with a task.toml, sorted), "
        "read through Harbor's task model.",
    )
    p.add_argument(
        "tasks_dir",
        type=Path,
        nargs="?",
        metavar="TASKS_DIR",
        help="a folder of Harbor task folders (default: the bundled tasks)",
    )
    p.set_defaults(handler=run)


def run(args) -> int:
    from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR, TaskSetError, load_all

    tasks_dir = args.tasks_dir or BUNDLED_TASKS_DIR
    try:
        tasks = load_all(tasks_dir)
    except TaskSetError as exc:
        raise UsageError(str(exc)) from None
    width = max(len(t.path.name) for t in tasks)
    for t in tasks:
        print(f"{t.path.name:<{width}}  {t.difficulty or '-':<6}  {t.category or '-':<22}  {t.local_note}")
    print(f"{len(tasks)} tasks in {tasks_dir}")
    return 0
