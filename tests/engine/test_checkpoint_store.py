"""The checkpoint store lists whole checkpoints only: a folder still being written (or cut by a
crash mid-save) sits under a hidden name and must never be offered to a client."""

import torch

from tbconsole.engine.checkpoints import CheckpointRef, CheckpointStore


def test_listing_skips_a_checkpoint_being_saved(tmp_path):
    store = CheckpointStore(tmp_path)
    done = CheckpointRef("run1", "sampler_weights", "step-1")
    store.save(done, adapter={"w": torch.zeros(2)}, adapter_config={"r": 1}, meta={}, optimizer=None, ttl_seconds=None)
    # What a save cut by SIGKILL leaves: the hidden folder with its files, never renamed.
    cut = store.dir_for(CheckpointRef("run1", "sampler_weights", "step-2"))
    hidden = cut.with_name(f".{cut.name}.tmp-123")
    hidden.mkdir(parents=True)
    (hidden / "meta.json").write_text("{}")

    names = [c["tinker_path"] for c in store.list("run1")]
    assert names == [done.tinker_path]
