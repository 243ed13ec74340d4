"""W&B pass-through, offline: the session's demo run (conftest's ``demo_run``) logs to a local W&B
run (``config.wandb_project``, ``WANDB_MODE=offline``); read back from its ``.wandb`` file, its
history rows are metrics.jsonl's rows and its summary holds the run's advisories. The advisories'
table alone, against a real offline W&B run; and a W&B that fails never reaches the run.

wandb keeps no Python reader of its ``.wandb`` files any more (wandb-core writes them); the file is
LevelDB's log format (a 7-byte ``:W&B`` header, then 32 KiB blocks of records, each a CRC, a
length and a type: whole, first, middle or last fragment) holding ``wandb_internal_pb2.Record``s.
"""

import json
import math
import os
import struct
import time
from pathlib import Path

import pytest

from tbconsole.record.events import AdvisoryCleared, AdvisoryRaised, EventBus, LogLine
from tbconsole.runner.wandb_advisories import ACTIVE_KEY, COLUMNS, TABLE_KEY, WandbAdvisories

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path):
    """The protobuf records of an offline run's ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:HEADER]
    pos, parts = HEADER, []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a record header: padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0:  # zeros: the rest of the block is padding
            pos += left
            continue
        body, pos = data[pos + HEADER : pos + HEADER + length], pos + HEADER + length
        if kind in (FULL, FIRST):
            parts = [body]
        else:
            parts.append(body)
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(b"".join(parts))
            yield record


def key_of(item) -> str:
    return item.key or "/".join(item.nested_key)


def finished_records(run_dir: Path, timeout: float = 30.0) -> list:
    """The run's records once its ``exit`` record is written: wandb-core, a process of its own,
    writes the file after ``finish()`` returns (a fraction of a second later)."""
    (path,) = run_dir.glob("run-*.wandb")
    deadline = time.monotonic() + timeout
    while True:
        records = list(wandb_records(path))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def read_offline_run(run_dir: Path) -> tuple[list[dict], dict]:
    """(history rows, the summary's last value of each key) of one offline run."""
    history, summary = [], {}
    for record in finished_records(run_dir):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({key_of(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            summary.update({key_of(i): json.loads(i.value_json) for i in record.summary.update})
    return history, summary


def table_rows(run_dir: Path, summary: dict) -> list[dict]:
    ref = summary[TABLE_KEY]
    table = json.loads((run_dir / "files" / ref["path"]).read_text())
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def same(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) if isinstance(a, float) or isinstance(b, float) else a == b


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """Every place wandb writes, inside the test's folder; no network."""
    for name in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tmp_path


def raised(key: str, severity: str = "info", step: int | None = 1) -> AdvisoryRaised:
    return AdvisoryRaised(
        key=key,
        rule=key.split(":")[0],
        severity=severity,
        message=f"{key} [bold]?[/]",
        threshold="x >= 1",
        value=0.5,
        step=step,
    )


def test_advisories_become_a_table_in_the_summary_of_an_offline_run(offline):
    import wandb

    run = wandb.init(project="tbconsole-test", dir=str(offline / "WANDB_DIR"))
    bus = EventBus()
    bus.subscribe(WandbAdvisories(run))
    bus.publish(raised("no-signal"))
    bus.publish(LogLine(level="info", message="not an advisory"))
    bus.publish(raised("stalled:t1", "warning", step=None))
    bus.publish(AdvisoryCleared(key="stalled:t1", message="it answered"))
    run.log({"x": 1.0}, step=0)
    run.finish()
    (run_dir,) = (offline / "WANDB_DIR" / "wandb").glob("offline-run-*")
    history, summary = read_offline_run(run_dir)
    assert [row["x"] for row in history] == [1.0]  # the advisories took no history row
    assert summary[ACTIVE_KEY] == 1
    rows = table_rows(run_dir, summary)
    assert list(rows[0]) == COLUMNS
    assert [(r["key"], r["state"], r["severity"], r["step"]) for r in rows] == [
        ("no-signal", "raised", "info", 1),
        ("stalled:t1", "raised", "warning", None),
        ("stalled:t1", "cleared", "warning", None),
    ]
    assert rows[0]["message"] == "no-signal [bold]?[/]" and rows[2]["message"] == "it answered"


def test_a_failing_wandb_never_reaches_the_run(caplog):
    class Broken:
        @property
        def summary(self):
            raise OSError("wandb-core is gone")

    logger = WandbAdvisories(Broken())
    logger.start()
    bus = EventBus()
    bus.subscribe(logger)
    seen = []
    bus.subscribe(seen.append)
    for key in ("a", "b"):
        bus.publish(raised(key))  # no exception reaches the publisher
    assert logger.failed and len(seen) == 2
    assert [r.message for r in caplog.records].count(
        "advisories could not be logged to W&B; the run goes on without them"
    ) == 1


@pytest.mark.root
def test_the_demo_runs_metrics_and_advisories_are_in_its_offline_wandb_run(demo_run):
    runs = sorted((demo_run / "wandb").glob("offline-run-*"))
    if os.environ.get("TBCONSOLE_TEST_DEMO_RUN") and not runs:
        pytest.fail(f"{demo_run} was recorded without config.wandb_project (see conftest's demo_run)")
    (run_dir,) = runs
    history, summary = read_offline_run(run_dir)
    rows = [json.loads(line) for line in (demo_run / "metrics.jsonl").read_text().splitlines()]
    assert len(history) == len(rows) >= 2
    for logged, row in zip(history, rows, strict=True):
        assert logged["_step"] == row["step"]
        mine = {k: v for k, v in logged.items() if not k.startswith("_")}
        theirs = {k: v for k, v in row.items() if k != "step"}
        assert mine.keys() == theirs.keys(), mine.keys() ^ theirs.keys()
        assert all(same(mine[k], theirs[k]) for k in theirs), row["step"]
    assert any(k.startswith("env/") and k.count("/") >= 2 for k in rows[0])  # per-task figures among them

    from tbconsole.record import events as ev

    # Each advisory the run raised or cleared (a fresh demo raises at most information: a step's
    # groups without signal, when chance gives it some), in order; none: no table, 0 standing.
    written = [e for e in ev.read_events(demo_run / "events.jsonl") if isinstance(e, AdvisoryRaised | AdvisoryCleared)]
    if not written:
        assert TABLE_KEY not in summary and summary[ACTIVE_KEY] == 0  # the runner's logger was there
        return
    table = table_rows(run_dir, summary)
    assert [(r["key"], r["state"], r["message"]) for r in table] == [
        (e.key, "raised" if isinstance(e, AdvisoryRaised) else "cleared", e.message) for e in written
    ]
    standing: set[str] = set()
    for e in written:
        (standing.add if isinstance(e, AdvisoryRaised) else standing.discard)(e.key)
    assert summary[ACTIVE_KEY] == len(standing)
