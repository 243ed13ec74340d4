"""The runner writes each attempt's captures where the transcript screen reads them: a retried
attempt (trial ids ending -rN) has its own capture folder, and its trials resolve to it."""

from pathlib import Path

from tbconsole.record.control import RunControl
from tbconsole.runner.dataset import HarborGroupBuilder
from tbconsole.runner.rollout import RunContext, claim_attempt
from tbconsole.runner.trials import ProxySettings, TrialTemplate
from tbconsole.ui.data.captures import capture_path


def _context(log_path: Path) -> RunContext:
    template = TrialTemplate(raw={"agent": {"name": "oracle"}}, proxy=ProxySettings(), source="test")
    return RunContext(
        publish=lambda _event: None,
        control=RunControl(lambda _event: None),
        log_path=log_path,
        renderer=None,
        tokenizer=None,
        template=template,
        max_tokens=16,
    )


def test_a_retried_attempts_trial_resolves_to_its_own_capture_file(tmp_path):
    ctx = _context(tmp_path / "run")
    builder = HarborGroupBuilder(task_dir=tmp_path / "hello", task_index=0, batch=3, group=1, group_size=2)
    first_dir, first_ids = claim_attempt(ctx, builder)
    retry_dir, retry_ids = claim_attempt(ctx, builder, attempt=1)
    assert first_ids == ["hello.s3g1t0", "hello.s3g1t1"]
    assert retry_ids == ["hello.s3g1t0-r1", "hello.s3g1t1-r1"]
    assert retry_dir != first_dir and retry_dir.name == "group_001-r1"
    for capture_dir, trial_ids in ((first_dir, first_ids), (retry_dir, retry_ids)):
        for trial in trial_ids:
            assert capture_path(ctx.log_path, 3, 1, trial) == capture_dir / f"{trial}.jsonl"


def test_an_attempt_never_reuses_a_claimed_capture_folder(tmp_path):
    ctx = _context(tmp_path / "run")
    builder = HarborGroupBuilder(task_dir=tmp_path / "hello", task_index=0, batch=0, group=0, group_size=1)
    claim_attempt(ctx, builder)
    again_dir, again_ids = claim_attempt(ctx, builder)  # a resumed step starts from attempt 0 again
    assert again_ids == ["hello.s0g0t0-r1"]
    assert capture_path(ctx.log_path, 0, 0, again_ids[0]) == again_dir / "hello.s0g0t0-r1.jsonl"


def test_a_trial_id_reads_back_as_its_place():
    from tbconsole.record.runfolder import attempt_of, trial_id, trial_place

    for task in ("count-lines-081", "x.s9g9t9", "a.b-c"):
        for step, group, k, attempt in ((0, 0, 0, 0), (12, 3, 7, 2), (999, 31, 15, 1)):
            made = trial_id(task, step, group, k, attempt)
            assert trial_place(made) == (step, group) and attempt_of(made) == attempt, made
    assert trial_place("not-a-trial") is None and trial_place("x.s1g2") is None
