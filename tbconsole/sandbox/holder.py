"""How a sandbox's namespaces are made and joined: the holder's command line and the shell it
runs (overlay, mounts, the PID 1 that keeps them alive), and the command line of each exec."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from tbconsole.sandbox.spec import BASE_ENV, Bind, SandboxSpec

# Runs as PID 1 of the new namespaces, before chroot. $1..: merged upper work workdir root, then
# one "ro|rw source target" triple per bind.
SETUP_SCRIPT = r"""
set -e
merged=$1 upper=$2 work=$3 workdir=$4 root=$5
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper,workdir=$work" "$merged"
mount -t proc proc "$merged/proc"
mount --rbind /dev "$merged/dev"
mount -t tmpfs -o mode=1777 tmpfs "$merged/dev/shm"
mount --rbind /sys "$merged/sys"
mount -t tmpfs -o mode=1777 tmpfs "$merged/tmp"
# Hide every sandbox's state (this one's included) from the inside.
if [ -d "$merged$root" ]; then mount -t tmpfs -o mode=700 tmpfs "$merged$root"; fi
if [ -d "$merged/var/tmp" ]; then mount -t tmpfs -o mode=1777 tmpfs "$merged/var/tmp"; fi
shift 5
# The workdir starts empty even if the host has a folder of that name.
rm -rf "$merged$workdir"
mkdir -p "$merged$workdir" "$merged/logs"
# Binds come last, so that nothing above removes through them what a host folder holds.
while [ $# -ge 3 ]; do
  mode=$1 src=$2 dst=$3
  shift 3
  if [ -d "$src" ]; then mkdir -p "$merged$dst"; else mkdir -p "$(dirname "$merged$dst")" && touch "$merged$dst"; fi
  mount --bind "$src" "$merged$dst"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$merged$dst"; fi
done
ip link set lo up 2>/dev/null || true
exec setpriv --pdeathsig KILL chroot "$merged" /bin/bash -c "$INIT_SCRIPT"
"""

# PID 1 inside, already chrooted: say ready (commands joining earlier would get the host
# root), then stay alive and reap orphans — bash's SIGCHLD handling collects any child, so a
# finished background job does not linger as a zombie that `kill -0` still finds. Plain bash,
# so nothing depends on where the project (or its Python) lives.
INIT_SCRIPT = "trap 'exit 0' TERM; echo ready; while :; do sleep 3600 & wait $!; done"

# Runs inside the sandbox as root for each exec: switch user if asked, then run the command.
USER_PROLOGUE = r"""
cd -- "$1" || exit 1
u=$2; shift 2
case "$u" in ""|root|0) exec "$@";; esac
g=$(id -g -- "$u" 2>/dev/null) || g=$u
h=$(getent passwd "$u" | cut -d: -f6)
export HOME=${h:-/} USER=$u LOGNAME=$u
if getent passwd "$u" >/dev/null; then
  exec setpriv --reuid="$u" --regid="$g" --init-groups -- "$@"
fi
exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@"
"""


def holder_argv(spec: SandboxSpec, merged: Path, upper: Path, work: Path) -> list[str]:
    """The holder chain: a death signal to follow the runner, then the namespaces' PID 1."""
    # --kill-child: the namespace's PID 1 dies with unshare at any time, also while it is
    # still setting up (before it execs into the init that carries its own death signal).
    unshare = ["unshare", "--fork", "--kill-child", "--pid", "--mount", "--uts", "--ipc", "--propagation", "private"]
    if spec.isolate_network:
        unshare.append("--net")
    binds = [Bind(str(Path(p).resolve()), str(Path(p).resolve()), read_only=True) for p in spec.host_paths]
    # Outer targets first: a bind inside another one's target lands on top of it, not under it.
    binds += sorted(spec.binds, key=lambda b: len(PurePosixPath(b.target).parts))
    triples = [arg for b in binds for arg in ("ro" if b.read_only else "rw", b.source, b.target)]
    return [
        "setpriv", "--pdeathsig", "KILL", *unshare, "--", "/bin/sh", "-c", SETUP_SCRIPT,
        "holder", str(merged), str(upper), str(work), spec.workdir, str(spec.root), *triples,
    ]  # fmt: skip


def holder_env(folder: Path) -> dict[str, str]:
    # TBCONSOLE_SANDBOX marks every process of the holder chain (the init included).
    return {**BASE_ENV, "INIT_SCRIPT": INIT_SCRIPT, "TBCONSOLE_SANDBOX": str(folder)}


def enter_argv(init_pid: int, isolate_network: bool, cwd: str, user: str | int | None) -> list[str]:
    """Join the namespaces of PID 1 ``init_pid`` and its root, as ``user`` in ``cwd``; the
    command's own argv follows."""
    argv = ["nsenter", "-t", str(init_pid), "-m", "-u", "-i", "-p"]
    if isolate_network:
        argv.append("-n")
    # nsenter resolves --wd=DIR before entering the root, so cd happens in the prologue.
    user_arg = "" if user is None else str(user)
    return [*argv, "-r", "-w", "--", "/bin/sh", "-c", USER_PROLOGUE, "prologue", cwd, user_arg]
