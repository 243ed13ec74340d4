"""Real third-party agents through the capture proxy on the embedded default: one trial each of
Claude Code, Codex CLI, terminus-2 and mini-swe-agent, run from the shipped examples/ trial
configs in the local sandbox against the local engine (the demo's tiny policy), through the
runner's own ``run_group``.

The tiny policy writes garbage for these prompts, so a reward of 0 is expected; what is checked
is the plumbing: the agent's requests are answered (nothing refused that the agent did not cause),
turns are captured with log-probs, and the trial ends scored with a verifier reward. Each test
prints what the agent sent on its first call (prompt size, tools, side calls).

Claude Code and Codex CLI come from .agents/ (scripts/agents.sh, run by ``make test``): without
them these tests fail with the reason, they are not skipped.
"""

import json
from collections import Counter

import pytest

from tbconsole.harbor import agents
from tbconsole.proxy import read_capture

from tests_support.agents import EXAMPLES, first_call_facts, run_trial

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

MAX_TOKENS = 128  # the demo's config.max_tokens: the proxy caps every reply at it


def _require_cli(agent: str) -> None:
    problem = agents.problem(agent)
    if problem:
        pytest.fail(problem, pytrace=False)


def _captured(tmp_path) -> list:
    return [turn for path in sorted((tmp_path / "run" / "capture").rglob("*.jsonl")) for turn in read_capture(path)]


def _refused_by_the_agent(call, run) -> bool:
    """A 4xx the agent caused: a request over the trial's context window (a scored outcome)."""
    errors = [e.error or "" for e in run.of_kind("proxy.request") if e.status == call.status]
    return call.status == 400 and any("maximum context length" in e for e in errors)


def _check(run, tmp_path, agent: str, api_path: str) -> dict:
    facts = first_call_facts(run)
    print(f"\n{agent} first call: {json.dumps(facts, default=str)}")
    (tmp_path / f"{agent}-first-call.json").write_text(json.dumps(facts, indent=1, default=str))
    story = run.describe()
    unprovoked = [
        f"{c.method} {c.path} -> {c.status}" for c in run.recorder.refused() if not _refused_by_the_agent(c, run)
    ]
    assert not unprovoked, f"the proxy refused requests the agent did not cause: {unprovoked}\n{story}"
    assert any(c.path == api_path for c in run.recorder.calls), story
    turns = _captured(tmp_path)
    assert turns, f"no turn was captured\n{story}"
    assert all(len(t.logprobs) == len(t.output_tokens) > 0 for t in turns), story
    # Token continuity: every later turn either continues an earlier one (one datum) or its
    # capture line says why it starts a new datum.
    later = [t for t in turns if t.turn > 0]
    assert all((t.continues is None) != (t.new_datum is None) for t in later), story
    reasons = Counter(str(t.new_datum) for t in later if t.new_datum)
    print(
        f"{agent}: {len(turns)} turns, {sum(t.continues is not None for t in later)} continue, "
        f"new datums {dict(reasons)}"
    )
    return facts


def _check_scored(run, story_prefix: str = "") -> None:
    story = run.describe()
    assert run.error is None, f"{story_prefix}{story}"
    [ended] = run.ended
    assert ended.scored and ended.reward is not None, story
    assert run.rewards == [ended.reward], story
    assert sum(len(t.transitions) for t in run.result.trajectories) == ended.turns > 0, story


async def test_claude_code(tmp_path, sandbox_root, monkeypatch):
    _require_cli("claude-code")
    run = await run_trial(
        tmp_path, sandbox_root, monkeypatch, EXAMPLES / "claude-code-local.json", max_tokens=MAX_TOKENS
    )
    facts = _check(run, tmp_path, "claude-code", "/v1/messages")
    first = facts["first_call"]
    # trial.json's max_tokens reached Claude Code as CLAUDE_CODE_MAX_OUTPUT_TOKENS (it asks for 128k otherwise)
    assert first["max_tokens"] == 8192, first
    _check_scored(run)


async def test_codex(tmp_path, sandbox_root, monkeypatch):
    _require_cli("codex")
    run = await run_trial(tmp_path, sandbox_root, monkeypatch, EXAMPLES / "codex-local.json", max_tokens=MAX_TOKENS)
    _check(run, tmp_path, "codex", "/v1/responses")
    # The tiny policy rarely stops before max_tokens; Codex then fails its turn ("Incomplete
    # response returned, reason: max_output_tokens"): the scored output-limit outcome.
    _check_scored(run)


async def test_terminus_2(tmp_path, sandbox_root, monkeypatch):
    run = await run_trial(
        tmp_path, sandbox_root, monkeypatch, EXAMPLES / "terminus-2-local.json", max_tokens=MAX_TOKENS
    )
    facts = _check(run, tmp_path, "terminus-2", "/v1/chat/completions")
    assert facts["first_call"]["max_tokens"] == 8192 and facts["first_call"]["temperature"] == 0.8, facts
    _check_scored(run)


async def test_mini_swe_agent(tmp_path, sandbox_root, monkeypatch):
    run = await run_trial(
        tmp_path, sandbox_root, monkeypatch, EXAMPLES / "mini-swe-agent-local.json", max_tokens=MAX_TOKENS
    )
    _check(run, tmp_path, "mini-swe-agent", "/v1/chat/completions")
    _check_scored(run)
