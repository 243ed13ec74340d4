"""Task folders: finding them under a tasks dir and reading them through Harbor's task model.

The recipe's rule: every directory under ``tasks_dir`` that holds a ``task.toml``, in sorted
order. Symlinked task folders are fine (upstream rejected them as "escaping" the tasks dir).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BUNDLED_TASKS_DIR = Path(__file__).parents[1] / "tasks"

# A task folder's files as Harbor lays them out, named here once for every module that finds, reads
# or writes one (the demo's variants are written with them). Relative to the task folder.
CONFIG_FILE = "task.toml"  # a folder is a task once it holds one (``discover``)
INSTRUCTION_FILE = "instruction.md"
TESTS_DIR = "tests"
TEST_SCRIPT = f"{TESTS_DIR}/test.sh"  # the verifier runs it
SOLVE_SCRIPT = "solution/solve.sh"  # the oracle agent runs it
SETUP_SCRIPT = "environment/setup.sh"  # the local sandbox runs it to prepare the task on the host root
DOCKERFILE = "environment/Dockerfile"


class TaskSetError(ValueError):
    """The tasks dir is unusable; the message says why."""


@dataclass(frozen=True)
class TaskInfo:
    name: str
    path: Path
    difficulty: str | None
    category: str | None
    instruction: str
    docker_image: str | None
    agent_timeout_sec: float | None
    verifier_timeout_sec: float | None
    has_tests: bool
    has_solution: bool
    has_setup: bool
    has_dockerfile: bool

    @property
    def runs_locally(self) -> bool:
        """Whether the local sandbox can run it as is (it needs no container image)."""
        return self.has_tests and (self.has_setup or not (self.docker_image or self.has_dockerfile))

    @property
    def local_note(self) -> str:
        if not self.has_tests:
            return f"no {TEST_SCRIPT}: cannot be verified"
        if not self.runs_locally:
            return "needs a container image (docker_image/Dockerfile)"
        return "runs in the local sandbox"


def discover(tasks_dir: Path) -> list[Path]:
    """Task folders directly under tasks_dir (each with a task.toml), sorted by name."""
    tasks_dir = Path(tasks_dir)
    if not tasks_dir.exists():
        raise TaskSetError(f"Tasks dir {tasks_dir} does not exist.")
    if not tasks_dir.is_dir():
        raise TaskSetError(f"Tasks dir {tasks_dir} is not a directory.")
    found = sorted(p for p in tasks_dir.iterdir() if (p / CONFIG_FILE).is_file())
    if not found:
        raise TaskSetError(
            f"Tasks dir {tasks_dir} holds no task folders (directories with a {CONFIG_FILE}). "
            "Point it at the folder that contains the tasks, e.g. .../terminal-bench."
        )
    return found


def load(task_dir: Path) -> TaskInfo:
    """Read one task folder with Harbor's Task model (verifier files optional, so tasks
    shipped without their tests can still be listed)."""
    from harbor.models.task.task import Task

    task_dir = Path(task_dir)
    try:
        task = Task(task_dir, disable_verification=True)
    except (OSError, ValueError) as exc:
        raise TaskSetError(f"{task_dir.name}: not a valid Harbor task: {exc}") from None
    env = task.config.environment
    meta = task.config.metadata
    return TaskInfo(
        name=task.name,
        path=task_dir,
        difficulty=meta.get("difficulty"),
        category=meta.get("category"),
        instruction=task.instruction,
        docker_image=env.docker_image,
        agent_timeout_sec=task.config.agent.timeout_sec,
        verifier_timeout_sec=task.config.verifier.timeout_sec,
        has_tests=(task_dir / TEST_SCRIPT).is_file(),
        has_solution=(task_dir / SOLVE_SCRIPT).is_file(),
        has_setup=(task_dir / SETUP_SCRIPT).is_file(),
        has_dockerfile=(task_dir / DOCKERFILE).is_file(),
    )


def load_all(tasks_dir: Path) -> list[TaskInfo]:
    return [load(path) for path in discover(tasks_dir)]
