"""Harbor trials of hand-made tasks through the runner's own ``run_group``: a task folder, the
run's context (the demo's renderer and tokenizer, an oracle agent in the local sandbox) and a group."""

import textwrap
from pathlib import Path

from tbconsole.record.control import RunControl
from tbconsole.record.events import TrialEnded
from tbconsole.runner.dataset import HarborGroupBuilder
from tbconsole.runner.rollout import RunContext
from tbconsole.runner.trials import ProxySettings, TrialTemplate


def make_task(root: Path, name: str, *, solve: str, test: str, agent_timeout: float = 60) -> Path:
    task = root / name
    for sub in ("solution", "tests", "environment"):
        (task / sub).mkdir(parents=True)
    (task / "instruction.md").write_text("Do the thing.\n")
    (task / "task.toml").write_text(
        textwrap.dedent(f"""
        schema_version = "1.1"
        [agent]
        timeout_sec = {agent_timeout}
        [verifier]
        timeout_sec = 30.0
        [environment]
        workdir = "/app"
    """)
    )
    (task / "environment" / "setup.sh").write_text("true\n")
    (task / "solution" / "solve.sh").write_text(solve)
    (task / "tests" / "test.sh").write_text("mkdir -p /logs/verifier\n" + test)
    return task


def context(
    tmp_path,
    sandbox_root,
    agent: dict | None = None,
    environment: dict | None = None,
    proxy: ProxySettings | None = None,
) -> tuple[RunContext, list]:
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import load_tokenizer

    tokenizer = load_tokenizer()
    renderer = get_renderer("qwen3_5", tokenizer)
    seen = []
    raw = {
        "agent": agent or {"name": "oracle"},
        "environment": environment
        or {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"root": str(sandbox_root)}},
    }
    ctx = RunContext(
        publish=seen.append,
        control=RunControl(seen.append),
        log_path=tmp_path / "run",
        renderer=renderer,
        tokenizer=tokenizer,
        template=TrialTemplate(raw=raw, proxy=proxy or ProxySettings(), source="test"),
        max_tokens=32,
    )
    return ctx, seen


def group(task: Path, size: int = 2) -> HarborGroupBuilder:
    return HarborGroupBuilder(task_dir=task, task_index=0, batch=0, group=0, group_size=size)


def ended(seen) -> list[TrialEnded]:
    return [e for e in seen if isinstance(e, TrialEnded)]
