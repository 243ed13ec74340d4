"""Turns a finished run folder into one calibration-corpus file: only what the advisory rules read.

    .venv/bin/python tests/advisories/corpus/make_corpus.py RUN_FOLDER tests/advisories/corpus/NAME.jsonl.gz [STEPS]

STEPS keeps the run's first STEPS steps only (a long run, or one still going).

Lines are either an event as ``events.jsonl`` writes it (the run's own bytes, less what no rule
reads: metrics other than the rules', log lines, checkpoints, the advisories the run raised), or
a fact the runner measured beside the events (``{"fact": "CaptureFile", ...}``), rebuilt from the
run folder as the runner would have measured it:

- CaptureFile: each scored trial's capture file, read by the runner's own ``read_capture_file``;
- AgentTimeout: the agent timeout in each trial's Harbor config (override_timeout_sec);
- SdkRetry: the SDK's "Retrying …" lines of logs.log (which carries no clock), stamped with the
  end of the step they were logged in (the runner logs "Wrote metrics" at each step's end);
- RunFolderSize / DiskSample at each step's end: the run folder's bytes in files last written by
  then, and the free space now plus what the run wrote after that step.

Facts come right after the event they belong to (a capture file after its trial.ended, sizes after
the step's batch.ended), so a replay feeds them in the order the runner did.

A run recorded before the runner read its trials' replies (``runner.replies``: a trial.ended's
verifier_touches and reply fingerprint, a group.started's instruction digest) gets them here, from
its capture files and its task folders (``config.dataset_builder.tasks_dir``), as the runner
would have recorded them.

``faulty-verifier-hack.jsonl.gz`` is the run folder ``tests/advisories/test_verifier_hack.py``
prints (a real hack of a planted verifier beside an honest trial).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import orjson

from tbconsole.advisories.facts import AgentTimeout, CaptureFile, DiskSample, RunFolderSize, SdkRetry
from tbconsole.advisories.training import ENTROPY, KL, KL_BASE, REWARD, TOKENS_PER_REPLY
from tbconsole.record import events as ev
from tbconsole.record.capturefile import read_records
from tbconsole.record.events import decode
from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.advise import read_capture_file
from tbconsole.runner.replies import instruction_digest, read_replies, task_test_names

# What the rules read of a metrics row (training.py, integrity.Tokens).
METRICS = {KL, KL_BASE, ENTROPY, REWARD, TOKENS_PER_REPLY, "env/all/total_turns", "env/all/total_ob_tokens"}
OFF_POLICY = "offpolicy/"  # the off-policy figures by staleness (training.Kl, training.OffPolicy)
METRICS |= {"env/all/total_ac_tokens"}
# Events no rule reads: dropped to keep the corpus small.
DROP = {"log.line", "checkpoint.saved", "advisory.raised", "advisory.cleared", "control.changed"}


def fact_line(fact) -> str:
    return json.dumps({"fact": type(fact).__name__, **asdict(fact)}, separators=(",", ":"))


def folder_bytes_by(root: Path, ts: float) -> int:
    """Bytes on disk of the run folder's files last written by ``ts``."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if st.st_mtime <= ts:
                total += st.st_blocks * 512
    return total


def sdk_retries(folder: Path, step_ends: list[float]) -> list[SdkRetry]:
    """logs.log's SDK retry lines, each stamped with the end of the step it was logged in."""
    log = folder / "logs.log"
    if not log.exists():
        return []
    out, step = [], 0
    for line in log.read_text(errors="replace").splitlines():
        if "Wrote metrics to" in line:
            step += 1
            continue
        found = re.search(r"\] (Retrying.*)$", line)
        if found and step < len(step_ends):
            out.append(SdkRetry(ts=step_ends[step], message=found.group(1)))
    return out


def agent_timeout(trial_dir: str | None) -> float | None:
    try:
        config = json.loads((Path(trial_dir) / "config.json").read_text()) if trial_dir else None
    except (OSError, ValueError):
        return None
    seconds = (config or {}).get("agent", {}).get("override_timeout_sec")
    return float(seconds) if isinstance(seconds, int | float) else None


