"""Learning you can watch, as a regression test: the session's demo recording (conftest's
``demo_run``: a short `tbconsole demo --multi-turn` run on the embedded default, warm-started
policy, generated variants, real Harbor trials, real PPO updates through the cookbook loop; each
trial looks up the file to act on, then acts on it, and trains as one datum through the proxy's
token continuity) must move the policy toward the replies it rewarded, evaluate its held-out
tasks before the first update and after the last, and save a checkpoint per update.

The measure, per step: the trained batch's advantage-weighted change in log-probability,
sum over its trials of advantage × (log p after the update − log p before) of the reply the
trial sampled, read exactly from the engine with the checkpoints before and after. A policy-
gradient step makes it positive; a dropped update leaves it at zero, a flipped advantage sign
makes it negative. The held-out reward over a whole demo is in README, "Learning you can watch"."""

import json
import shutil
from pathlib import Path

import pytest

from tbconsole.demo import variants as V
from tbconsole.demo import warmup as W
from tbconsole.demo.recipe import HELDOUT_VARIANTS, MULTI_TURN_MODEL
from tbconsole.record.runfolder import RunFolder

from tests_support.recorded import DEMO_RUN_EVAL_GROUP_SIZE, DEMO_RUN_STEPS

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]


def heldout_prompts(log: Path) -> dict[str, list[int]]:
    """Each held-out task's prompt where its solution is due (the first prompt; for a two-command
    task the second, after a look-up), as the proxy rendered it in the run's first evaluation. A
    task none of whose trials got that far (no look-up) has no such prompt."""
    from tbconsole.proxy.capture import read_capture

    first = log / "heldout" / "capture" / "step_000000"
    prompts: dict[str, list[int]] = {}
    for path in sorted(first.glob("*/*.jsonl")):
        task = path.name.split(".")[0]
        variant = V.parse_variant(task)
        due = len(variant.steps(variant.solution)) - 1
        turns = read_capture(path)
        if task not in prompts and len(turns) > due:
            prompts[task] = turns[due].prompt_tokens
    return prompts


def trained_batches(log: Path) -> dict[int, list[tuple[list, float]]]:
    """Per step, each scored trial's captured turns and its advantage (reward minus its group's
    mean, as the cookbook computes it), from the groups that trained (the attempt that ended ok)."""
    from tbconsole.proxy.capture import read_capture
    from tbconsole.record.runfolder import RunFolder

    events = [json.loads(line) for line in (log / "events.jsonl").read_text().splitlines()]
    trials = {(e["step"], e["group"]): e["trials"] for e in events if e["kind"] == "group.started"}
    out: dict[int, list[tuple[list, float]]] = {}
    for e in events:
        if e["kind"] != "group.ended" or not e["ok"]:
            continue
        rewards = e["rewards"]
        mean = sum(rewards) / len(rewards)
        for trial, reward in zip(trials[(e["step"], e["group"])], rewards, strict=True):
            turns = read_capture(RunFolder(log).capture_file(e["step"], e["group"], trial))
            out.setdefault(e["step"], []).append((turns, reward - mean))
    return out


def update_gains(clients: dict, batches) -> dict[int, float]:
    """Per step k: sum of advantage × (log p under policy k+1 − log p under policy k) of each
    trial's sampled replies (``clients``: the policy after k updates, by k)."""
    import tinker

    def logp(client, turns) -> float:
        # A trial that trains as one datum (every turn's prompt extends the turn before, sampled
        # tokens and all) is scored in one call, on its last turn's sequence: the same numbers as
        # a call per turn, each turn's sampled tokens at their place in it.
        last = list(turns[-1].prompt_tokens) + list(turns[-1].output_tokens)
        if all(
            last[: len(t.prompt_tokens) + len(t.output_tokens)] == [*t.prompt_tokens, *t.output_tokens] for t in turns
        ):
            logprobs = client.compute_logprobs(tinker.ModelInput.from_ints(last)).result()
            return sum(sum(logprobs[len(t.prompt_tokens) : len(t.prompt_tokens) + len(t.output_tokens)]) for t in turns)
        total = 0.0
        for turn in turns:
            out = list(turn.output_tokens)
            full = tinker.ModelInput.from_ints(list(turn.prompt_tokens) + out)
            total += sum(client.compute_logprobs(full).result()[-len(out) :])
        return total

    return {
        step: sum(
            advantage * (logp(clients[step + 1], turns) - logp(clients[step], turns))
            for turns, advantage in batch
            if advantage
        )
        for step, batch in sorted(batches.items())
    }


