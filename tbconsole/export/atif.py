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
from typing import Any

from tbconsole.common.formatting import format_iso_time
from tbconsole.export.conversation import Message

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
    from harbor.models.trajectories import (
        Agent,
        FinalMetrics,
        Metrics,
        Observation,
        ObservationResult,
        Step,
        ToolCall,
        Trajectory,
    )

    steps: list[Any] = []
    replied = False
    for at, m in enumerate(messages):
        copied = True if m.copied else None
        if m.role == "assistant":
            replied = True
            sampled = m.sampled
            metrics = None
            extra: dict[str, Any] = {}
            if sampled is not None:
                metrics = Metrics(
                    prompt_tokens=sampled.prompt_len,
                    completion_tokens=len(sampled.output),
                    completion_token_ids=list(sampled.output) if tokens else None,
                    logprobs=list(sampled.logprobs) if tokens else None,
                    extra={"turn": sampled.turn, "stop_reason": sampled.stop_reason},
                )
            if m.parse_error:
                extra["parse_error"] = m.parse_error
            if m.decoded:
                extra["decoded"] = True
            calls = [
                ToolCall(tool_call_id=call_id, function_name=c.name, arguments=_arguments(c.arguments))
                for call_id, c in zip(_call_ids(messages, at, len(steps) + 1), m.tool_calls, strict=True)
            ]
            steps.append(
                Step(
                    step_id=len(steps) + 1,
                    timestamp=format_iso_time(sampled.started_at if sampled is not None else None),
                    source="agent",
                    message=m.content,
                    reasoning_content=m.reasoning,
                    tool_calls=calls or None,
                    metrics=metrics,
                    llm_call_count=1 if sampled is not None else None,
                    is_copied_context=copied,
                    extra=extra or None,
                )
            )
        elif m.role == "system" or not replied or steps[-1].source != "agent":
            source = "system" if m.role == "system" else "user"
            extra = {"role": m.role} if m.role not in ("system", "user") else {}
            if m.decoded:
                extra["decoded"] = True
            steps.append(
                Step(
                    step_id=len(steps) + 1,
                    source=source,
                    message=m.content,
                    is_copied_context=copied,
                    extra=extra or None,
                )
            )
        else:
            step = steps[-1]
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
