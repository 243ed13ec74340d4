"""Every checkpoint the run saves is announced: the cookbook's periodic saves (made inside its
loop), the final one, and a clean stop's — through the real SDK against the local engine."""

import pytest

from tbconsole.record.events import CheckpointSaved
from tbconsole.runner.train import PublishingCheckpointManager

pytestmark = pytest.mark.e2e


async def test_periodic_and_final_checkpoints_publish_checkpoint_saved(tmp_path):
    import tinker

    from tbconsole.engine.embedded import EmbeddedEngine

    seen = []
    (tmp_path / "run").mkdir()
    async with EmbeddedEngine(data_dir=str(tmp_path / "engine"), model="tbconsole/qwen3-tiny") as engine:
        service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        training = await service.create_lora_training_client_async("tbconsole/qwen3-tiny", rank=4)
        manager = PublishingCheckpointManager(
            training_client=training,
            service_client=service,
            log_path=str(tmp_path / "run"),
            save_every=2,
            ttl_seconds=None,
            publish=seen.append,
        )
        for step in range(1, 5):  # as the cookbook's loop does after each step
            await manager.maybe_save_async(step, loop_state={"batch": step})
        await manager.save_final_async(loop_state={"batch": 5})
    saved = [e for e in seen if isinstance(e, CheckpointSaved)]
    assert [(e.step, e.name) for e in saved] == [(2, "000002"), (4, "000004"), (5, "final")]
    assert all(e.state_path and e.state_path.startswith("tinker://") for e in saved)
    lines = (tmp_path / "run" / "checkpoints.jsonl").read_text().splitlines()
    assert len(lines) == len(saved)  # one event per line the cookbook wrote
