"""How the run's processes share the CPU with the console.

Linux shares the CPU between sessions (autogroups) before processes: the console, the detached
runner and each sandbox command lead a session of their own, so eight busy agents and a training
engine would take nine shares to the console's one. A key press must not wait behind them, so
the background sessions run at a higher nice; when nothing interactive wants the CPU they get it
all the same.
"""

from __future__ import annotations

from pathlib import Path

SANDBOX_SESSION_NICE = 10  # each sandbox command's session: the agents and what they run
RUNNER_SESSION_NICE = 5  # the detached runner's session: proxy, trainer and the demo's engine


def lower_session_weight(pid: int, nice: int) -> None:
    """Run the session that ``pid`` leads, with all it starts, at ``nice`` (best effort: a
    kernel without autogroups, or a process already gone, keeps the default)."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")
    except OSError:
        pass
