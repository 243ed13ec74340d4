"""The command that opens one trial's Harbor trial folder in Harbor's own viewer (``harbor view``):
the one place that writes it, for the console's transcript (``h``) and ``tbconsole export
--harbor-view``. Plain Python: nothing is started here.

``harbor view FOLDER --jobs`` serves every job folder under FOLDER and each job's trial folders.
Harbor writes a trial's folder as ``<trials_dir>/<trial>`` (the run's ``trials/step_N/`` unless
trial.json names a ``trials_dir``), so the trial folder's parent is the job and its grandparent
the folder to serve; the viewer shows the trial at ``/jobs/<job>/trials/<trial>``, on the first
free port of 8080-8089 (it prints the address it took).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DEFAULT_ADDRESS = "http://127.0.0.1:8080"  # harbor view's first choice (the next free port up to 8089)


@dataclass(frozen=True)
class HarborView:
    command: str  # the shell command line that serves the trial's folder
    path: str  # where the viewer shows the trial, after the address the command prints

    @property
    def url(self) -> str:
        return DEFAULT_ADDRESS + self.path

    def describe(self) -> str:
        """Two lines: the command, then where to look."""
        return f"{self.command}\nthen open {self.url} (or that path at the address it prints)"


def harbor_executable() -> str:
    """``harbor`` beside this Python (the project's virtualenv) when it is there, else from PATH."""
    beside = Path(sys.executable).parent / "harbor"
    return str(beside) if beside.is_file() else "harbor"


def harbor_view(trial_dir: str | Path) -> HarborView:
    """The command for the Harbor trial folder ``trial_dir`` (as ``trial.ended`` reports it)."""
    folder = Path(trial_dir)
    job, jobs = folder.parent, folder.parent.parent
    command = shlex.join([harbor_executable(), "view", str(jobs), "--jobs"])
    return HarborView(command=command, path=f"/jobs/{quote(job.name)}/trials/{quote(folder.name)}")
