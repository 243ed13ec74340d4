"""Harbor environment backed by the local namespace sandbox (no Docker, no network needed).

Load it by import path: ``EnvironmentConfig(import_path="tbconsole.sandbox:LocalSandbox")``
or ``harbor run -e tbconsole.sandbox:LocalSandbox``.

What a task gets:
- the host's root filesystem as a private copy-on-write overlay, an empty ``/tmp``, and its
  ``[environment] workdir`` (default ``/app``) created empty;
- ``environment/setup.sh``, when the task has one, run as root in the workdir at start: it
  plays the role a Dockerfile plays elsewhere. Tasks that need a container image
  (``docker_image`` or ``environment/Dockerfile``) and have no ``setup.sh`` are refused, since
  the host root is not that image (``ignore_image=true`` runs them anyway);
- the host's network by default, so agents inside reach a proxy on loopback. A task with
  ``network_mode = "no-network"`` gets its own network namespace with only its own loopback:
  nothing outside the sandbox is reachable, the model proxy included, so only agents that
  run on the host (oracle, terminus-2) can work on such tasks;
- the task's ``memory_mb`` and ``cpus`` as cgroup limits where the kernel lets us create
  cgroups; otherwise a warning in the trial log says they were not applied;
- the trial folder's ``agent/``, ``verifier/`` and artifacts folders bound at ``/logs/agent``,
  ``/logs/verifier`` and ``/logs/artifacts`` (Harbor's mounts; ``auto_mounting=false`` turns
  them off): what the agent logs is in the trial folder as it is written, so the console shows
  a starting agent's log at once rather than after the agent ends, and Harbor skips the copies
  out. The environment's ``mounts`` (binds only) are shown too.
"""

from __future__ import annotations

import asyncio
import os
import stat
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from harbor.models.trial.paths import EnvironmentPaths
from pydantic import Field

from tbconsole.sandbox.namespace import (
    DEFAULT_ROOT,
    Bind,
    NamespaceSandbox,
    SandboxError,
    SandboxSpec,
)

SETUP_SCRIPT = "setup.sh"
DEFAULT_WORKDIR = "/app"


class LocalSandboxOptions(EnvironmentOptions):
    root: str | None = None
    """Folder holding the sandboxes' overlay layers (default /var/tmp/tbconsole-sandboxes)."""
    ignore_image: bool = False
    """Run tasks that ask for a container image on the host root anyway."""
    workdir: str = DEFAULT_WORKDIR
    """Working directory for tasks that do not set [environment] workdir."""
    host_paths: list[str] = []
    """Host folders shown read-only at the same path inside (e.g. a virtualenv with an agent)."""
    auto_mounting: bool = Field(
        default=True,
        description="Bind the trial folder's agent/, verifier/ and artifacts folders inside, so "
        "the agent's log is on the host as it is written (false: copied out after the agent).",
    )


