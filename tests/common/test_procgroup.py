"""tbconsole.common.procgroup: a child in a session of its own is killed with all it started."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tbconsole.common.procgroup import descendants, kill_group, kill_process, kill_tree

from tests_support.prereqs import missing

pytestmark = pytest.mark.e2e


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """``pid`` no longer runs (gone, or a zombie its parent has not reaped)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def _with_grandchild(script: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """A shell in a session of its own running ``script``, which prints the grandchild's pid
    first; the shell and that pid. The shell is killed after, if it is still there."""
    child = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        yield child, int(child.stdout.readline())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_group_is_killed_with_a_grandchild_and_a_second_kill_finds_none():
    # The shell starts a grandchild in the background and waits on it: both in the child's group.
    with _with_grandchild("sleep 60 & echo $!; wait") as (child, grandchild):
        assert kill_group(child.pid) is True
        assert child.wait(10) == -signal.SIGKILL
        assert _gone(grandchild)


def test_a_group_that_is_gone_is_not_an_error():
    child = subprocess.Popen(["true"], start_new_session=True)
    child.wait()
    assert kill_group(child.pid) is False


def test_another_signal_is_sent_to_the_whole_group():
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(3)); "
        "print(1, flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        child.stdout.readline()  # its handler is set
        assert kill_group(child.pid, signal.SIGTERM) is True
        assert child.wait(10) == 3
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_group_that_is_not_ours_to_signal_is_not_an_error():
    """A group of root's, signalled by a forked child that became an unprivileged user (nobody)."""
    if os.geteuid() != 0:
        missing("playing another user needs root", "Run the tests as root.")
    owned = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 when kill_group said False, 1 otherwise; never back into pytest
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                os._exit(0 if kill_group(owned.pid, 0) is False else 1)
            finally:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert owned.poll() is None and kill_group(owned.pid, 0) is True  # there, and root's to signal
    finally:
        owned.kill()
        owned.wait()


def test_the_tree_is_killed_with_a_descendant_that_left_the_group():
    # The grandchild makes a session of its own: the group kill misses it, the walk of /proc finds it.
    with _with_grandchild("setsid sh -c 'echo $$; exec sleep 60' & wait") as (child, grandchild):
        assert os.getsid(grandchild) == grandchild and grandchild in descendants(child.pid)
        kill_tree(child.pid)
        assert child.wait(10) == -signal.SIGKILL
        assert _gone(grandchild)


def test_a_process_that_is_gone_is_not_an_error():
    child = subprocess.Popen(["true"])
    child.wait()
    assert kill_process(child.pid) is False
    kill_tree(child.pid)  # nothing left to kill: no error either
