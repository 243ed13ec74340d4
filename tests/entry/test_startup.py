"""`tbconsole train` / `tbconsole demo` before the run starts: usage errors and a dead gateway are
said before the cookbook, torch or wandb are imported (what makes them fast; `tbconsole bench
startup` times it), in one `tbconsole <command>: <message>` line; a refused command leaves no folder
behind and a folder it would have resumed as it was; a plain rerun of `tbconsole demo` says which
stopped demo it goes on with."""

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tbconsole.demo import recipe as demo
from tbconsole.entry import run as entry_run
from tbconsole.entry.train import run_demo
from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR
from tbconsole.record.lease import Lease

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# Seconds to import each (Harbor's task models are not among them: the task check reads task.toml
# with them in a tenth of a second; its agents pull in litellm).
HEAVY = ("torch", "tinker_cookbook", "wandb", "litellm", "transformers")


def tbconsole(*args: str, cwd: Path, importtime: bool = False, **env: str) -> tuple[int, str, set[str]]:
    """Exit status, stderr (without import timings) and the top-level packages imported."""
    done = subprocess.run(
        [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "tbconsole", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
    )
    lines = done.stderr.splitlines()
    imported = {line.split("|")[-1].strip().split(".")[0] for line in lines if line.startswith("import time:")}
    message = "\n".join(line for line in lines if not line.startswith("import time:"))
    return done.returncode, message, imported


def one_line(message: str, prog: str) -> bool:
    return message.startswith(f"{prog}: ") and len(message.strip().splitlines()) == 1 and "Traceback" not in message


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on (bound here, so nothing else takes it meanwhile)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def train_args(tmp_path: Path, base_url: str) -> list[str]:
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"agent": {"name": "nop"}}))
    return [
        "train",
        f"config.base_url={base_url}",
        "config.model_name=tbconsole/qwen3-tiny",
        "config.learning_rate=1e-4",
        "config.max_tokens=64",
        f"config.log_path={tmp_path / 'run'}",
        f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}",
        f"harbor.trial_config={trial}",
    ]


def test_a_usage_error_and_a_dead_gateway_are_said_before_the_heavy_imports(tmp_path, closed_port):
    args = train_args(tmp_path, f"http://127.0.0.1:{closed_port}")
    code, message, imported = tbconsole(
        *[a for a in args if not a.startswith("config.learning_rate")], cwd=tmp_path, importtime=True
    )
    assert code == 2 and one_line(message, "tbconsole train"), message
    assert "config.learning_rate" in message and not imported & set(HEAVY), imported & set(HEAVY)
    code, message, imported = tbconsole(*args, cwd=tmp_path, importtime=True, TINKER_API_KEY="tml-test")
    assert code == 1 and one_line(message, "tbconsole train") and "is not answering" in message, message
    assert not imported & set(HEAVY), imported & set(HEAVY)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "arg, says",
    [
        ("config.dataset_builder.tasks_dir=/nonexistent", "config.dataset_builder.tasks_dir: "),
        ("harbor.trial_config=/tmp/nope/trial.json", "harbor.trial_config /tmp/nope/trial.json does not exist"),
        ("config.model_name=Qwen/Qwen3-8B", "is not a local model"),
        ("config.lernrate=1", "did you mean config.learning_rate?"),
    ],
)
def test_a_refused_demo_leaves_nothing_behind(tmp_path, arg, says):
    code, message, _ = tbconsole("demo", arg, cwd=tmp_path)
    assert code == 2 and one_line(message, "tbconsole demo") and says in message, message
    assert list(tmp_path.iterdir()) == [], "a refused command creates no run folder"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.root  # the demo's checks before the imports include the local sandbox
def test_a_refused_resume_leaves_its_folder_as_it_was(tmp_path):
    folder = tmp_path / "runs" / "demo-1"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("")
    Lease(folder, ["tbconsole", "demo", f"config.log_path={folder}"]).acquire().release()
    before = snapshot(folder)
    code, message, _ = tbconsole("demo", f"config.log_path={folder}", "config.max_tokens=0", cwd=tmp_path)
    assert code == 2 and one_line(message, "tbconsole demo") and "config.max_tokens" in message, message
    assert snapshot(folder) == before


def test_wandb_is_imported_only_when_a_wandb_run_starts():
    script = (
        "import sys\n"
        "from tbconsole.runner.wandb_advisories import defer_wandb\n"
        "defer_wandb()\n"
        "import tbconsole.runner.train, tbconsole.runner.options\n"
        "from tinker_cookbook.utils import ml_log\n"
        "assert ml_log._wandb_available  # the cookbook still sees it installed\n"
        "assert type(sys.modules['wandb']).__name__ == '_DeferredModule', 'imported at start'\n"
        "import wandb\n"
        "assert wandb.Table is not None and type(sys.modules['wandb']).__name__ == 'module'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.root
def test_a_plain_rerun_of_the_demo_goes_on_with_the_stopped_one_and_says_so(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "runs" / "demo-20260101-100000"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text(
        json.dumps({"v": 1, "kind": "run.ended", "ts": 1767225600.0, "status": "stopped", "step": 3}) + "\n"
    )
    (folder / "checkpoints.jsonl").write_text(json.dumps({"name": "000003", "batch": 3, "state_path": "t://3"}) + "\n")
    Lease(folder, ["tbconsole", "demo", f"config.log_path={folder.relative_to(tmp_path)}"]).acquire().release()
    started = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(entry_run, "headless", lambda parsed, prepare, **_: started.append(parsed) or 0)
    monkeypatch.setattr(entry_run, "detached", lambda *args, **_: pytest.fail("no terminal here: headless"))
    monkeypatch.setattr(logging, "raiseExceptions", logging.raiseExceptions)  # run_train turns it off
    assert run_demo(["config.max_steps=4"]) == 0
    assert [Path(p.args.config.log_path) for p in started] == [folder.relative_to(tmp_path)]
    said = [line for line in capsys.readouterr().err.splitlines() if "resuming" in line]
    assert len(said) == 1 and said[0].startswith(f"tbconsole demo: resuming {folder.relative_to(tmp_path)} at step 3;")
    assert f"config.log_path={demo.RUNS_DIR / demo.RUN_PREFIX}" in said[0] and said[0].endswith("for a new run")
