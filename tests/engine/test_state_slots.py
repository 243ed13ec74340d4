"""The journal's state slots: a kill that tears the slot being written leaves the other one,
and a journal whose every slot is torn is refused rather than read as a fresh adapter."""

from __future__ import annotations

import pytest
import torch

from tbconsole.engine.host import to_host
from tbconsole.engine.journal import Journal
from tbconsole.engine.state_slots import SLOTS, slot_path

RUN = "tbc-00000000000a:train:0"


def _state(value: float) -> tuple[dict[str, torch.Tensor], dict]:
    adapter = {"a.lora_A.weight": torch.full((4, 8), value), "a.lora_B.weight": torch.full((8, 4), -value)}
    optimizer = {
        "state": {0: {"step": torch.tensor(value), "exp_avg": torch.full((4, 8), value / 2)}},
        "param_groups": [{"lr": 1e-4, "params": [0]}],
    }
    return adapter, optimizer


def _tear(path) -> None:
    """What a kill in the middle of the write leaves: the new header, the old tail."""
    data = bytearray(path.read_bytes())
    data[-4:] = b"\0\0\0\0"
    path.write_bytes(bytes(data))


def test_newest_whole_slot_wins_and_a_torn_one_falls_back(tmp_path):
    journal = Journal(tmp_path)
    journal.create_run(RUN, {"model_id": RUN})
    run_dir = tmp_path / "runs" / RUN
    for step in (1, 2, 3):
        adapter, optimizer = _state(float(step))
        journal.save_state(RUN, adapter, optimizer, steps=step)
    assert sorted(p.name for p in run_dir.glob("state.*")) == sorted(SLOTS)

    rec = Journal(tmp_path).load_run(RUN)  # a restarted engine
    assert rec is not None and rec.state is not None
    assert rec.state["steps"] == 3 and rec.state["gen"] == 3
    assert torch.equal(rec.state["adapter"]["a.lora_B.weight"], torch.full((8, 4), -3.0))
    assert torch.equal(rec.state["optimizer"]["state"][0]["exp_avg"], torch.full((4, 8), 1.5))
    assert rec.state["optimizer"]["param_groups"] == [{"lr": 1e-4, "params": [0]}]

    _tear(slot_path(run_dir, 3))  # killed while writing generation 3: generation 2 comes back
    again = Journal(tmp_path)
    rec = again.load_run(RUN)
    assert rec is not None and rec.state is not None and rec.state["steps"] == 2
    # The next write goes to the torn slot, never over generation 2.
    again.save_state(RUN, *_state(9.0), steps=3)
    assert Journal(tmp_path).load_run(RUN).state["steps"] == 3  # type: ignore[union-attr]

    for slot in SLOTS:
        _tear(run_dir / slot)
    with pytest.raises(ValueError, match="no whole state file"):
        Journal(tmp_path).load_run(RUN)


def test_to_host_keeps_names_order_and_values():
    tensors = {"b": torch.arange(6.0).reshape(2, 3), "a": torch.tensor(7, dtype=torch.int64), "e": torch.zeros(0)}
    out = to_host(tensors)
    assert list(out) == ["b", "a", "e"]
    for name, t in tensors.items():
        assert out[name].device.type == "cpu" and torch.equal(out[name], t)