def tasks_dir(events: list) -> Path | None:
    """The run's training tasks folder, from its run.started."""
    for _, event in events:
        if isinstance(event, ev.RunStarted):
            found = ((event.config.get("config") or {}).get("dataset_builder") or {}).get("tasks_dir")
            return Path(found) if isinstance(found, str) else None
    return None


def with_replies(raw: bytes, event, folder: RunFolder, tasks: Path | None, groups: dict) -> bytes:
    """An event line of a run recorded before the runner read its trials' replies, with what it
    would have recorded; any other line as it is. ``groups``: (step, group) → task, filled as the
    group.started lines go by."""
    if isinstance(event, ev.GroupStarted):
        groups[(event.step, event.group)] = event.task
    if isinstance(event, ev.GroupStarted) and b'"instruction"' not in raw and tasks is not None:
        data = orjson.loads(raw)
        data["instruction"] = instruction_digest(str(tasks / event.task))
        return orjson.dumps(data)
    if isinstance(event, ev.TrialEnded) and event.scored and b'"reply_digest"' not in raw:
        path = folder.capture_file(event.step, event.group, event.trial)
        if not path.exists():
            return raw
        task = groups.get((event.step, event.group))
        names = task_test_names(str(tasks / task)) if tasks is not None and task else frozenset()
        reading = read_replies([(r.turn, r.reply) for r in read_records(path)], names)
        data = orjson.loads(raw)
        data["verifier_touches"] = [t.to_json() for t in reading.touches]
        data.update(reply_digest=reading.digest, reply_chars=reading.chars, reply_text=reading.text)
        return orjson.dumps(data)
    return raw


def main(src: str, dest: str, steps: str | None = None) -> None:
    folder = RunFolder(Path(src))
    lines = folder.events.read_bytes().splitlines()
    events = [(raw, event) for raw in lines if raw.strip() and (event := decode(raw)) is not None]
    if steps is not None:  # up to the batch.ended of step STEPS-1
        last = next(i for i, (_, e) in enumerate(events) if isinstance(e, ev.BatchEnded) and e.step == int(steps) - 1)
        events = events[: last + 1]
    tasks = tasks_dir(events)
    groups: dict[tuple[int, int], str] = {}
    events = [(with_replies(raw, event, folder, tasks, groups), event) for raw, event in events]
    step_ends = [e.ts for _, e in events if isinstance(e, ev.BatchEnded)]
    retries = sdk_retries(folder.root, step_ends)
    final = folder_bytes_by(folder.root, float("inf"))
    free_now = shutil.disk_usage(folder.root).free
    timeouts = {
        e.trial: seconds
        for _, e in events
        if isinstance(e, ev.TrialEnded) and (seconds := agent_timeout(e.trial_dir)) is not None
    }
    started: set[str] = set()
    out: list[str] = []
    for raw, event in events:
        if event.kind in DROP:
            continue
        if isinstance(event, ev.TrialPhaseChanged) and event.trial not in started:
            started.add(event.trial)
            seconds = timeouts.get(event.trial)
            if seconds is not None:  # the runner learns it when Harbor makes the trial
                out.append(fact_line(AgentTimeout(trial=event.trial, seconds=seconds)))
        if isinstance(event, ev.StepMetrics):
            data = orjson.loads(raw)
            data["metrics"] = {k: v for k, v in data["metrics"].items() if k in METRICS or k.startswith(OFF_POLICY)}
            if not data["metrics"]:
                continue
            out.append(orjson.dumps(data).decode())
        else:
            out.append(raw.decode())
        if isinstance(event, ev.TrialEnded) and event.scored:
            fact: CaptureFile | None = read_capture_file(folder, event)
            if fact is not None:
                out.append(fact_line(fact))
        if isinstance(event, ev.BatchEnded):
            for retry in [r for r in retries if r.ts == event.ts]:
                out.append(fact_line(retry))
            size = folder_bytes_by(folder.root, event.ts)
            out.append(fact_line(RunFolderSize(ts=event.ts, step=event.step, bytes=size)))
            out.append(fact_line(DiskSample(ts=event.ts, free_bytes=free_now + final - size)))
    # gzip: the events repeat their field names line after line (a tenth of the size)
    with gzip.open(dest, "wt", compresslevel=9) as f:
        f.write("\n".join(out) + "\n")
    print(f"{dest}: {len(out)} lines, {Path(dest).stat().st_size} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:4])
