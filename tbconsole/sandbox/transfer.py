"""Files in and out of a sandbox as tar streams through an exec, unpacked on the host with a
filter that keeps everything inside the target."""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import tarfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from tbconsole.common import atomic
from tbconsole.sandbox.spec import ExecOutcome, SandboxError

# Runs a shell command inside as root from "/", with these bytes (or nothing) on its stdin.
RootShell = Callable[[str, bytes | None], Awaitable[ExecOutcome]]


async def upload(run: RootShell, source: Path, target: str) -> None:
    """Copy a host file or folder to ``target`` inside (folder: its contents)."""
    source = Path(source)
    if source.is_dir():
        parent, names, dest = str(source), ["."], target
    else:
        parent, names, dest = str(source.parent), [source.name], str(Path(target).parent)
    packed = await _tar_create(parent, names)
    script = f"mkdir -p {shlex.quote(dest)} && tar -x -f - -C {shlex.quote(dest)} --no-same-owner"
    if not source.is_dir() and source.name != Path(target).name:
        tmp = f"{dest}/.tbc-upload-{uuid.uuid4().hex[:8]}"
        script = (
            f"mkdir -p {shlex.quote(tmp)} && tar -x -f - -C {shlex.quote(tmp)} "
            f"--no-same-owner && mv -f {shlex.quote(tmp + '/' + source.name)} "
            f"{shlex.quote(target)} && rmdir {shlex.quote(tmp)}"
        )
    result = await run(script, packed)
    if result.return_code != 0:
        raise SandboxError(f"Upload to {target} failed: {result.stderr.decode(errors='replace')}")


async def download(run: RootShell, source: str, target: Path) -> None:
    """Copy ``source`` (file or folder) from inside to the host path ``target``."""
    target = Path(target)
    check = await run(f"test -d {shlex.quote(source)}", None)
    is_dir = check.return_code == 0
    if is_dir:
        script = f"tar -c -f - -C {shlex.quote(source)} ."
    else:
        parent, name = os.path.split(source.rstrip("/"))
        script = f"tar -c -f - -C {shlex.quote(parent or '/')} {shlex.quote(name)}"
    result = await run(script, None)
    if result.return_code != 0:
        raise SandboxError(f"Download of {source} failed: {result.stderr.decode(errors='replace')}")
    await asyncio.to_thread(_tar_extract, result.stdout, target, is_dir)


async def _tar_create(parent: str, names: list[str]) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        "tar", "-c", "-f", "-", "-C", parent, *names, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SandboxError(f"Packing {parent} failed: {err.decode(errors='replace')}")
    return out


def _tar_extract(data: bytes, target: Path, is_dir: bool) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        if is_dir:
            target.mkdir(parents=True, exist_ok=True)
            archive.extractall(target, filter=_host_filter)
            return
        member = next(m for m in archive.getmembers() if m.isfile() or m.issym())
        extracted = archive.extractfile(member)
        if extracted is None:
            raise SandboxError(f"{member.name} is not a regular file")
        atomic.write_bytes(target, extracted.read())


def _host_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    # Like tarfile's data filter, but skip device nodes/FIFOs an agent may have left.
    if member.isdev():
        return None
    return tarfile.data_filter(member, dest)
