"""`tbconsole attach` over a run whose runner keeps a reducer snapshot: the console (the real
attach app: its tail of events.jsonl, controls and lease watch) starts from the snapshot, reads
only the events after it, follows the run from there, and ends in the state of a full read. With
the snapshot damaged it reads the run from its start, to the same state."""

import pytest

from tbconsole.entry.attach import attach_app
from tbconsole.record.enums import SnapshotProblem
from tbconsole.record.events import BatchStarted
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import reduce_all
from tbconsole.state.snapshot import SnapshotWriter, encode
from tbconsole.synthetic.run import synthetic_run, write_jsonl

from tests_support.ui import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def step_start(events, step: int) -> int:
    return next(i for i, e in enumerate(events) if isinstance(e, BatchStarted) and e.step == step)


def append(log_path, events) -> None:
    with open(RunFolder(log_path).events, "a", encoding="utf-8") as handle:
        handle.writelines(e.to_json() + "\n" for e in events)


@pytest.mark.parametrize("damaged", [False, True])
async def test_attach_starts_from_the_snapshot_and_follows_the_run(tmp_path, damaged):
    log_path = tmp_path / "run"
    events = list(synthetic_run(steps=10, groups=4, group_size=4, turns=(4, 12), end=False, log_path=str(log_path)))
    snapshot_at = step_start(events, 8) + 40  # the runner's latest snapshot: step 8 under way
    attach_at = step_start(events, 9) + 40  # where the run stands when the console attaches
    write_jsonl(events[:snapshot_at], RunFolder(log_path).events)
    writer = SnapshotWriter(log_path)
    writer.poll()
    writer.close()
    assert writer.written == 1
    append(log_path, events[snapshot_at:attach_at])
    if damaged:  # cut short, as by a crash mid-write on a filesystem that does not order writes
        path = RunFolder(log_path).snapshot
        path.write_bytes(path.read_bytes()[:-1])

    app = attach_app(log_path, None)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: not app.loading)
        restored = app.source.restored
        if damaged:
            assert restored.problem is SnapshotProblem.PAYLOAD and restored.snapshot is None
        else:
            assert restored.problem is None and restored.snapshot == writer.covered
        assert app.state.events == attach_at
        await wait_for(pilot, lambda: app.screen.grid.border_title == "trials · step 9")
        append(log_path, events[attach_at:])  # the run goes on: followed from where attach stopped
        await wait_for(pilot, lambda: app.state.events == len(events))
        assert encode(app.state) == encode(reduce_all(events))
