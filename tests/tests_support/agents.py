"""One real trial of a third-party agent on a bundled task: the local sandbox, the capture proxy
and the local engine serving the demo's policy (``tbconsole/qwen3-tiny-agent``), run through the
runner's own ``run_group``. A recorder in front of the proxy's routes keeps every HTTP request
the agent makes (method, path, status, the body's shape), so a test can check that the proxy
refused nothing the agent did not cause, and report what the agent sends on its first call."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TASKS = REPO / "tbconsole" / "tasks"
MODEL = "tbconsole/qwen3-tiny-agent"


@dataclass
class Call:
    method: str
    path: str  # after /t/<trial>
    status: int
    body: dict[str, Any] | None
    headers: dict[str, str]

    def shape(self) -> dict[str, Any]:
        """What the request asked for, without its text."""
        body = self.body or {}
        system = body.get("system")
        messages = body.get("messages") or body.get("input") or []
        out = {
            "path": self.path,
            "status": self.status,
            "model": body.get("model"),
            "stream": body.get("stream"),
            "tools": len(body.get("tools") or []),
            "messages": len(messages) if isinstance(messages, list) else 1,
            "roles": sorted({m.get("role", m.get("type", "?")) for m in messages if isinstance(m, dict)})
            if isinstance(messages, list)
            else None,
            "system_blocks": (len(system) if isinstance(system, list) else int(bool(system))),
            "keys": sorted(body),
        }
        for key in (
            "max_tokens",
            "max_completion_tokens",
            "max_output_tokens",
            "temperature",
            "thinking",
            "reasoning",
            "tool_choice",
            "parallel_tool_calls",
            "store",
            "include",
            "text",
        ):
            if key in body:
                out[key] = body[key]
        if isinstance(body.get("instructions"), str):
            out["instructions_chars"] = len(body["instructions"])
        return out


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        raw = await request.read() if request.can_read_body else b""
        encoding = request.headers.get("Content-Encoding", "").lower()
        body = None
        try:
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
            body = json.loads(raw) if raw else None
        except (ValueError, OSError, zlib.error):
            body = None
        path = request.path
        if path.startswith("/t/"):
            path = "/" + path.split("/", 3)[-1]
        headers = {
            k.lower(): v
            for k, v in request.headers.items()
            if k.lower()
            in (
                "user-agent",
                "anthropic-version",
                "anthropic-beta",
                "openai-beta",
                "content-encoding",
                "x-stainless-lang",
                "originator",
                "version",
            )
        }
        call = Call(request.method, path, 0, body if isinstance(body, dict) else None, headers)
        self.calls.append(call)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            call.status = exc.status
            raise
        call.status = response.status
        return response

    def refused(self) -> list[Call]:
        return [c for c in self.calls if c.status >= 400]


def install_recorder(monkeypatch) -> Recorder:
    from tbconsole.proxy.server import CaptureProxy

    recorder = Recorder()
    original = CaptureProxy.app

    def app(self):
        made = original(self)
        made.middlewares.insert(0, recorder.middleware)
        return made

    monkeypatch.setattr(CaptureProxy, "app", app)
    return recorder


@dataclass
class TrialRun:
    events: list
    recorder: Recorder
    result: Any = None  # RolloutResult
    error: BaseException | None = None
    rewards: list = field(default_factory=list)

    def of_kind(self, kind: str) -> list:
        return [e for e in self.events if e.kind == kind]

    @property
    def ended(self):
        return self.of_kind("trial.ended")

    def describe(self) -> str:
        lines = [f"error: {self.error!r}"] if self.error else []
        for e in self.ended:
            lines.append(
                f"trial {e.trial}: outcome={e.outcome} scored={e.scored} reward={e.reward} "
                f"turns={e.turns} {e.exception_type or ''} {(e.exception_message or '')[:1500]}"
            )
        for e in self.of_kind("proxy.request"):
            lines.append(
                f"proxy.request status={e.status} captured={e.captured} prompt={e.prompt_tokens} "
                f"out={e.output_tokens} stop={e.stop_reason} error={e.error}"
            )
        for c in self.recorder.calls:
            lines.append(f"http {c.method} {c.path} -> {c.status}")
        return "\n".join(lines)


async def run_trial(
    tmp_path: Path,
    sandbox_root: Path,
    monkeypatch,
    trial_json: Path,
    *,
    task: str = "hello-file",
    max_tokens: int = 128,
    timeout: float = 600,
) -> TrialRun:
    """One trial of ``trial_json`` (loaded as the recipe loads it) on a bundled task."""
    import tinker
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.registry import load_tokenizer
    from tbconsole.record.control import RunControl
    from tbconsole.runner.dataset import HarborGroupBuilder
    from tbconsole.runner.rollout import RunContext, run_group
    from tbconsole.runner.trials import load_template

    recorder = install_recorder(monkeypatch)
    template = load_template(trial_json)
    environment = template.raw["environment"]
    environment["kwargs"] = {**(environment.get("kwargs") or {}), "root": str(sandbox_root)}
    tokenizer = load_tokenizer()
    events: list = []
    ctx = RunContext(
        publish=events.append,
        control=RunControl(events.append),
        log_path=tmp_path / "run",
        renderer=get_renderer("qwen3_5", tokenizer),
        tokenizer=tokenizer,
        template=template,
        max_tokens=max_tokens,
    )
    builder = HarborGroupBuilder(task_dir=TASKS / task, task_index=0, batch=0, group=0, group_size=1)
    run = TrialRun(events, recorder)
    with EmbeddedEngine(data_dir=str(tmp_path / "engine"), model=MODEL) as engine:
        service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        sampler = await service.create_sampling_client(base_model=MODEL)
        try:
            run.result = await asyncio.wait_for(run_group(ctx, builder, sampling_client=sampler), timeout)
        except Exception as exc:  # noqa: BLE001 - the test reports it with the trial's story
            run.error = exc
    run.rewards = [r.reward for r in builder.rewards] if getattr(builder, "rewards", None) else []
    return run


def first_call_facts(run: TrialRun) -> dict[str, Any]:
    """What the agent sent: its first model call's shape and prompt size, and its side calls."""
    model_calls = [
        c
        for c in run.recorder.calls
        if c.method == "POST" and c.path.endswith(("/messages", "/chat/completions", "/responses"))
    ]
    first = model_calls[0].shape() if model_calls else None
    requests = run.of_kind("proxy.request")
    if first is not None and requests:
        first["prompt_tokens"] = requests[0].prompt_tokens
    side = [f"{c.method} {c.path} -> {c.status}" for c in run.recorder.calls if c not in model_calls]
    return {
        "first_call": first,
        "model_calls": len(model_calls),
        "side_calls": side,
        "http_calls": len(run.recorder.calls),
    }