class LocalSandbox(BaseEnvironment):
    options_model = LocalSandboxOptions

    def __init__(self, *args: Any, **kwargs: Any):
        self._sandbox: NamespaceSandbox | None = None
        self._stopped = asyncio.Event()
        self._stopped.set()
        self._stopping: asyncio.Future | None = None
        self._started = False  # start() completed once: from then on, a missing sandbox is an error
        # On unless asked otherwise (Harbor's default is off): the sandbox shares this machine's
        # filesystem, so the binds cost nothing, and the console shows the agent's log live.
        kwargs.setdefault("auto_mounting", True)
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "tbconsole-local"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, mounted=True)

    @property
    def _options(self) -> LocalSandboxOptions:
        assert isinstance(self.options, LocalSandboxOptions)
        return self.options

    @property
    def workdir(self) -> str:
        return self.task_env_config.workdir or self._options.workdir

    def _validate_definition(self) -> None:
        for mount in self._host_mounts:
            if mount.get("type", "bind") != "bind":
                raise ValueError(
                    f"The local sandbox shows host folders only (bind mounts); the "
                    f"{mount.get('type')} mount at {mount.get('target')} needs a container "
                    "environment (e.g. docker)."
                )
        if self._options.ignore_image or (self.environment_dir / SETUP_SCRIPT).is_file():
            return
        image = self.task_env_config.docker_image
        dockerfile = (self.environment_dir / "Dockerfile").is_file()
        if image or dockerfile:
            what = f"the image {image}" if image else "environment/Dockerfile"
            raise ValueError(
                f"Task '{self.environment_name}' needs {what}, but the local sandbox runs on "
                "this machine's root filesystem and builds no images. Add "
                "environment/setup.sh to prepare the task on the host root, run it with a "
                "container environment (e.g. docker, e2b), or pass ignore_image=true to try it "
                "on the host root as is."
            )

    async def start(self, force_build: bool) -> None:
        spec = SandboxSpec(
            name=self.session_id,
            workdir=self.workdir,
            isolate_network=self._network_disabled,
            memory_mb=self._effective_memory_mb,
            cpus=self._effective_cpus,
            root=Path(self._options.root) if self._options.root else DEFAULT_ROOT,
            host_paths=tuple(self._options.host_paths),
            binds=self._binds(),
        )
        # A local, not self._sandbox: a stop() from elsewhere may take that one at any await.
        sandbox = self._sandbox = NamespaceSandbox(spec)
        self._stopped.clear()
        try:
            await sandbox.start()
            if sandbox.limits_note:
                self.logger.warning(f"{self.session_id}: {sandbox.limits_note}")
            paths = EnvironmentPaths()
            await self.ensure_dirs([paths.agent_dir, paths.verifier_dir, paths.artifacts_dir])
            await self._run_setup_script()
            self._started = True
        except BaseException:  # a failed or cancelled start leaves nothing behind either
            await asyncio.shield(self.stop(delete=True))
            raise

    def _binds(self) -> tuple[Bind, ...]:
        """Harbor's host mounts (empty with auto_mounting off and no explicit mounts); a missing
        host folder is made, as Compose does unless a bind says create_host_path=false."""
        binds = []
        for mount in self._host_mounts:
            source = Path(mount["source"])
            if not source.exists() and mount.get("bind", {}).get("create_host_path", True):
                source.mkdir(parents=True, exist_ok=True)
            binds.append(Bind(str(source.resolve()), str(PurePosixPath(mount["target"])), bool(mount.get("read_only"))))
        return tuple(binds)

    async def prepare_logs_for_host(self) -> None:
        # Harbor calls this instead of copying a bound log folder out.
        await asyncio.to_thread(self._tidy_bound_folders)

    def _tidy_bound_folders(self) -> None:
        """Leave in the bound host folders what a copy out would have left: files owned by the
        runner's user (not by the uid the agent ran as) and no FIFOs, sockets or device nodes,
        on which a reader of the trial folder (Harbor, the console) would block."""
        uid, gid = os.geteuid(), os.getegid()
        for mount in self._host_mounts:
            if mount.get("read_only") or not Path(mount["source"]).is_dir():
                continue
            # By folder descriptor, never by path: a process the agent left may still swap a
            # folder for a symlink to elsewhere on the host, and root follows none of them here.
            for _folder, dirs, files, fd in os.fwalk(mount["source"]):
                for name in [*dirs, *files]:
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                            os.unlink(name, dir_fd=fd)
                        elif (st.st_uid, st.st_gid) != (uid, gid):
                            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        continue  # gone meanwhile, or not ours to change: leave it as it is

    async def _run_setup_script(self) -> None:
        if not (self.environment_dir / SETUP_SCRIPT).is_file():
            return
        # Copied in (not read from the host path) so tasks under /tmp work; removed afterwards
        # so the agent does not see how its task was made.
        staged = f"/run/tbconsole-setup-{uuid.uuid4().hex[:8]}"
        await self.upload_dir(self.environment_dir, staged)
        result = await self.exec(
            f"bash {staged}/{SETUP_SCRIPT}; rc=$?; rm -rf {staged}; exit $rc",
            cwd=self.workdir,
            user="root",
            env={"TASK_ENVIRONMENT_DIR": staged},
        )
        if result.return_code != 0:
            raise RuntimeError(
                f"environment/{SETUP_SCRIPT} of task '{self.environment_name}' failed "
                f"(exit {result.return_code}): {(result.stderr or result.stdout or '').strip()[-2000:]}"
            )

    async def stop(self, delete: bool) -> None:
        # Always removes everything: a stopped sandbox has no processes, mounts or files left.
        # Concurrent calls (a failed start, then Harbor's cleanup) share one stop, so nobody
        # sees "stopped" while another call is still removing the folder.
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_sandbox())
        await asyncio.shield(self._stopping)

    async def _stop_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        try:
            if sandbox is not None:
                await sandbox.stop()
                # Nothing inside runs any more: what the verifier (or a process the agent left)
                # wrote into the bound folders is tidied as the agent's log was.
                await asyncio.to_thread(self._tidy_bound_folders)
        finally:
            self._stopping = None
            self._stopped.set()

    async def wait_stopped(self) -> None:
        """Harbor stops a cancelled trial's environment in a shielded background task; a runner
        that must not return before the sandbox is gone waits here."""
        await self._stopped.wait()

    def _require(self) -> NamespaceSandbox:
        if self._sandbox is None:
            raise SandboxError("The local sandbox is not running; start() it first.")
        return self._sandbox

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        sink = self._output_callback()
        try:
            outcome = await self._require().exec(
                command,
                cwd=cwd or self.workdir,
                env=self._merge_env(env),
                user=self._resolve_user(user),
                timeout_sec=timeout_sec or None,
                on_output=sink,
            )
        except TimeoutError as exc:
            # Same contract as Harbor's Docker environment.
            raise RuntimeError(str(exc)) from None
        return ExecResult(
            stdout=outcome.stdout.decode(errors="replace") or None,
            stderr=outcome.stderr.decode(errors="replace") or None,
            return_code=outcome.return_code,
        )

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._require().upload(Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._require().upload(Path(source_dir), target_dir)

    # A sandbox whose start() never completed holds no files: Harbor's best-effort log download
    # after a failed start fetches nothing instead of logging a traceback. One that went away
    # after starting (a verifier's download, say) is still an error.
    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        if self._started or self._sandbox is not None:
            await self._require().download(source_path, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        if self._started or self._sandbox is not None:
            await self._require().download(source_dir, Path(target_dir))
