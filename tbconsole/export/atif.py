"""The ATIF trajectory of one trial (Agent Trajectory Interchange Format), built with Harbor's own
pydantic models (``harbor.models.trajectories``), so that what is written validates and Harbor
reads it back.

Steps follow Harbor's own converters (its mini-swe-agent one): a system message is a ``system``
step; a user message before the agent's first reply is a ``user`` step; each reply is an
``agent`` step (``llm_call_count`` 1, its tool calls, its reasoning, and ``metrics``: prompt and
completion tokens, with tokens also ``completion_token_ids`` and ``logprobs`` as sampled); what
comes back after a reply (tool results, observations sent as user messages) is that step's
``observation``, a result linked to its tool call by ``tool_call_id`` where the agent sent one.
A reply's tool calls take the ids of the tool results that answer them, in order (the capture
keeps no ids of its own), else ``call_<step>_<k>``; arguments that are not a JSON object are
kept whole under ``"arguments"``. History a rewritten request carried again is marked
``is_copied_context`` (on its results: ``extra.copied``). The trial's facts are ``extra.tbconsole``.
A trial without a captured model call has one system step that says so (ATIF needs one).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tbconsole.common.formatting import format_iso_time
from tbconsole.export.conversation import Message

if TYPE_CHECKING:
    from harbor.models.trajectories import Step

NOTES = "Exported by tbconsole from the capture proxy's records of a training run."


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": text}


def _call_ids(messages: list[Message], at: int, step_id: int) -> list[str]:
    """Ids for the tool calls of the reply at ``at``: those of the tool results after it, else
    ``call_<step>_<k>``."""
    reply = messages[at]
    answered = []
    for m in messages[at + 1 :]:
        if m.role == "assistant":
            break
        if m.tool_call_id:
            answered.append(m.tool_call_id)
    ids: list[str] = []
    for k in range(len(reply.tool_calls)):
        candidate = answered[k] if k < len(answered) else f"call_{step_id}_{k}"
        ids.append(candidate if candidate not in ids else f"call_{step_id}_{k}")
    return ids


def atif_trajectory(
    facts: dict[str, Any], messages: list[Message], *, agent: tuple[str, str], model_name: str | None, tokens: bool
) -> dict[str, Any]:
    """The trajectory as JSON-ready data (validated on the way: Harbor's models raise otherwise)."""
    from harbor.models.trajectories import Agent, FinalMetrics, Step, Trajectory

    steps: list[Step] = []
    replied = False
    for at, m in enumerate(messages):
        if m.role == "assistant":
            replied = True
            steps.append(_agent_step(messages, at, len(steps) + 1, tokens))
        elif m.role == "system" or not replied or steps[-1].source != "agent":
            steps.append(_prompt_step(m, len(steps) + 1))
        else:
            _observe(steps[-1], m)
    if not steps:
        steps.append(Step(step_id=1, source="system", message="(no model call of this trial was captured)"))
    sampled_turns = [m.sampled for m in messages if m.sampled is not None]
    trajectory = Trajectory(
        session_id=facts["id"],
        trajectory_id=facts["id"],
        agent=Agent(name=agent[0], version=agent[1], model_name=model_name),
        steps=steps,
        notes=NOTES,
        final_metrics=FinalMetrics(
            total_prompt_tokens=sum(t.prompt_len for t in sampled_turns),
            total_completion_tokens=sum(len(t.output) for t in sampled_turns),
            total_steps=len(steps),
        ),
        extra={"tbconsole": facts},
    )
    # Built field by field above; validated whole here (step ids, tool-call references).
    return Trajectory.model_validate(trajectory.model_dump()).to_json_dict()


def _agent_step(messages: list[Message], at: int, step_id: int, tokens: bool) -> Step:
    """The ``agent`` step of the reply at ``at``: its text, reasoning and tool calls, and as
    sampled (where it was) its token counts, with ``tokens`` its token ids and logprobs too."""
    from harbor.models.trajectories import Metrics, Step, ToolCall

    m = messages[at]
    sampled = m.sampled
    metrics = None
    if sampled is not None:
        metrics = Metrics(
            prompt_tokens=sampled.prompt_len,
            completion_tokens=len(sampled.output),
            completion_token_ids=list(sampled.output) if tokens else None,
            logprobs=list(sampled.logprobs) if tokens else None,
            extra={"turn": sampled.turn, "stop_reason": sampled.stop_reason},
        )
    extra: dict[str, Any] = {}
    if m.parse_error:
        extra["parse_error"] = m.parse_error
    if m.decoded:
        extra["decoded"] = True
    calls = [
        ToolCall(tool_call_id=call_id, function_name=c.name, arguments=_arguments(c.arguments))
        for call_id, c in zip(_call_ids(messages, at, step_id), m.tool_calls, strict=True)
    ]
    return Step(
        step_id=step_id,
        timestamp=format_iso_time(sampled.started_at if sampled is not None else None),
        source="agent",
        message=m.content,
        reasoning_content=m.reasoning,
        tool_calls=calls or None,
        metrics=metrics,
        llm_call_count=1 if sampled is not None else None,
        is_copied_context=True if m.copied else None,
        extra=extra or None,
    )


def _prompt_step(m: Message, step_id: int) -> Step:
    """A ``system`` step for a system message, else a ``user`` step (a message before the first
    reply, or one with no reply before it to observe); a role other than these is in ``extra``."""
    from harbor.models.trajectories import Step

    extra: dict[str, Any] = {"role": m.role} if m.role not in ("system", "user") else {}
    if m.decoded:
        extra["decoded"] = True
    return Step(
        step_id=step_id,
        source="system" if m.role == "system" else "user",
        message=m.content,
        is_copied_context=True if m.copied else None,
        extra=extra or None,
    )


def _observe(step: Step, m: Message) -> None:
    """Adds what came back after the agent's reply (a tool result, an observation sent as a user
    message) to that reply's step, linked to the tool call it answers where the step has it."""
    from harbor.models.trajectories import Observation, ObservationResult

    known = {c.tool_call_id for c in step.tool_calls or ()}
    result_extra: dict[str, Any] = {"role": m.role}
    for key, value in (("name", m.name), ("copied", m.copied), ("decoded", m.decoded)):
        if value:
            result_extra[key] = value
    result = ObservationResult(
        source_call_id=m.tool_call_id if m.tool_call_id in known else None,
        content=m.content,
        extra=result_extra,
    )
    if step.observation is None:
        step.observation = Observation(results=[result])
    else:
        step.observation.results.append(result)
