"""Batches over task folders: the recipe's indexing rule, epochs, placeholders."""

import pytest

from tbconsole.runner.dataset import HarborDatasetBuilder, HarborGroupBuilder, TrialReward


async def test_batches_follow_the_recipe_rule(tmp_path):
    for name in ("c", "a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.toml").write_text("")
    (tmp_path / "not-a-task").mkdir()
    dataset, test = await HarborDatasetBuilder(tasks_dir=str(tmp_path), groups_per_batch=2, group_size=3, epochs=2)()
    assert test is None
    assert [p.name for p in dataset.tasks] == ["a", "b", "c"]
    assert len(dataset) == 3  # ceil(3 tasks × 2 epochs / 2)
    batches = [[(g.task_name, g.group) for g in dataset.get_batch(i)] for i in range(len(dataset))]
    assert batches == [[("a", 0), ("b", 1)], [("c", 0), ("a", 1)], [("b", 0), ("c", 1)]]
    builder = dataset.get_batch(2)[1]
    assert builder.batch == 2 and len(await builder.make_envs()) == 3
    assert builder.logging_tags() == ["harbor", "agent", "c"]


async def test_uneven_last_batch(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.toml").write_text("")
    dataset, _ = await HarborDatasetBuilder(tasks_dir=str(tmp_path), groups_per_batch=2)()
    assert len(dataset) == 2 and [g.task_name for g in dataset.get_batch(1)] == ["c"]


async def test_group_rewards_come_from_the_trials(tmp_path):
    builder = HarborGroupBuilder(task_dir=tmp_path, task_index=0, batch=0, group=0, group_size=2)
    builder.rewards = [TrialReward(1.0, {"exit_status/Submitted": 1.0}), TrialReward(0.0, {})]
    assert await builder.compute_group_rewards([object(), object()], []) == [
        (1.0, {"exit_status/Submitted": 1.0}),
        (0.0, {}),
    ]
    with pytest.raises(RuntimeError, match="3 trajectories"):
        await builder.compute_group_rewards([object()] * 3, [])
