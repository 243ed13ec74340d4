"""The export itself: a run folder's selected trials as JSON lines, in one format.

Each record starts from the trial's facts (``facts``); its conversation is read from the trial's
capture file under the folder given (a run folder moved or copied exports the same), decoded with
the run's tokenizer only where a line holds no text. A trial whose capture file is damaged or
unreadable is left out and named in ``Export.skipped``; the others are still written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tbconsole.common.tokenizerfile import tokenizer_path
from tbconsole.export.advantages import SOURCE
from tbconsole.export.conversation import CaptureDamaged, Decode, read_conversation
from tbconsole.export.selection import ExportTrial, RunFacts, select
from tbconsole.record.events import read_events
from tbconsole.record.runfolder import RunFolder

FORMATS = ("sharegpt", "atif")


def facts_of(trial: ExportTrial, run: RunFacts) -> dict[str, Any]:
    """What a record says about its trial, in either format."""
    source = SOURCE
    if run.kl_penalty_coef > 0:
        source += (
            f"; the run's KL penalty (config.kl_penalty_coef={run.kl_penalty_coef:g}) also shifted each token's "
            "advantage at training time, which this figure leaves out"
        )
    return {
        "id": trial.trial,
        "task": trial.task,
        "step": trial.step,
        "group": trial.group,
        "reward": trial.reward,
        "advantage": trial.advantage,
        "advantage_source": source,
        "group_rewards": list(trial.group_rewards),
        "outcome": trial.outcome,
        "trained": trial.trained,
        "turns": trial.turns,
        "run_id": run.run_id,
        "model": run.model_name,
        "trial_dir": trial.trial_dir,
    }


class _Decoder:
    """The run's tokenizer (``tokenizerfile``), loaded at the first line without text."""

    def __init__(self, model_name: str | None):
        self.model_name = model_name
        self._tok: Any = None
        self._loaded = False

    def __call__(self, ids: list[int]) -> str:
        if not self._loaded:
            self._loaded = True
            path = tokenizer_path(self.model_name)
            if path is not None:
                from tokenizers import Tokenizer

                self._tok = Tokenizer.from_file(path)
        if self._tok is None:
            return " ".join(map(str, ids))
        return self._tok.decode(ids, skip_special_tokens=False)


def agent_of(trial: ExportTrial, folder: RunFolder) -> tuple[str, str]:
    """The agent's name and version as Harbor recorded them in the trial folder."""
    candidates = [Path(trial.trial_dir)] if trial.trial_dir else []
    candidates.append(folder.trials(trial.step) / trial.trial)
    for where in candidates:
        try:
            info = json.loads((where / "result.json").read_text()).get("agent_info") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(info, dict) and info.get("name"):
            return str(info["name"]), str(info.get("version") or "unknown")
    return "unknown", "unknown"


@dataclass
class Export:
    """An export of one run folder: ``select`` raises SelectionError for steps not in the run."""

    folder: RunFolder
    steps: list[int] | None = None
    format: str = "sharegpt"
    tokens: bool = False
    run: RunFacts = field(init=False)
    trials: list[ExportTrial] = field(init=False)
    skipped: list[str] = field(default_factory=list)  # "trial: why", for trials left out

    def __post_init__(self) -> None:
        self.run, self.trials = select(read_events(self.folder.events), self.steps)

    def lines(self) -> Iterator[bytes]:
        decode: Decode = _Decoder(self.run.model_name)
        for trial in self.trials:
            path = self.folder.capture_file(trial.step, trial.group, trial.trial)
            try:
                messages = read_conversation(path, decode)
            except (CaptureDamaged, OSError) as exc:
                self.skipped.append(f"{trial.trial}: {exc}")
                continue
            facts = facts_of(trial, self.run)
            if self.format == "atif":
                from tbconsole.export.atif import atif_trajectory

                record = atif_trajectory(
                    facts,
                    messages,
                    agent=agent_of(trial, self.folder),
                    model_name=self.run.model_name,
                    tokens=self.tokens,
                )
            else:
                from tbconsole.export.sharegpt import sharegpt_record

                record = sharegpt_record(facts, messages, tokens=self.tokens)
            yield orjson.dumps(record) + b"\n"
