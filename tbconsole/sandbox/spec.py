"""What a sandbox is asked for and what it answers: its spec, an exec's outcome, its errors and
the defaults every sandbox shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ROOT = Path(os.environ.get("TBCONSOLE_SANDBOX_ROOT", "/var/tmp/tbconsole-sandboxes"))
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {"PATH": BASE_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm-256color"}


class SandboxUnavailable(RuntimeError):
    """This machine cannot run the local sandbox; the message says what to do."""


class SandboxError(RuntimeError):
    """A sandbox operation failed (the sandbox itself may still be usable)."""


@dataclass
class ExecOutcome:
    stdout: bytes
    stderr: bytes
    return_code: int


@dataclass(frozen=True)
class Bind:
    """A host path shown inside at ``target``: what a Harbor environment's bind mounts ask for."""

    source: str
    target: str
    read_only: bool = False


@dataclass
class SandboxSpec:
    name: str
    workdir: str = "/app"
    isolate_network: bool = False
    memory_mb: int | None = None
    cpus: float | None = None
    root: Path = field(default_factory=lambda: DEFAULT_ROOT)
    # Host folders shown read-only at the same path inside, even where the sandbox hides the
    # host's view (/tmp, /var/tmp): e.g. the project's virtualenv, for agents run from it.
    host_paths: tuple[str, ...] = ()
    # Host paths bound at their own targets, after the workdir is made: e.g. the trial folder's
    # agent/ and verifier/ at /logs/agent and /logs/verifier, so what the agent writes there is
    # on the host as it is written (the console tails it) instead of copied after the agent.
    binds: tuple[Bind, ...] = ()
