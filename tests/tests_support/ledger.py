"""Hand-made events for the difficulty ledger: a run's start and whole groups."""

from tbconsole.record import events as ev


def group_events(step, group, task, rewards, ok=True, seconds=10.0) -> list[ev.Event]:
    """A whole group (started, its trials ended, ended), each trial ``seconds`` in its sandbox."""
    trials = [f"{task}.s{step}g{group}t{i}" for i in range(len(rewards))]
    out: list[ev.Event] = [ev.GroupStarted(step=step, group=group, task=task, trials=trials, proxy_url="http://x")]
    for trial, reward in zip(trials, rewards, strict=True):
        out.append(
            ev.TrialEnded(
                step=step,
                group=group,
                trial=trial,
                outcome="Submitted" if ok else "AgentError",
                scored=ok,
                reward=reward if ok else None,
                turns=1,
                output_tokens=5,
                trial_dir=None,
                timings={"total": seconds},
            )
        )
    out.append(ev.GroupEnded(step=step, group=group, rewards=list(rewards) if ok else [None] * len(rewards), ok=ok))
    return out


def run_started(tasks, families=None) -> ev.RunStarted:
    return ev.RunStarted(
        run_id="r",
        log_path="/x",
        model_name="m",
        base_url=None,
        renderer_name=None,
        total_steps=10,
        groups_per_batch=2,
        group_size=2,
        tasks=tasks,
        config={},
        task_families=families or {},
    )
