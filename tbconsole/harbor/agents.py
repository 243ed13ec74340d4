"""Third-party agent CLIs for the local sandbox: where they are installed and whether they are.

``scripts/agents.sh`` (run by ``make demo`` / ``make test`` through ``scripts/bootstrap.sh``)
installs the npm packages pinned in ``scripts/agents.lock`` into ``.agents/`` (git-ignored;
``TBCONSOLE_AGENTS_DIR`` moves it). A trial.json reaches them through two placeholders that
``tbconsole.runner.trials.load_template`` fills when it reads the file, so the same file works
from any clone:

- ``{agents}``: that folder (its CLIs are in ``{agents}/node_modules/.bin``);
- ``{venv}``: this Python environment (``sys.prefix``; mini-swe-agent runs from it).

Both are shown read-only inside the local sandbox through the environment's ``host_paths``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
LOCK = PROJECT / "scripts" / "agents.lock"
SETUP = "scripts/agents.sh"


@dataclass(frozen=True)
class Cli:
    command: str  # the executable on PATH
    package: str  # the npm package
    label: str


CLIS = {  # Harbor's agent name → its CLI
    "claude-code": Cli("claude", "@anthropic-ai/claude-code", "Claude Code"),
    "codex": Cli("codex", "@openai/codex", "Codex CLI"),
}


def agents_dir() -> Path:
    configured = os.environ.get("TBCONSOLE_AGENTS_DIR")
    return (PROJECT / configured).resolve() if configured else PROJECT / ".agents"


def bin_dir() -> Path:
    return agents_dir() / "node_modules" / ".bin"


def venv_dir() -> Path:
    return Path(sys.prefix)


def placeholders() -> dict[str, str]:
    """The host paths a trial.json may name as ``{agents}`` and ``{venv}``."""
    return {"agents": str(agents_dir()), "venv": str(venv_dir())}


def pins() -> dict[str, str]:
    """npm package → pinned version, from scripts/agents.lock."""
    pinned = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            package, _, version = line.rpartition("@")
            pinned[package] = version
    return pinned


def installed_version(package: str) -> str | None:
    try:
        return json.loads((agents_dir() / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def problem(agent: str) -> str | None:
    """Why ``agent``'s CLI cannot run from ``.agents/`` (None: it can, or it needs no CLI)."""
    cli = CLIS.get(agent)
    if cli is None:
        return None
    want = pins().get(cli.package)
    have = installed_version(cli.package)
    where = agents_dir()
    if have is None or not os.access(bin_dir() / cli.command, os.X_OK):
        return (
            f"{cli.label} ({cli.package}@{want}) is not installed in {where}: run {SETUP} "
            f"(it needs node, npm and the npm registry; make demo and make test run it)."
        )
    if want and have != want:
        return f"{cli.label} in {where} is {have}, but {LOCK.relative_to(PROJECT)} pins {want}: run {SETUP} again."
    return None
