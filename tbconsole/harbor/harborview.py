"""The command that opens one trial's Harbor trial folder in Harbor's own viewer (``harbor view``):
the one place that writes it, for the console's transcript (``h``) and ``tbconsole export
--harbor-view``. Plain Python: nothing is started here.

``harbor view FOLDER --jobs`` serves every job folder under FOLDER and each job's trial folders.
Harbor writes a trial's folder as ``<trials_dir>/<trial>`` (the run's ``trials/step_N/`` unless
trial.json names a ``trials_dir``), so the trial folder's parent is the job and its grandparent
the folder to serve; the viewer shows the trial at ``/jobs/<job>/trials/<trial>``, on the first
free port of 8080-8089 (it prints the address it took).

The folder is the one the runner reported, exactly: a task whose name holds a control character
or a bidi override makes a folder of that name, and the command must name it. Such characters
are written as ``$'…'`` escapes (``\\x1b``, as bash, zsh and ksh read them), so the command
names the real folder and is still one line of plain text to show, copy and paste.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tbconsole.common.inert import CONTROL

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


def _escaped(ch: str) -> bool:
    """Written as a ``$'…'`` escape: a control character (a tab, a newline too: the command stays
    one line), a bidi override, or a byte the file name did not decode (a lone surrogate)."""
    return ch in "\t\n" or CONTROL.match(ch) is not None or "\ud800" <= ch <= "\udfff"


def shell_word(word: str) -> str:
    """``word`` quoted for a shell, as ``shlex.quote`` does, unless it holds a character
    ``_escaped`` names: then as ``$'…'`` with those written as ``\\xHH`` escapes of their bytes
    (the file system's encoding), so the quoted word holds none of them and means ``word``."""
    if not any(_escaped(ch) for ch in word):
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif _escaped(ch):
            out.append("".join(f"\\x{b:02x}" for b in os.fsencode(ch)))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def harbor_view(trial_dir: str | Path) -> HarborView:
    """The command for the Harbor trial folder ``trial_dir`` (as ``trial.ended`` reports it:
    the real path, never the inert text a view shows of it)."""
    folder = Path(trial_dir)
    job, jobs = folder.parent, folder.parent.parent
    command = " ".join(shell_word(w) for w in (harbor_executable(), "view", str(jobs), "--jobs"))
    return HarborView(command=command, path=f"/jobs/{quote(job.name)}/trials/{quote(folder.name)}")
