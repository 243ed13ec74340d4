"""What a trial left behind, as the transcript shows it: its instruction, the agent's ATIF steps,
the verifier's output, rewards or exception, the tail of the agent's logs, how the agent exited. The data layer reads
them from the trial's folder (``tbconsole.ui.data.trialfiles``); presentation (``transcript_doc``)
only reads these values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AtifStep:
    step_id: int
    source: str
    message: str
    reasoning: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (function, arguments as JSON)
    observations: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass
class TrialFiles:
    trial_dir: Path | None
    instruction: str | None = None
    steps: list[AtifStep] = field(default_factory=list)
    verifier_stdout: str | None = None
    verifier_stderr: str | None = None
    rewards: dict[str, Any] | None = None
    exception: str | None = None
    agent_logs: list[tuple[str, str]] = field(default_factory=list)  # (name, its tail)
    agent_exit: str | None = None  # how the agent says it exited (mini-swe-agent: "LimitsExceeded")
    problems: list[str] = field(default_factory=list)
    signature: tuple = ()  # (path, size, mtime) of what was read: reload when it changes