def check_heldout(log: Path, steps: int, rows: list[dict], trials: int) -> None:
    """Held-out tasks were scored before the first update (in step 0's row) and after the last
    (a row of its own), each with every trial; the console sees each evaluation begin and end, and
    its trials' own events come wrapped (the console's held-out rows, apart from training's)."""
    held = [
        (r.get("progress/batch"), r["eval/heldout/after_updates"], r["eval/heldout/trials"])
        for r in rows
        if "eval/heldout/reward" in r
    ]
    assert held == [(0, 0, trials), (None, steps, trials)]
    lines = [json.loads(line) for line in (log / "events.jsonl").read_text().splitlines()]
    marks = [(e["kind"], e["after_updates"], e["trials"]) for e in lines if e["kind"].startswith("evaluation.")]
    assert marks == [
        ("evaluation.started", 0, trials),
        ("evaluation.ended", 0, trials),
        ("evaluation.started", steps, trials),
        ("evaluation.ended", steps, trials),
    ]
    # a trial.ended per trial of each evaluation, each trial's model calls in a held-out capture
    # file, and none of its trials among training's
    held_ended = [e for e in lines if e["kind"] == "heldout.event" and e["event"]["kind"] == "trial.ended"]
    assert sorted({e["after_updates"] for e in held_ended}) == [0, steps]
    for after in (0, steps):
        assert len([e for e in held_ended if e["after_updates"] == after and e["event"]["scored"]]) == trials
    held_folder = RunFolder(log).heldout
    for e in held_ended:
        inner = e["event"]
        if inner["turns"]:
            assert held_folder.capture_file(inner["step"], inner["group"], inner["trial"]).exists(), inner
    training_trials = {e["trial"] for e in lines if e["kind"] in ("trial.phase", "trial.ended", "proxy.request")}
    assert not training_trials & {e["event"]["trial"] for e in held_ended}


def test_the_demo_recording_evaluates_held_out_tasks_before_and_after_and_saves_every_update(demo_run):
    """Held-out evaluations before the first update and after the last, their trials apart from
    training's, a checkpoint per update."""
    rows = [json.loads(line) for line in (demo_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["progress/batch"] for r in rows if "progress/batch" in r] == list(range(DEMO_RUN_STEPS))
    check_heldout(demo_run, DEMO_RUN_STEPS, rows, HELDOUT_VARIANTS * DEMO_RUN_EVAL_GROUP_SIZE)
    assert len(heldout_prompts(demo_run)) == HELDOUT_VARIANTS
    saved = [json.loads(line)["batch"] for line in (demo_run / "checkpoints.jsonl").read_text().splitlines()]
    assert sorted(set(saved)) == list(range(1, DEMO_RUN_STEPS + 1))  # and the final one, after the last
    assert sorted(trained_batches(demo_run)) == list(range(DEMO_RUN_STEPS))


def test_each_update_of_a_short_demo_moves_the_policy_toward_what_it_rewarded(demo_run, tmp_path):
    """The multi-turn demo's defaults, shortened, with a checkpoint after every update."""
    import tinker

    from tbconsole.engine.embedded import EmbeddedEngine

    demo = "multi-turn"
    model = MULTI_TURN_MODEL
    log = demo_run
    steps = DEMO_RUN_STEPS
    rows = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert [r["progress/batch"] for r in rows if "progress/batch" in r] == list(range(steps))
    # The policy after k updates: the base model, then a checkpoint per update (the last: final).
    saved = [json.loads(line) for line in (log / "checkpoints.jsonl").read_text().splitlines()]
    policies: dict[int, str | None] = {0: None, **{row["batch"]: row["sampler_path"] for row in saved}}
    assert sorted(policies) == list(range(steps + 1)), saved

    batches = trained_batches(log)
    assert sorted(batches) == list(range(steps))
    trained = [row for row in rows if "progress/batch" in row]
    # The trials need their two commands (look up, then act), and each trains as one datum:
    # every later turn's prompt carries on the earlier one, sampled tokens and all.
    calls = [len(turns) for batch in batches.values() for turns, _advantage in batch]
    assert sum(calls) / len(calls) >= 2, calls
    for row in trained:
        assert row["env/all/data/datums"] == 1.0, row
        assert row["env/all/data/token_amplification"] <= 1.05, row
    # The recording is shared and read-only: its checkpoints are read from a copy of its engine's folder.
    shutil.copytree(log / "engine", tmp_path / "engine", symlinks=True)
    with EmbeddedEngine(data_dir=tmp_path / "engine", model=model) as engine:
        service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        clients = {
            k: W._resolved(
                service.create_sampling_client(model_path=path)
                if path
                else service.create_sampling_client(base_model=model)
            )
            for k, path in policies.items()
        }
        gains = update_gains(clients, batches)
    signal = [step for step, batch in batches.items() if any(advantage for _turns, advantage in batch)]
    report = f"{demo}: advantage-weighted log-prob gain per update {gains} (steps with signal: {signal})"
    print(report)
    assert signal, f"no step had a group with mixed rewards: {report}"
    # The first update with a signal is Adam's first real step (no momentum yet: each parameter
    # moves against its own gradient's sign), so its gain is positive to first order. Later
    # steps carry earlier steps' momentum and can dip on their own batch; taken together they
    # must still gain. A dropped update gives exactly 0, a flipped sign a loss.
    assert gains[signal[0]] > 1e-3, report
    assert sum(gains[step] for step in signal) > 1e-3, report
