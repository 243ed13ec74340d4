"""Benchmarks: `tbconsole bench NAME`. Each prints its figures beside a baseline measured in
the same run, and the ratio between them, so numbers from different machines compare."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path


def attach_on_pty(log_path: Path, cols: int, rows: int, args: tuple[str, ...] = ()) -> tuple[int, subprocess.Popen]:
    """`tbconsole attach [ARGS] LOG_PATH` in a fresh process on a pseudo-terminal of cols×rows:
    (the terminal's master end, the process). The pty is its controlling terminal, as a real one
    is: if this process dies, the console is hung up instead of spinning on a dead terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbconsole", "attach", *args, str(log_path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    return master, proc
