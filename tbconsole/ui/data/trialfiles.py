"""What a trial left on disk, read for the transcript screen. Plain Python, no Textual, no Harbor
import (its JSON is read leniently: a file being written, or of a newer schema, must not break
the console).

- ``<trial_dir>/agent/trajectory.json``: ATIF (steps with source, message, reasoning,
  tool_calls, observation.results, metrics);
- ``<trial_dir>/verifier/test-stdout.txt`` / ``test-stderr.txt``; ``result.json`` (rewards,
  exception_info, task path → ``instruction.md``); ``exception.txt``; the agent's own logs
  (``agent/*.txt``, their tail) and record (``agent/*.trajectory.json``: how it exited);
- the proxy's capture file of the trial attempt (``RunFolder.capture_file``; read with
  ``tbconsole.record.capturefile``); its lines that carry tokens but no text are decoded with the
  model's tokenizer (``tbconsole.ui.data.tokenizer``).

What was read is handed on as ``tbconsole.ui.present.trial_outputs.TrialFiles``: presentation
builds the transcript from it without opening a file.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from tbconsole.harbor.taskset import INSTRUCTION_FILE
from tbconsole.ui.present.trial_outputs import AtifStep, TrialFiles

MAX_FILE = 2 << 20  # bytes read from any one file
AGENT_LOG_TAIL = 32 << 10  # bytes shown of each agent log: its end says how the agent stopped


def _open_file(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file. Not blocking: the agent's folder is
    bound into its sandbox while it runs, so it may hold a FIFO that no one writes to."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read(path: Path, limit: int = MAX_FILE) -> str | None:
    try:
        with _open_file(path) as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        text += f"\n… [cut at {limit} bytes]"
    return text


def _read_tail(path: Path, limit: int) -> str | None:
    try:
        with _open_file(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = f"… [first {size - limit} bytes left out]\n" + text.split("\n", 1)[-1]
    return text


def _content(value: Any) -> str:
    """ATIF message/observation content: a string or a list of content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text") or ""))
                else:
                    parts.append(f"[{part.get('type', '?')} part]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return str(value)


def parse_atif(body: Any) -> list[AtifStep]:
    steps: list[AtifStep] = []
    if not isinstance(body, dict):
        return steps
    for raw in body.get("steps") or []:
        if not isinstance(raw, dict):
            continue
        calls = []
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict):
                try:
                    args = json.dumps(call.get("arguments", {}), ensure_ascii=False)
                except (TypeError, ValueError):
                    args = str(call.get("arguments"))
                calls.append((str(call.get("function_name", "?")), args))
        observations = []
        obs = raw.get("observation")
        if isinstance(obs, dict):
            for result in obs.get("results") or []:
                if isinstance(result, dict):
                    observations.append(_content(result.get("content")))
        metrics = raw["metrics"] if isinstance(raw.get("metrics"), dict) else {}
        steps.append(
            AtifStep(
                step_id=int(raw.get("step_id") or len(steps) + 1),
                source=str(raw.get("source", "?")),
                message=_content(raw.get("message")),
                reasoning=raw.get("reasoning_content"),
                tool_calls=calls,
                observations=observations,
                prompt_tokens=metrics.get("prompt_tokens"),
                completion_tokens=metrics.get("completion_tokens"),
            )
        )
    return steps


def _signature(paths: list[Path]) -> tuple:
    out: list[tuple[str, int | None, int | None]] = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(p), None, None))
    return tuple(out)


def trial_paths(trial_dir: Path) -> dict[str, Path]:
    return {
        "trajectory": trial_dir / "agent" / "trajectory.json",
        "stdout": trial_dir / "verifier" / "test-stdout.txt",
        "stderr": trial_dir / "verifier" / "test-stderr.txt",
        "result": trial_dir / "result.json",
        "exception": trial_dir / "exception.txt",
        "config": trial_dir / "config.json",
    }


def agent_log_paths(trial_dir: Path) -> list[Path]:
    return sorted((trial_dir / "agent").glob("*.txt"))


def agent_record_paths(trial_dir: Path) -> list[Path]:
    """The agent's own record of its run beside the ATIF one (mini-swe-agent's
    ``mini-swe-agent.trajectory.json``, not ``trajectory.json``): it says how the agent exited."""
    return sorted((trial_dir / "agent").glob("*.trajectory.json"))


_EXIT_STATUS = re.compile(rb'"exit_status"\s*:\s*"([^"\\]{1,80})"')


def agent_exit(trial_dir: Path) -> str | None:
    """How the agent says it exited: the last ``exit_status`` of its own record (mini-swe-agent
    writes it in its ``info`` at the top and on its last message at the end), read from the file's
    ends only (a long run's record is megabytes). None when no agent record says."""
    for path in reversed(agent_record_paths(trial_dir)):
        try:
            with _open_file(path) as handle:
                size = os.fstat(handle.fileno()).st_size
                head = handle.read(64 << 10)
                handle.seek(max(len(head), size - (8 << 10)))
                tail = handle.read(8 << 10)
        except OSError:
            continue
        found = _EXIT_STATUS.findall(tail) or _EXIT_STATUS.findall(head)
        if found:
            return found[-1].decode("utf-8", errors="replace")
    return None


def files_signature(trial_dir: str | Path | None) -> tuple:
    if not trial_dir:
        return ()
    trial_dir = Path(trial_dir)
    return _signature([*trial_paths(trial_dir).values(), *agent_log_paths(trial_dir), *agent_record_paths(trial_dir)])


def load_trial_files(trial_dir: str | Path | None) -> TrialFiles:
    if not trial_dir:
        return TrialFiles(trial_dir=None)
    trial_dir = Path(trial_dir)
    paths = trial_paths(trial_dir)
    logs = agent_log_paths(trial_dir)
    records = agent_record_paths(trial_dir)
    out = TrialFiles(trial_dir=trial_dir, signature=_signature([*paths.values(), *logs, *records]))
    raw = _read(paths["trajectory"])
    if raw is not None:
        try:
            out.steps = parse_atif(json.loads(raw))
        except ValueError:
            out.problems.append("agent/trajectory.json is not complete JSON yet")
    out.verifier_stdout = _read(paths["stdout"], 256 << 10)
    out.verifier_stderr = _read(paths["stderr"], 256 << 10)
    task_path = None
    raw = _read(paths["result"])
    if raw is not None:
        try:
            result = json.loads(raw)
            verifier = result.get("verifier_result") or {}
            out.rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
            exc = result.get("exception_info")
            if isinstance(exc, dict):
                out.exception = (
                    f"{exc.get('exception_type', '?')}: {exc.get('exception_message', '')}\n"
                    f"{exc.get('exception_traceback', '')}"
                ).strip()
            task_path = ((result.get("config") or {}).get("task") or {}).get("path")
        except (ValueError, AttributeError):
            out.problems.append("result.json could not be read")
    if task_path is None:
        raw = _read(paths["config"])
        if raw is not None:
            try:
                task_path = ((json.loads(raw) or {}).get("task") or {}).get("path")
            except (ValueError, AttributeError):
                pass
    if out.exception is None:
        out.exception = _read(paths["exception"], 64 << 10)
    for log in logs:
        tail = _read_tail(log, AGENT_LOG_TAIL)
        if tail:
            out.agent_logs.append((f"agent/{log.name}", tail))
    out.agent_exit = agent_exit(trial_dir)
    if task_path:
        out.instruction = _read(Path(task_path) / INSTRUCTION_FILE, 64 << 10)
    if out.instruction is None:
        for step in out.steps:
            if step.source == "user":
                out.instruction = step.message
                break
    return out
